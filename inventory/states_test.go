package inventory_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/inventory"
)

// statesYAML maps a shop with soft-deleted coupons and orders closed by
// status 4 or 5 (or soft-deleted).
const statesYAML = `
schema: %s
user_coupon: {table: s_coupon, id: id, template: tpl, status: st, order: sn, user: uid, deleted: {column: del, values: [1]}}
status: {AVAILABLE: [0], USED: [1], EXPIRED: [2]}
template: {table: s_tpl, id: id, total_quota: budget}
default_channel: d
redemption_evidence: order_table
orders: {table: s_order, id: id, template: tpl, user: uid, order: sn, status: state, closed: [4, 5], deleted: {column: del, values: [1]}}
`

// A snapshot counts no soft-deleted coupon, and the order keys of a first
// start compare the live USED coupons with the open orders only; the
// coupon_order look-up finds only open orders.
func TestQueriesLeaveOutEndedRows(t *testing.T) {
	oneColumn := struct{ yaml, coupons, orders string }{statesYAML,
		`(1, 1, 'a', 1, 'o1', 0, 0), (2, 1, 'a', 1, 'o2', 1, 0), (3, 1, 'b', 0, 'o3', NULL, NULL), (4, 1, 'b', 1, 'o4', NULL, 0),
		(5, 1, 'c', 0, NULL, 1, NULL)`,
		`(1, 1, 'a', 'o1', 1, 0, 0), (2, 1, 'a', 'o2', 4, 0, 0), (3, 1, 'b', 'o3', 5, 0, 0), (4, 1, 'b', 'o4', NULL, 0, NULL),
		(5, 1, 'c', 'o5', 1, 1, 0), (6, 1, 'd', 'o6', 0, 0, 1)`}
	// the same rows ended by other columns: coupon 2 deleted by del2,
	// order 3 closed by refund 2
	twoColumns := struct{ yaml, coupons, orders string }{strings.NewReplacer(
		"deleted: {column: del, values: [1]}}\nstatus", "deleted: [{column: del, values: [1]}, {column: del2, values: [1]}]}\nstatus",
		"closed: [4, 5]", "closed: [4, {column: refund, values: [2]}]").Replace(statesYAML),
		strings.Replace(oneColumn.coupons, "(2, 1, 'a', 1, 'o2', 1, 0)", "(2, 1, 'a', 1, 'o2', 0, 1)", 1),
		strings.Replace(oneColumn.orders, "(3, 1, 'b', 'o3', 5, 0, 0)", "(3, 1, 'b', 'o3', 1, 0, 2)", 1)}
	require.NotEqual(t, statesYAML, twoColumns.yaml)
	for name, c := range map[string]struct{ yaml, coupons, orders string }{"one column": oneColumn, "two columns": twoColumns} {
		t.Run(name, func(t *testing.T) { testLeaveOutEndedRows(t, c.yaml, c.coupons, c.orders) })
	}
}

func testLeaveOutEndedRows(t *testing.T, yaml, coupons, orders string) {
	ctx := context.Background()
	db, _ := testenv.MySQL(t)
	var dbName string
	require.NoError(t, db.QueryRow("SELECT DATABASE()").Scan(&dbName))
	exec := func(q string) {
		_, err := db.ExecContext(ctx, q)
		require.NoError(t, err, q)
	}
	exec("CREATE TABLE s_coupon (id BIGINT NOT NULL PRIMARY KEY, tpl INT NOT NULL, uid VARCHAR(16) NOT NULL, st TINYINT NOT NULL, sn VARCHAR(16) NULL, del TINYINT NULL, del2 TINYINT NULL)")
	exec("CREATE TABLE s_order (id BIGINT NOT NULL PRIMARY KEY, tpl INT NULL, uid VARCHAR(16) NOT NULL, sn VARCHAR(16) NOT NULL, state TINYINT NULL, del TINYINT NOT NULL DEFAULT 0, refund TINYINT NULL)")
	exec("CREATE TABLE s_tpl (id INT NOT NULL PRIMARY KEY, budget INT NOT NULL)")
	exec("INSERT INTO s_coupon VALUES " + coupons)
	exec("INSERT INTO s_order (id, tpl, uid, sn, state, del, refund) VALUES " + orders)
	m, err := canal.LoadMapping(fmt.Appendf(nil, yaml, dbName))
	require.NoError(t, err)
	require.NoError(t, m.Check(ctx, db))
	src := inventory.NewQueries(m)

	snap, err := inventory.TakeSnapshot(ctx, db, m)
	require.NoError(t, err)
	require.Equal(t, map[inventory.Pair]*inventory.Counts{{Template: 1, Channel: "d"}: {Held: 1, Used: 2}}, snap.Counts,
		"coupons 2 and 5 are soft-deleted")

	type diff struct {
		user                 string
		used, orders, coupon int64
	}
	var got []diff
	tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()
	require.NoError(t, src.OrderKeyDifferences(ctx, tx, func(tpl int64, user string, used, orders, last int64) error {
		got = append(got, diff{user, used, orders, last})
		return nil
	}))
	require.ElementsMatch(t, []diff{{"d", 0, 1, 0}}, got, "a: 1 live USED, 1 open order; b: 1 USED, 1 open (NULL state); c: none live")

	m, err = canal.LoadMapping([]byte(strings.NewReplacer("redemption_evidence: order_table", "redemption_evidence: coupon_order",
		"template: tpl, user: uid, order: sn, status", "order: sn, status").Replace(fmt.Sprintf(yaml, dbName))))
	require.NoError(t, err)
	open, err := inventory.NewQueries(m).OpenOrders(ctx, db, []string{"o1", "o2", "o3", "o4", "o5", "o6", "nowhere"})
	require.NoError(t, err)
	require.Equal(t, map[string]bool{"o1": true, "o4": true, "o6": true}, open)
}

// An evidence table with states (the orders table as the write-off
// record): the look-ups of a use and the counts of a bootstrap read its
// live rows only, closed by either column.
func TestQueriesLiveEvidenceOnly(t *testing.T) {
	ctx := context.Background()
	db, _ := testenv.MySQL(t)
	var dbName string
	require.NoError(t, db.QueryRow("SELECT DATABASE()").Scan(&dbName))
	for _, q := range []string{
		"CREATE TABLE e_order (id BIGINT NOT NULL PRIMARY KEY, coupon_id BIGINT NOT NULL, sn VARCHAR(16) NOT NULL, is_del TINYINT NULL, refund TINYINT NULL)",
		`INSERT INTO e_order VALUES (1, 1, 'o1', 0, NULL), (2, 1, 'o2', 0, 2), (3, 2, 'o3', 1, NULL), (4, 2, 'o3', 0, 0), (5, 2, 'o3', NULL, NULL),
			(6, 3, 'o6', 1, 2)`,
	} {
		_, err := db.ExecContext(ctx, q)
		require.NoError(t, err, q)
	}
	m, err := canal.LoadMapping([]byte(fmt.Sprintf(`
schema: %s
user_coupon: {table: s_coupon, id: id, template: tpl, status: st}
status: {AVAILABLE: [0], USED: [1], EXPIRED: [2]}
template: {table: s_tpl, id: id, total_quota: budget}
redemption_log: {table: e_order, id: id, coupon: coupon_id, order: sn}
orders: {table: e_order, id: id, closed: [{column: is_del, values: [1]}, {column: refund, values: [2]}]}
`, dbName)))
	require.NoError(t, err)
	src := inventory.NewQueries(m)
	found, err := src.Redeemed(ctx, db, []int64{1, 2, 3})
	require.NoError(t, err)
	require.Equal(t, map[int64][]string{1: {"o1"}, 2: {"o3", "o3"}}, found)
	keys := map[string]int64{}
	require.NoError(t, src.RedemptionKeys(ctx, db, false, func(c int64, order string, n int64) error {
		keys[fmt.Sprint(c, "/", order)] = n
		return nil
	}))
	require.Equal(t, map[string]int64{"1/o1": 1, "2/o3": 2}, keys)
}
