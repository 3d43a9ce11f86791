package sink_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/api"
	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/internal/cdcenv"
	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/inventory"
	"github.com/couponlink/couponlink/quota"
	"github.com/couponlink/couponlink/sink"
	"github.com/couponlink/couponlink/webhook"
)

// seed gives a channel bucket held AVAILABLE and used USED coupons (with
// their redemption rows) and takes their slots, as claims and redemptions
// would (legal transitions: inserted AVAILABLE, then redeemed), in bulk.
func (e *env) seed(tpl int64, channel string, held, used int) {
	e.T.Helper()
	tx, err := e.DB.Begin()
	require.NoError(e.T, err)
	now := time.Now().UTC()
	n := held + used
	var first int64
	for start := 0; start < n; start += 500 {
		var vals []string
		var args []any
		for i := start; i < min(start+500, n); i++ {
			vals = append(vals, "(?, ?, ?, ?, ?, ?)")
			args = append(args, tpl, fmt.Sprintf("%s-%d", channel, i), channel, coupon.Available, now, now.Add(24*time.Hour))
		}
		res, err := tx.Exec(`INSERT INTO user_coupon (template_id, user_id, channel, status, claimed_at, expires_at) VALUES `+strings.Join(vals, ","), args...)
		require.NoError(e.T, err)
		if start == 0 {
			first, err = res.LastInsertId()
			require.NoError(e.T, err)
		}
	}
	// the first used ids are redeemed (ids of one multi-row INSERT are consecutive)
	_, err = tx.Exec(`UPDATE user_coupon SET status = ?, redeemed_at = ?, order_id = CONCAT('o', id) WHERE id >= ? AND id < ?`,
		coupon.Used, now, first, first+int64(used))
	require.NoError(e.T, err)
	_, err = tx.Exec(`INSERT INTO redemption_log (user_coupon_id, template_id, channel, order_id, redeemed_at, idempotency_key)
		SELECT id, template_id, channel, order_id, ?, CONCAT(order_id, '/', id) FROM user_coupon WHERE id >= ? AND id < ?`,
		now, first, first+int64(used))
	require.NoError(e.T, err)
	_, err = tx.Exec(`UPDATE channel_quota SET claimed = claimed + ? WHERE template_id = ? AND channel = ?`, n, tpl, channel)
	require.NoError(e.T, err)
	require.NoError(e.T, tx.Commit())
}

// buckets reads channel_quota: channel -> [quota, claimed].
func (e *env) buckets(tpl int64) map[string][2]int64 {
	e.T.Helper()
	rows, err := e.DB.Query(`SELECT channel, quota, claimed FROM channel_quota WHERE template_id = ?`, tpl)
	require.NoError(e.T, err)
	defer rows.Close()
	out := map[string][2]int64{}
	for rows.Next() {
		var ch string
		var q, c int64
		require.NoError(e.T, rows.Scan(&ch, &q, &c))
		out[ch] = [2]int64{q, c}
	}
	return out
}

type transferRow struct {
	Decision, From, To, Rule, Mode string
	Amount                         int64
	Seen                           map[string]any
	At                             time.Time
}

func (e *env) transfers(tpl int64) []transferRow {
	e.T.Helper()
	rows, err := e.DB.Query(`SELECT decision, from_channel, to_channel, amount, rule, rates_seen, mode, created_at
		FROM quota_transfer_log WHERE template_id = ? ORDER BY id`, tpl)
	require.NoError(e.T, err)
	defer rows.Close()
	var out []transferRow
	for rows.Next() {
		var r transferRow
		var seen string
		require.NoError(e.T, rows.Scan(&r.Decision, &r.From, &r.To, &r.Amount, &r.Rule, &seen, &r.Mode, &r.At))
		require.NoError(e.T, json.Unmarshal([]byte(seen), &r.Seen))
		out = append(out, r)
	}
	require.NoError(e.T, rows.Err())
	return out
}

// outbox reads the webhook events of one type, in order.
func (e *env) outbox(event string) []map[string]any {
	e.T.Helper()
	return testenv.OutboxEvents(e.T, e.DB, event)
}

func (e *env) setPolicy(tpl int64, mode string, edit func(*quota.Override)) {
	e.T.Helper()
	zero := int64(0)
	o := quota.Override{Mode: &mode, MinAgeSeconds: &zero}
	if edit != nil {
		edit(&o)
	}
	_, err := quota.SetPolicy(context.Background(), e.DB, tpl, o, "test", "the test's policy", "cli", "")
	require.NoError(e.T, err)
}

// ruleRan waits until the rebalancing rule has run at least once more.
func ruleRan(t *testing.T, c *cdcenv.CDC, clock *fakeClock) {
	t.Helper()
	before := cdctest.MetricSum(t, c.Reg, "couponlink_quota_rule_runs_total")
	clock.Advance(time.Second)
	cdctest.WaitFor(t, 30*time.Second, "a pass of the rebalancing rule", func() bool {
		return cdctest.MetricSum(t, c.Reg, "couponlink_quota_rule_runs_total") > before
	})
	v, _ := cdctest.Metric(t, c.Reg, "couponlink_quota_rule_runs_total", map[string]string{"result": "error"})
	require.Zero(t, v, "a pass of the rule failed")
}

func rebalancingCDC(e *env, clock *fakeClock) *cdcenv.CDC {
	return e.StartCDC(nil, func(c *sink.Config, _ *sink.Daemon) {
		c.Now, c.RebalanceEvery, c.Webhooks = clock.Now, time.Millisecond, true
	})
}

// workedExample starts a rebalancing cdc, then gives a template the
// worked example's channels under a policy of the given mode, and lets the
// rule run once on them.
func (e *env) workedExample(clock *fakeClock, mode string) (int64, *cdcenv.CDC) {
	e.T.Helper()
	tpl := e.Template(map[string]int64{"A": 1000, "B": 500}, 24*time.Hour)
	e.setPolicy(tpl, mode, nil)
	c := rebalancingCDC(e, clock)
	e.WaitCheckpoint()
	e.seed(tpl, "A", 600, 200)
	e.seed(tpl, "B", 100, 400)
	e.WaitCheckpoint()
	ruleRan(e.T, c, clock)
	return tpl, c
}

// The worked example: A claimed 800 of 1000 and redeemed 200; B
// claimed 500 of 500, redeemed 400, sold out. In auto mode the rule moves
// 100 of A's 200 unclaimed to B (max_share 0.5; A's reserve of 50 kept),
// logs why, tells the webhook, and Redis follows.
func TestRebalanceWorkedExample(t *testing.T) {
	e := newEnv(t)
	clock := newFakeClock()
	tpl, c := e.workedExample(clock, quota.ModeAuto)

	cdctest.WaitFor(t, 30*time.Second, "the transfer", func() bool { return len(e.transfers(tpl)) > 0 })
	require.Equal(t, map[string][2]int64{"A": {900, 800}, "B": {600, 500}}, e.buckets(tpl))
	log := e.transfers(tpl)
	require.Len(t, log, 1)
	r := log[0]
	assert.Equal(t, "A", r.From)
	assert.Equal(t, "B", r.To)
	assert.EqualValues(t, 100, r.Amount)
	assert.Equal(t, quota.ModeAuto, r.Mode)
	assert.Contains(t, r.Rule, "rate < low 0.30")
	assert.Contains(t, r.Seen["why"], "A redeems 0.25 < low 0.30 after 800 claims: gives 100 of its 200 claimable")
	assert.Contains(t, r.Seen["why"], "keeps reserve 50")
	assert.Contains(t, r.Seen["why"], "B redeems 0.80 > high 0.60, sold out")
	chans := r.Seen["channels"].([]any)
	require.Len(t, chans, 2)
	assert.InDelta(t, 0.25, chans[0].(map[string]any)["rate"], 1e-9)
	assert.InDelta(t, 0.80, chans[1].(map[string]any)["rate"], 1e-9)
	t.Logf("quota_transfer_log: %+v", r)

	ev := e.outbox(webhook.QuotaTransferred)
	require.Len(t, ev, 1)
	assert.Equal(t, "B", ev[0]["channel"])
	data := ev[0]["data"].(map[string]any)
	assert.Equal(t, map[string]any{"decision": r.Decision, "from": "A", "to": "B", "amount": 100.0,
		"from_quota_after": 900.0, "to_quota_after": 600.0, "why": r.Seen["why"], "rule": r.Rule}, data)
	var raw string
	require.NoError(t, e.DB.QueryRow(`SELECT body FROM webhook_outbox WHERE event = ?`, webhook.QuotaTransferred).Scan(&raw))
	assert.Contains(t, raw, `"why":"A redeems 0.25 < low 0.30`, "bodies are readable: no HTML escaping")
	soldOut := e.outbox(webhook.ChannelSoldOut)
	require.Len(t, soldOut, 1, "B sold out once (the seed took its last slot)")
	assert.Equal(t, "B", soldOut[0]["channel"])
	st, err := inventory.ReadStatus(context.Background(), e.DB, "default")
	require.NoError(t, err)
	assert.Equal(t, map[string]int64{"pending": 2, "failing": 0}, st.Webhooks, "couponlink status shows the outbox (no dispatcher here)")
	assert.False(t, st.OldestPending.IsZero())
	assert.Empty(t, e.anomalies(), "the seed is legal: claims, then redemptions")

	e.assertTruth(true) // the stock keys follow: A and B have 100 claimable each
	require.EqualValues(t, "100", e.RDB.Get(context.Background(), e.Keys.Stock(tpl, "B")).Val())
	total := int64(0)
	for _, b := range e.buckets(tpl) {
		total += b[0]
	}
	require.EqualValues(t, 1500, total, "a transfer conserves the template's quota")

	// within the cooldown (1 h) nothing more moves, though A still gives
	clock.Advance(30 * time.Minute)
	ruleRan(t, c, clock)
	require.Len(t, e.transfers(tpl), 1)
	// after it, the rule fires again on what is left: 50 of A's 100 claimable
	clock.Advance(31 * time.Minute)
	ruleRan(t, c, clock)
	cdctest.WaitFor(t, 30*time.Second, "the second transfer", func() bool { return len(e.transfers(tpl)) == 2 })
	log = e.transfers(tpl)
	assert.EqualValues(t, 50, log[1].Amount)
	assert.GreaterOrEqual(t, log[1].At.Sub(log[0].At), time.Hour)
	require.Equal(t, map[string][2]int64{"A": {850, 800}, "B": {650, 500}}, e.buckets(tpl))
	transfers := func() float64 {
		v, _ := cdctest.Metric(t, c.Reg, "couponlink_quota_transfers_total", map[string]string{"template": fmt.Sprint(tpl)})
		return v
	}
	// counted right after the commit the log shows
	cdctest.WaitFor(t, 30*time.Second, "the second transfer counted", func() bool { return transfers() >= 2 })
	require.EqualValues(t, 2, transfers())
}

// Signal mode writes the recommendation (log rows of mode signal, a
// quota.recommendation event) and moves nothing.
func TestRebalanceSignalModeMovesNothing(t *testing.T) {
	e := newEnv(t)
	clock := newFakeClock()
	tpl, c := e.workedExample(clock, quota.ModeSignal)
	cdctest.WaitFor(t, 30*time.Second, "the recommendation", func() bool { return len(e.outbox(webhook.QuotaRecommendation)) > 0 })

	require.Equal(t, map[string][2]int64{"A": {1000, 800}, "B": {500, 500}}, e.buckets(tpl), "signal mode moved quota")
	log := e.transfers(tpl)
	require.Len(t, log, 1)
	assert.Equal(t, quota.ModeSignal, log[0].Mode)
	assert.EqualValues(t, 100, log[0].Amount)
	ev := e.outbox(webhook.QuotaRecommendation)
	require.Len(t, ev, 1)
	data := ev[0]["data"].(map[string]any)
	assert.Equal(t, log[0].Decision, data["decision"])
	assert.EqualValues(t, 100, data["total"])
	assert.Empty(t, e.outbox(webhook.QuotaTransferred))
	e.assertTruth(true)
	require.EqualValues(t, "0", e.RDB.Get(context.Background(), e.Keys.Stock(tpl, "B")).Val(), "B still sold out in Redis")
	v, _ := cdctest.Metric(t, c.Reg, "couponlink_quota_recommendations_total", map[string]string{"template": fmt.Sprint(tpl)})
	require.EqualValues(t, 1, v)
	v, _ = cdctest.Metric(t, c.Reg, "couponlink_quota_transfers_total", map[string]string{"template": fmt.Sprint(tpl)})
	require.Zero(t, v)

	// an operator switches the template to auto while the cdc runs: the
	// next pass moves the quota (the cooldown counts decisions of one mode)
	e.setPolicy(tpl, quota.ModeAuto, nil)
	ruleRan(t, c, clock)
	cdctest.WaitFor(t, 30*time.Second, "the transfer after the switch to auto", func() bool { return len(e.transfers(tpl)) == 2 })
	require.Equal(t, map[string][2]int64{"A": {900, 800}, "B": {600, 500}}, e.buckets(tpl))
	require.Equal(t, quota.ModeAuto, e.transfers(tpl)[1].Mode)
}

// Below min_claims the rule does not judge a channel; a policy set to off
// looks at nothing; a young campaign waits for min_age.
func TestRebalanceNeedsSampleAgeAndMode(t *testing.T) {
	e := newEnv(t)
	clock := newFakeClock()
	small := e.Template(map[string]int64{"A": 1000, "B": 500}, 24*time.Hour)
	e.setPolicy(small, quota.ModeAuto, func(o *quota.Override) { n := int64(1000); o.MinClaims = &n })
	e.seed(small, "A", 600, 200) // 800 claims < 1000
	e.seed(small, "B", 100, 400)
	off := e.Template(map[string]int64{"A": 1000, "B": 500}, 24*time.Hour)
	e.setPolicy(off, quota.ModeOff, nil)
	e.seed(off, "A", 600, 200)
	e.seed(off, "B", 100, 400)
	young := e.Template(map[string]int64{"A": 1000, "B": 500}, 24*time.Hour)
	e.setPolicy(young, quota.ModeAuto, func(o *quota.Override) { n := int64(7200); o.MinAgeSeconds = &n })
	e.seed(young, "A", 600, 200)
	e.seed(young, "B", 100, 400)

	// a policy that became invalid (written by SQL here; in life, new
	// defaults under an old override) is skipped and counted
	bad := e.Template(map[string]int64{"A": 1000, "B": 500}, 24*time.Hour)
	_, err := e.DB.Exec(`INSERT INTO quota_policy (template_id, mode, low, min_age_seconds, updated_by) VALUES (?, 'auto', 0.9, 0, 'sql')`, bad)
	require.NoError(t, err)
	e.seed(bad, "A", 600, 200)
	e.seed(bad, "B", 100, 400)

	c := rebalancingCDC(e, clock)
	e.WaitCheckpoint()
	ruleRan(t, c, clock)
	ruleRan(t, c, clock)
	v, _ := cdctest.Metric(t, c.Reg, "couponlink_quota_invalid_policies", nil)
	require.EqualValues(t, 1, v)
	for _, tpl := range []int64{small, off, young, bad} {
		require.Empty(t, e.transfers(tpl), "template %d", tpl)
		require.Equal(t, map[string][2]int64{"A": {1000, 800}, "B": {500, 500}}, e.buckets(tpl))
	}
	clock.Advance(2 * time.Hour) // the young campaign comes of age
	ruleRan(t, c, clock)
	cdctest.WaitFor(t, 30*time.Second, "the transfer of the campaign come of age", func() bool { return len(e.transfers(young)) == 1 })
	require.Empty(t, e.transfers(small))
	require.Empty(t, e.transfers(off))
}

// Transfers run while claims hit both channels, voids release slots and
// the rule moves quota every pass: claimed never exceeds quota, no claim
// fails for anything but sold_out, and the template's total quota never
// changes.
func TestRebalanceUnderConcurrentClaims(t *testing.T) {
	e := newEnv(t)
	clock := newFakeClock()
	tpl := e.Template(map[string]int64{"A": 3000, "B": 300}, 24*time.Hour)
	e.setPolicy(tpl, quota.ModeAuto, func(o *quota.Override) {
		zero, share, min := int64(0), 0.02, int64(50)
		o.CooldownSeconds, o.MaxShare, o.MinClaims = &zero, &share, &min
	})
	e.seed(tpl, "A", 200, 0) // rate 0
	e.seed(tpl, "B", 0, 290) // rate 1, 10 left
	c := rebalancingCDC(e, clock)
	e.WaitCheckpoint()

	ctx := context.Background()
	var claims, soldOut, voids atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				ch := []string{"A", "B"}[i%2]
				cp, err := e.Store.Claim(ctx, coupon.ClaimRequest{TemplateID: tpl, UserID: fmt.Sprintf("w%d-%d", w, i), Channel: ch, RequestID: fmt.Sprintf("w%d-%d", w, i)})
				if ce, ok := coupon.AsError(err); ok && ce.Code == api.CodeSoldOut {
					soldOut.Add(1)
					continue
				}
				if err != nil {
					errs <- err
					return
				}
				claims.Add(1)
				switch {
				case ch == "B": // B redeems everything it gets
					_, err = e.Store.Redeem(ctx, coupon.RedeemRequest{UserCouponID: cp.UserCouponID, OrderID: fmt.Sprintf("o-%d", cp.UserCouponID)})
				case i%5 == 0: // some of A's are voided: their slots come back
					_, err = e.Store.Void(ctx, coupon.VoidRequest{UserCouponIDs: []int64{cp.UserCouponID}, Reason: "test", Operator: "ops", RequestID: fmt.Sprintf("v%d", cp.UserCouponID)})
					voids.Add(1)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	// the rule runs on every pass of the fake clock while claims go on
	for pass := 0; len(e.transfers(tpl)) < 8 || soldOut.Load() == 0 || claims.Load() < 400; pass++ {
		require.Less(t, pass, 5000, "the workload did not get going")
		ruleRan(t, c, clock)
		sum, over := 0, 0
		require.NoError(t, e.DB.QueryRow(`SELECT SUM(quota), SUM(claimed > quota) FROM channel_quota WHERE template_id = ?`, tpl).Scan(&sum, &over))
		require.Equal(t, 3300, sum, "total quota changed")
		require.Zero(t, over, "claimed above quota")
		select {
		case err := <-errs:
			t.Fatal(err)
		default:
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	e.assertTruth(true)
	// the rule runs every millisecond of real time and cooldown is 0: it
	// goes on moving quota after the claims stopped, so it stops before
	// the buckets and the log are read (else a move between the two reads
	// is in the log and not in the buckets read before it)
	c.Stop(t)
	t.Logf("%d claims, %d sold out, %d voids, %d transfers", claims.Load(), soldOut.Load(), voids.Load(), len(e.transfers(tpl)))
	require.Positive(t, soldOut.Load(), "B never sold out: the test proves little")
	b := e.buckets(tpl)
	require.EqualValues(t, 3300, b["A"][0]+b["B"][0])
	require.Greater(t, b["B"][0], int64(300), "quota moved to B")
	var moved int64
	for _, r := range e.transfers(tpl) {
		require.Equal(t, "A", r.From)
		require.Equal(t, "B", r.To)
		moved += r.Amount
	}
	require.EqualValues(t, 300+moved, b["B"][0], "B's quota is its start plus every logged transfer")
	// every slot is accounted for: claimed = coupons issued − slots released
	truth := e.Truth()
	for ch, q := range b {
		n := truth[inventory.Pair{Template: tpl, Channel: ch}]
		require.EqualValues(t, n.Held+n.Used+n.Expired+n.Returned-n.Released, q[1], "channel %s", ch)
	}
}

// A transfer's Redis keys are written as soon as it commits, not only when
// the cdc reads it back from the binlog: a cdc stopped right after (even on
// SIGTERM) leaves no bucket's key stale. Here the sink never sees the
// transfer's binlog at all.
func TestTransferKeysWrittenAtCommit(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	clock := newFakeClock()
	tpl := e.Template(map[string]int64{"A": 1000, "B": 500}, 24*time.Hour)
	e.setPolicy(tpl, quota.ModeAuto, nil)
	e.seed(tpl, "A", 600, 200)
	e.seed(tpl, "B", 100, 400)
	s, err := sink.New(sink.Config{DB: e.DB, Redis: e.RDB, Keys: e.Keys, Logger: testenv.QuietLogger(), Now: clock.Now, RebalanceEvery: time.Millisecond})
	require.NoError(t, err)
	_, err = s.Start(ctx, false)
	require.NoError(t, err)
	e.AssertRedis()
	require.EqualValues(t, "0", e.RDB.Get(ctx, e.Keys.Stock(tpl, "B")).Val(), "B is sold out before the transfer")

	clock.Advance(time.Second)
	require.NoError(t, s.Rebalancing().RunOnce(ctx)) // one pass of the rule, as the rebalance chore runs it
	require.Equal(t, map[string][2]int64{"A": {900, 800}, "B": {600, 500}}, e.buckets(tpl), "the worked example's transfer")
	for k, want := range map[string]string{e.Keys.Stock(tpl, "A"): "100", e.Keys.Stock(tpl, "B"): "100", e.Keys.TemplateStock(tpl): "200"} {
		require.Equal(t, want, e.RDB.Get(ctx, k).Val(), "%s right after the transfer committed", k)
	}
}
