package sink_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/inventory"
	"github.com/couponlink/couponlink/sink"
)

// pendingChecks counts the durable used-without-redemption checks.
func (e *env) pendingChecks() int {
	e.T.Helper()
	var n int
	require.NoError(e.T, e.DB.QueryRow(`SELECT COUNT(*) FROM cdc_pending_redemption`).Scan(&n))
	return n
}

// A used-without-redemption check outlives a kill -9 of `couponlink cdc`
// inside the grace: the restarted process decides it, once; and a
// redemption row that arrives while the cdc is down settles its check.
func TestPendingRedemptionChecksSurviveKill(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	tpl := e.Template(map[string]int64{"app": 100}, time.Hour)
	ids := map[string]int64{}
	for _, name := range []string{"ghost", "late"} {
		cl, err := e.Store.Claim(ctx, coupon.ClaimRequest{TemplateID: tpl, UserID: name, Channel: "app", RequestID: name})
		require.NoError(t, err)
		ids[name] = cl.UserCouponID
	}
	runner := newCDCRunner(t, e, testenv.RedisAddr(t))
	const grace = 8 * time.Second
	runner.args = append(runner.args, "-redemption-grace", grace.String())
	p := runner.start()
	e.WaitCheckpoint()

	used := time.Now()
	for name, id := range ids {
		_, err := e.DB.Exec(`UPDATE user_coupon SET status = 2, order_id = ? WHERE id = ?`, "o-"+name, id)
		require.NoError(t, err)
	}
	e.WaitCheckpoint() // the batch that saw both moves into USED is committed
	_ = p.signal(syscall.SIGKILL)
	require.Less(t, time.Since(used), grace, "the kill came after the grace: the test proves nothing")
	require.Empty(t, e.anomalies(), "decided before the grace was over")

	// the row of "late" arrives while no cdc runs
	_, err := e.DB.Exec(`INSERT INTO redemption_log (user_coupon_id, template_id, channel, order_id, redeemed_at, idempotency_key)
		VALUES (?, ?, 'app', 'o-late', NOW(6), ?)`, ids["late"], tpl, coupon.RedemptionKey("o-late", ids["late"]))
	require.NoError(t, err)

	p = runner.start()
	cdctest.WaitFor(t, 60*time.Second, "the pending checks decided after the restart", func() bool {
		return e.pendingChecks() == 0 && len(e.anomalies()) > 0
	})
	e.WaitCheckpoint()
	// the anomaly is written in the transaction that drops its check: none can follow
	require.Equal(t, map[string]int{inventory.AnomalyUsedWithoutRedemption: 1}, e.anomalies())
	var id int64
	var order string
	require.NoError(t, e.DB.QueryRow(`SELECT user_coupon_id, order_id FROM cdc_anomaly`).Scan(&id, &order))
	require.Equal(t, ids["ghost"], id)
	require.Equal(t, "o-ghost", order)
	require.EqualValues(t, 1, e.checkpoint().Anomalies)
	require.NoError(t, p.signal(syscall.SIGTERM))
}

// A release's Redis keys are right as soon as the release commits: a cdc
// that stops before it reads its own channel_quota change back from the
// binlog leaves no key too low. Here the sink applies one batch (a void)
// and nothing after it, as a cdc stopped right then.
func TestReleasedKeysWrittenAtCommit(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	tpl := e.Template(map[string]int64{"app": 10, "web": 10}, time.Hour)
	var mine []int64
	for i, ch := range []string{"app", "app", "app", "web"} {
		cl, err := e.Store.Claim(ctx, coupon.ClaimRequest{TemplateID: tpl, UserID: "u", Channel: ch, RequestID: string(rune('a' + i))})
		require.NoError(t, err)
		mine = append(mine, cl.UserCouponID)
	}
	s, err := sink.New(sink.Config{DB: e.DB, Redis: e.RDB, Keys: e.Keys, Logger: testenv.QuietLogger()})
	require.NoError(t, err)
	_, err = s.Start(ctx, false)
	require.NoError(t, err)
	e.AssertRedis()

	_, err = e.Store.Void(ctx, coupon.VoidRequest{UserCouponIDs: mine[:2], Reason: "test", Operator: "ops", RequestID: "v"})
	require.NoError(t, err)
	end, err := canal.CurrentPosition(ctx, e.DB)
	require.NoError(t, err)
	b := &canal.Batch{Rows: 2, Txns: 1, End: end, EventTime: time.Now()}
	for _, id := range mine[:2] {
		b.Transitions = append(b.Transitions, canal.Transition{Coupon: id, Template: tpl, Channel: "app", PrevTemplate: tpl,
			PrevChannel: "app", From: coupon.Available, To: coupon.Returned})
	}
	require.NoError(t, s.ApplyBatch(ctx, b))
	require.Equal(t, map[string][2]int64{"app": {10, 1}, "web": {10, 1}}, e.buckets(tpl), "the release gave both slots back")
	for k, want := range map[string]string{e.Keys.Stock(tpl, "app"): "9", e.Keys.Stock(tpl, "web"): "9", e.Keys.TemplateStock(tpl): "18"} {
		got, err := e.RDB.Get(ctx, k).Result()
		require.NoError(t, err)
		require.Equal(t, want, got, "%s right after the release committed", k)
	}

	// a cdc that goes on from the checkpoint reads the release back and
	// keeps the keys following the binlog: their stamps block nothing newer
	c := e.StartCDC(nil)
	_, err = e.Store.Claim(ctx, coupon.ClaimRequest{TemplateID: tpl, UserID: "u", Channel: "app", RequestID: "after"})
	require.NoError(t, err)
	e.assertTruth(true)
	c.Stop(t)
}
