package sink_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/inventory"
	"github.com/couponlink/couponlink/inventory/view"
	"github.com/couponlink/couponlink/sink"
	"github.com/couponlink/couponlink/webhook"
)

// Void and refund-recycle give the slot back to its bucket once, with a
// release row; refund-restore and expiry under "freeze" give nothing back;
// a slot a legacy writer released already is not released twice.
func TestReleasesFollowTheTransitions(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	tpl := e.Template(map[string]int64{"app": 10}, time.Hour)
	e.StartCDC(nil)
	ids := map[string]int64{}
	for _, u := range []string{"void", "recycle", "restore", "expire", "legacy"} {
		c, err := e.Store.Claim(ctx, coupon.ClaimRequest{TemplateID: tpl, UserID: u, Channel: "app", RequestID: u})
		require.NoError(t, err)
		ids[u] = c.UserCouponID
	}
	_, err := e.Store.Void(ctx, coupon.VoidRequest{UserCouponIDs: []int64{ids["void"]}, Reason: "test", Operator: "ops", RequestID: "v1"})
	require.NoError(t, err)
	for _, u := range []string{"recycle", "restore"} {
		_, err = e.Store.Redeem(ctx, coupon.RedeemRequest{UserCouponID: ids[u], OrderID: "o-" + u})
		require.NoError(t, err)
		_, err = e.Store.Refund(ctx, coupon.RefundRequest{UserCouponID: ids[u], OrderID: "o-" + u, Mode: u})
		require.NoError(t, err)
	}
	_, err = e.DB.Exec(`UPDATE user_coupon SET status = 3 WHERE id = ?`, ids["expire"]) // freeze policy: no release
	require.NoError(t, err)
	// a legacy writer releases "legacy" itself, then voids it
	_, err = e.DB.Exec(`INSERT INTO inventory_flow (user_coupon_id, kind, template_id, channel, from_status, to_status) VALUES (?, 'release', ?, 'app', 1, 1)`, ids["legacy"], tpl)
	require.NoError(t, err)
	_, err = e.DB.Exec(`UPDATE channel_quota SET claimed = claimed - 1 WHERE template_id = ?`, tpl)
	require.NoError(t, err)
	_, err = e.DB.Exec(`UPDATE user_coupon SET status = 4 WHERE id = ?`, ids["legacy"])
	require.NoError(t, err)

	e.assertTruth(true)
	released := testenv.CountsBy[int64](t, e.DB, `SELECT user_coupon_id, COUNT(*) FROM inventory_flow WHERE kind = 'release' GROUP BY 1`)
	require.Equal(t, map[int64]int{ids["void"]: 1, ids["recycle"]: 1, ids["legacy"]: 1}, released)
	var claimed int64
	require.NoError(t, e.DB.QueryRow(`SELECT claimed FROM channel_quota WHERE template_id = ?`, tpl).Scan(&claimed))
	require.EqualValues(t, 2, claimed, "5 claimed, 3 slots back (void, recycle, legacy); restore and freeze keep theirs")
	inv, err := view.Live(ctx, e.DB, tpl)
	require.NoError(t, err)
	require.True(t, inv.Conserved(), "%+v", inv.Counts)
	require.EqualValues(t, 8, inv.Claimable())
}

// releaseTemplate is a store on clock and a template of 10 coupons on
// app, valid 60 s, under the "release" policy with its cooldown.
func (e *env) releaseTemplate(clock *fakeClock, cooldown int64) (*coupon.Store, coupon.Template) {
	e.T.Helper()
	store, err := coupon.New(coupon.Config{DB: e.DB, Now: clock.Now})
	require.NoError(e.T, err)
	tpl, err := store.CreateTemplate(context.Background(), coupon.NewTemplate{Name: "r", TotalQuota: 10, Channels: map[string]int64{"app": 10},
		ValidSeconds: 60, ExpiryPolicy: coupon.PolicyRelease, ReleaseCooldownSeconds: &cooldown})
	require.NoError(e.T, err)
	return store, tpl
}

// claimEach claims a coupon of tpl on app for each of n users (u0, u1, …)
// and returns their ids.
func claimEach(t *testing.T, store *coupon.Store, tpl int64, n int) []int64 {
	t.Helper()
	var ids []int64
	for i := range n {
		c, err := store.Claim(context.Background(), coupon.ClaimRequest{TemplateID: tpl, UserID: fmt.Sprint("u", i), Channel: "app", RequestID: fmt.Sprint("r", i)})
		require.NoError(t, err)
		ids = append(ids, c.UserCouponID)
	}
	return ids
}

// Under the "release" policy an expired coupon's slot goes back once its
// cooldown after expires_at has passed, not before, and only once.
func TestExpiryReleaseAfterCooldown(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	clock := newFakeClock()
	store, tpl := e.releaseTemplate(clock, 3600)
	e.StartCDC(nil, func(c *sink.Config, _ *sink.Daemon) { c.Now = clock.Now; c.ReleaseEvery = time.Millisecond })
	claimEach(t, store, tpl.ID, 3)
	clock.Advance(61 * time.Second)
	res, err := store.ExpireDue(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, 3, res.Expired)
	e.assertTruth(true)
	claimed := func() int64 {
		var n int64
		require.NoError(t, e.DB.QueryRow(`SELECT claimed FROM channel_quota WHERE template_id = ?`, tpl.ID).Scan(&n))
		return n
	}
	require.EqualValues(t, 3, claimed(), "within the cooldown the slots stay frozen")
	scheduled := func() (n int) {
		require.NoError(t, e.DB.QueryRow(`SELECT COUNT(*) FROM release_due`).Scan(&n))
		return n
	}
	require.Equal(t, 3, scheduled(), "the batch that saw the expiries scheduled their releases")

	clock.Advance(time.Hour) // cooldown over
	cdctest.WaitFor(t, 30*time.Second, "the expired slots released", func() bool { return claimed() == 0 })
	e.assertTruth(true)
	clock.Advance(time.Hour) // more sweeps find nothing more to release
	e.assertTruth(true)
	var flows int
	require.NoError(t, e.DB.QueryRow(`SELECT COUNT(*) FROM inventory_flow WHERE kind = 'release'`).Scan(&flows))
	require.Equal(t, 3, flows)
	require.EqualValues(t, 0, claimed())
	require.Zero(t, scheduled(), "released coupons leave the schedule")
}

// Coupons that expired, were voided or recycled before the cdc's first
// start (its bootstrap did not see those transitions in the binlog) are
// scheduled by the bootstrap and released like the others.
func TestBootstrapReleasesWhatCameBefore(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	clock := newFakeClock()
	clock.Advance(-time.Hour)
	store, tpl := e.releaseTemplate(clock, 0)
	ids := claimEach(t, store, tpl.ID, 5)
	_, err := store.Void(ctx, coupon.VoidRequest{UserCouponIDs: ids[2:3], Reason: "test", Operator: "ops", RequestID: "v"})
	require.NoError(t, err)
	for i, mode := range []string{coupon.RefundRecycle, coupon.RefundRestore} {
		id := ids[3+i]
		_, err = store.Redeem(ctx, coupon.RedeemRequest{UserCouponID: id, OrderID: fmt.Sprint("o", id)})
		require.NoError(t, err)
		_, err = store.Refund(ctx, coupon.RefundRequest{UserCouponID: id, OrderID: fmt.Sprint("o", id), Mode: mode})
		require.NoError(t, err)
	}
	clock.Advance(2 * time.Minute)
	res, err := store.ExpireDue(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, 3, res.Expired, "two claimed and the restored one")

	e.StartCDC(nil, func(c *sink.Config, _ *sink.Daemon) { c.ReleaseEvery = 10 * time.Millisecond })
	cdctest.WaitFor(t, 30*time.Second, "the slots of the coupons expired, voided and recycled before the bootstrap released", func() bool {
		var claimed int64
		require.NoError(t, e.DB.QueryRow(`SELECT claimed FROM channel_quota WHERE template_id = ?`, tpl.ID).Scan(&claimed))
		return claimed == 0
	})
	e.assertTruth(true)
	var rows, coupons int
	require.NoError(t, e.DB.QueryRow(`SELECT COUNT(*), COUNT(DISTINCT user_coupon_id) FROM inventory_flow WHERE kind = 'release'`).Scan(&rows, &coupons))
	require.Equal(t, 5, rows)
	require.Equal(t, 5, coupons)
}

// With webhooks on, an anomaly and a release each become one event in the
// outbox, written with the batch that saw them.
func TestAnomalyAndReleaseEvents(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	tpl := e.Template(map[string]int64{"app": 10}, time.Hour)
	e.StartCDC(nil, func(c *sink.Config, _ *sink.Daemon) { c.Webhooks = true })
	e.WaitCheckpoint()
	var ids []int64
	for i := range 3 {
		c, err := e.Store.Claim(ctx, coupon.ClaimRequest{TemplateID: tpl, UserID: fmt.Sprint("u", i), Channel: "app", RequestID: fmt.Sprint("r", i)})
		require.NoError(t, err)
		ids = append(ids, c.UserCouponID)
	}
	_, err := e.Store.Void(ctx, coupon.VoidRequest{UserCouponIDs: ids[:2], Reason: "test", Operator: "ops", RequestID: "v"})
	require.NoError(t, err)
	_, err = e.DB.Exec(`UPDATE user_coupon SET status = 3 WHERE id = ?`, ids[0]) // RETURNED -> EXPIRED: illegal
	require.NoError(t, err)
	e.assertTruth(true)

	// one event per channel per transaction: the voids may have been one or two
	var voided float64
	for _, ev := range e.outbox(webhook.QuotaReleased) {
		data := ev["data"].(map[string]any)
		require.Equal(t, data["released"], data["by_cause"].(map[string]any)["void"], "%v", ev)
		voided += data["released"].(float64)
	}
	require.EqualValues(t, 2, voided)
	anomalies := e.outbox(webhook.AnomalyDetected)
	require.Len(t, anomalies, 1)
	data := anomalies[0]["data"].(map[string]any)
	require.Equal(t, inventory.AnomalyIllegalTransition, data["kind"])
	require.EqualValues(t, 1, data["count"])
	require.Equal(t, []any{float64(ids[0])}, data["coupons_sample"])
	require.Equal(t, "app", anomalies[0]["channel"])
}
