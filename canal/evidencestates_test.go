package canal

import (
	"context"
	"strings"
	"testing"

	gocanal "github.com/go-mysql-org/go-mysql/canal"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/coupon"
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

// The decode of an evidence table with states: a row closed by an UPDATE
// is deleted, reopened is inserted, one inserted closed is not seen, an
// UPDATE that touches neither the state nor the (coupon, order) is
// nothing, and each row is placed among the batch's uses (After).
func TestDecodeEvidenceStates(t *testing.T) {
	y := strings.Replace(legacyYAML, "order: order_no}", "order: order_no, closed: [{column: is_del, values: [1]}, {column: refund, values: [2]}]}", 1)
	m, err := LoadMapping([]byte(y))
	require.NoError(t, err)
	d := newDecoder(m)
	uct := table("legacydb", "t_user_coupon", "id", "uid", "tpl_id", "state", "order_no", "expire_time")
	wo := table("legacydb", "t_writeoff", "id", "coupon_id", "order_no", "is_del", "refund", "amount")
	row := func(id int64, del, refund any, amount int64) []any {
		return []any{id, int64(5), "o1", del, refund, amount}
	}
	var b Batch
	for _, e := range []*gocanal.RowsEvent{
		ev(wo, gocanal.InsertAction, row(1, int8(0), nil, 10)),
		ev(uct, gocanal.UpdateAction, []any{int64(5), "u", int32(9), int8(0), nil, nil}, []any{int64(5), "u", int32(9), int8(1), nil, nil}),
		ev(wo, gocanal.UpdateAction, row(1, int8(0), nil, 10), row(1, int8(0), nil, 20)),         // the amount only: nothing
		ev(wo, gocanal.UpdateAction, row(1, int8(0), nil, 20), row(1, int8(0), int8(2), 20)),     // refunded: deleted
		ev(wo, gocanal.UpdateAction, row(1, int8(0), int8(2), 20), row(1, int8(1), int8(2), 20)), // closed again: nothing
		ev(wo, gocanal.InsertAction, row(2, int8(1), nil, 10)),                                   // inserted closed: not seen
		ev(wo, gocanal.UpdateAction, row(2, int8(1), nil, 10), row(2, int8(0), nil, 10)),         // reopened: inserted
		ev(wo, gocanal.DeleteAction, row(2, int8(0), nil, 10)),                                   // deleted
		ev(wo, gocanal.DeleteAction, row(1, int8(1), int8(2), 20)),                               // a closed row deleted: nothing
	} {
		_, err := d.decode(e, &b)
		require.NoError(t, err)
	}
	require.Len(t, b.Transitions, 1)
	require.Equal(t, coupon.Used, b.Transitions[0].To)
	r := func(id int64, after int, deleted bool) Redemption {
		return Redemption{ID: id, Coupon: 5, Channel: "legacy", Order: "o1", At: testAt, After: after, Deleted: deleted}
	}
	require.Equal(t, []Redemption{r(1, 0, false), r(1, 1, true), r(2, 1, false), r(2, 1, true)}, b.Redemptions)
}

// mapping check finds each state column of the evidence table (on
// redemption_log and through an orders role naming it), and each column of
// a fixed window, and wants integers (a time for start_time).
func TestMappingCheckEvidenceStatesAndWindow(t *testing.T) {
	ctx := context.Background()
	db, _, dbName, exec := testDatabase(t)
	createLegacyTables(t, ctx, exec)
	exec("ALTER TABLE t_writeoff ADD COLUMN is_del TINYINT NOT NULL DEFAULT 0, ADD COLUMN refund VARCHAR(8) NULL")
	exec("ALTER TABLE t_coupon_tpl ADD COLUMN kind TINYINT NOT NULL DEFAULT 1, ADD COLUMN ends DATETIME NULL, ADD COLUMN starts INT NULL")
	legacy := strings.Replace(legacyYAML, "schema: legacydb", "schema: "+dbName, 1)
	y := strings.Replace(legacy, "order: order_no}", "order: order_no, deleted: {column: is_del, values: [1]}}", 1) +
		"orders: {table: t_writeoff, id: id, closed: [{column: refund, values: [2]}, {column: gone, values: [1]}]}\n"
	y = strings.Replace(y, "total_quota: budget}", "total_quota: budget, end_time: ends, start_time: starts, fixed_window: {column: kind, values: [1]}}", 1)
	m, err := LoadMapping([]byte(y))
	require.NoError(t, err)
	err = m.Check(ctx, db)
	require.ErrorContains(t, err, `redemption_log.orders.closed[1] names column "gone" but `+dbName+`.t_writeoff has no such column`)

	exec("ALTER TABLE t_writeoff ADD COLUMN gone TINYINT NULL")
	require.NoError(t, m.Check(ctx, db))
	r, err := m.Inspect(ctx, db)
	require.NoError(t, err)
	errs := strings.Join(r.Errors, "\n")
	require.Len(t, r.Errors, 2, errs)
	require.Contains(t, errs, "redemption_log.orders.closed[0] names "+dbName+".t_writeoff.refund, a varchar(8) column; it must be an integer")
	require.Contains(t, errs, "template.start_time names "+dbName+".t_coupon_tpl.starts, a int(11) column; it must be a DATETIME or TIMESTAMP")
	var roles []string
	for _, role := range r.Roles {
		roles = append(roles, role.Role)
	}
	require.Subset(t, roles, []string{"redemption_log.deleted", "redemption_log.orders.closed[1]", "template.fixed_window", "template.start_time"})

	exec("ALTER TABLE t_writeoff MODIFY refund TINYINT NULL")
	exec("ALTER TABLE t_coupon_tpl MODIFY starts DATETIME NULL")
	r, err = m.Inspect(ctx, db)
	require.NoError(t, err)
	require.Empty(t, r.Errors)
}
