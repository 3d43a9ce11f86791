package canal

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The states of an evidence table: on redemption_log, or by an orders
// role that names the evidence table itself; both read alike by the
// decode (EvidenceEnded) and SQL, and refused where they mean nothing.
func TestEvidenceStatesMapping(t *testing.T) {
	onLog := strings.Replace(legacyYAML, "order: order_no}", "order: order_no, deleted: {column: is_del, values: [1]}}", 1)
	m, err := LoadMapping([]byte(onLog))
	require.NoError(t, err)
	require.Equal(t, AnyOf{{Column: "is_del", Values: []int64{1}}}, m.EvidenceEnded())
	require.Equal(t, []string{"legacydb.t_user_coupon", "legacydb.t_writeoff", "legacydb.t_coupon_tpl"}, m.SourceTables())

	asOrders := legacyYAML + "orders: {table: t_writeoff, id: id, status: st, closed: [4, {column: refund_status, values: [2]}], deleted: {column: is_del, values: [1]}}\n"
	m, err = LoadMapping([]byte(asOrders))
	require.NoError(t, err)
	ended := m.EvidenceEnded()
	require.Equal(t, AnyOf{{Column: "st", Values: []int64{4}}, {Column: "refund_status", Values: []int64{2}}, {Column: "is_del", Values: []int64{1}}}, ended)
	require.Equal(t, "(`st` IS NULL OR `st` NOT IN (4)) AND (`refund_status` IS NULL OR `refund_status` NOT IN (2)) AND (`is_del` IS NULL OR `is_del` NOT IN (1))",
		ended.NotSQL(func(c string) string { return "`" + c + "`" }))
	closed, err := ended.Matches([]any{int64(1), int64(2), nil})
	require.NoError(t, err)
	require.True(t, closed, "refunded")
	open, err := ended.Matches([]any{int64(1), nil, int64(0)})
	require.NoError(t, err)
	require.False(t, open)
	_, refs := m.evidenceStates()
	require.Equal(t, []colRef{{"orders.status", "st", false}, {"orders.closed[1]", "refund_status", false}, {"orders.deleted", "is_del", false}}, refs)

	noStates, err := LoadMapping([]byte(legacyYAML))
	require.NoError(t, err)
	require.False(t, noStates.EvidenceStates())

	for _, c := range []struct{ name, yaml, want string }{
		{"orders on another table", legacyYAML + "orders: {table: t_order, id: id, closed: [{column: is_del, values: [1]}]}\n",
			"with table evidence orders may only name the evidence table itself"},
		{"states without the order column", strings.Replace(onLog, "order: order_no, deleted", "deleted", 1), "evidence states need redemption_log.order"},
		{"states with no values", strings.Replace(onLog, "values: [1]", "values: []", 1), "redemption_log.deleted lists no value"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := LoadMapping([]byte(c.yaml))
			require.ErrorContains(t, err, c.want)
		})
	}
}
