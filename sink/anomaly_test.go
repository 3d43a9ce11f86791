package sink_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/inventory"
	"github.com/couponlink/couponlink/sink"
)

// A USED coupon's redemption row is looked for by its order: a row of
// another order does not excuse it, and each move into USED without a row
// is one anomaly, even when one coupon does it twice within the grace.
func TestUsedWithoutRedemptionIsJudgedPerOrder(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	tpl := e.Template(map[string]int64{"app": 100}, time.Hour)
	c := e.StartCDC(nil, func(cfg *sink.Config, _ *sink.Daemon) { cfg.RedemptionGrace = 500 * time.Millisecond })
	e.WaitCheckpoint()
	ids := map[string]int64{}
	for _, name := range []string{"c1", "c2", "c3", "c4"} {
		cl, err := e.Store.Claim(ctx, coupon.ClaimRequest{TemplateID: tpl, UserID: name, Channel: "app", RequestID: name})
		require.NoError(t, err)
		ids[name] = cl.UserCouponID
	}
	exec := func(q string, args ...any) {
		_, err := e.DB.Exec(q, args...)
		require.NoError(t, err, q)
	}
	used := func(id int64, order string) {
		exec(`UPDATE user_coupon SET status = 2, order_id = ? WHERE id = ? AND status = 1`, order, id)
	}
	restore := func(id int64) {
		exec(`UPDATE user_coupon SET status = 1, order_id = NULL WHERE id = ? AND status = 2`, id)
	}
	row := func(id int64, order string) {
		exec(`INSERT INTO redemption_log (user_coupon_id, template_id, channel, order_id, redeemed_at, idempotency_key)
			VALUES (?, ?, 'app', ?, NOW(6), ?)`, id, tpl, order, coupon.RedemptionKey(order, id))
	}
	// c1: USED by g1 without a row, refunded, then redeemed properly by o1: g1 is an anomaly
	used(ids["c1"], "g1")
	restore(ids["c1"])
	_, err := e.Store.Redeem(ctx, coupon.RedeemRequest{UserCouponID: ids["c1"], OrderID: "o1"})
	require.NoError(t, err)
	// c2: USED without a row twice (g2, then g3): two anomalies
	used(ids["c2"], "g2")
	restore(ids["c2"])
	used(ids["c2"], "g3")
	// c3: USED by o3, its row a moment later: fine
	used(ids["c3"], "o3")
	row(ids["c3"], "o3")
	// c4: USED by o4, but the row that comes names another order: an anomaly
	used(ids["c4"], "o4")
	row(ids["c4"], "other")

	e.waitSettled(c, 30*time.Second)
	require.Equal(t, map[string]int{inventory.AnomalyUsedWithoutRedemption: 4}, e.anomalies())
	rows, err := e.DB.Query(`SELECT user_coupon_id, order_id FROM cdc_anomaly WHERE kind = ? ORDER BY user_coupon_id, order_id`, inventory.AnomalyUsedWithoutRedemption)
	require.NoError(t, err)
	defer rows.Close()
	var got [][2]any
	for rows.Next() {
		var id int64
		var order string
		require.NoError(t, rows.Scan(&id, &order))
		got = append(got, [2]any{id, order})
	}
	require.Equal(t, [][2]any{{ids["c1"], "g1"}, {ids["c2"], "g2"}, {ids["c2"], "g3"}, {ids["c4"], "o4"}}, got)
	e.assertTruth(true)
}

// Moving a coupon to another template or channel is no legal transition,
// with or without a status change; the counters follow the move.
func TestMovedCouponIsIllegal(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	tpl := e.Template(map[string]int64{"app": 100, "web": 100}, time.Hour)
	other := e.Template(map[string]int64{"app": 100}, time.Hour)
	c := e.StartCDC(nil)
	e.WaitCheckpoint()
	var ids []int64
	for _, name := range []string{"m1", "m2", "m3", "m4"} {
		cl, err := e.Store.Claim(ctx, coupon.ClaimRequest{TemplateID: tpl, UserID: name, Channel: "app", RequestID: name})
		require.NoError(t, err)
		ids = append(ids, cl.UserCouponID)
	}
	exec := func(q string, args ...any) {
		_, err := e.DB.Exec(q, args...)
		require.NoError(t, err, q)
	}
	exec(`UPDATE user_coupon SET channel = 'web' WHERE id = ?`, ids[0])                    // another channel
	exec(`UPDATE user_coupon SET template_id = ? WHERE id = ?`, other, ids[1])             // another template
	exec(`UPDATE user_coupon SET channel = 'web', status = 4 WHERE id = ?`, ids[2])        // moved and voided (a legal status change)
	exec(`UPDATE user_coupon SET template_id = ?, status = 3 WHERE id = ?`, other, ids[3]) // moved and expired (legal)
	e.waitSettled(c, 30*time.Second)
	e.assertTruth(true)
	require.Equal(t, map[string]int{inventory.AnomalyIllegalTransition: 4}, e.anomalies())
}
