package sink_test

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"
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

// Idle, the cdc reports a lag of ~0 and its checkpoint follows the binlog
// through other schemas' writes; its own writes (inventory_counter,
// cdc_checkpoint, coupon_template) never come back as rows: over several
// heartbeats no event is applied.
func TestHeartbeatLagAndNoFeedback(t *testing.T) {
	e := newEnv(t)
	w := &claimer{e: e, tpl: e.Template(map[string]int64{"app": 100, "web": 100, "sms": 100}, time.Hour)}
	w.claim(3)
	c := e.StartCDC(nil)
	e.WaitCheckpoint() // bootstrapped: the next claims are streamed
	w.claim(6)         // batches that write counters, cached template counts and the checkpoint
	e.assertTruth(true)

	other := "other_" + strings.TrimSuffix(testenv.KeyPrefix(t), ":")
	_, err := e.DB.Exec("CREATE DATABASE `" + other + "`")
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = e.DB.Exec("DROP DATABASE IF EXISTS `" + other + "`") })
	_, err = e.DB.Exec("CREATE TABLE `" + other + "`.t (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
	require.NoError(t, err)

	events := cdctest.MetricSeries(t, c.Reg, "couponlink_cdc_events_total")
	require.NotEmpty(t, events)
	rowBatches, _ := cdctest.Metric(t, c.Reg, "couponlink_cdc_batch_rows", nil)
	before := e.checkpoint()
	_, err = e.DB.Exec("INSERT INTO `" + other + "`.t (v) VALUES (1), (2)")
	require.NoError(t, err)
	pos := e.WaitCheckpoint() // moved by heartbeats alone: no row of ours was written
	require.Positive(t, pos.Compare(before.Pos), "the checkpoint did not move with another schema's writes")
	cdctest.WaitFor(t, 30*time.Second, "five more heartbeats saved", func() bool { return e.checkpoint().Batches >= before.Batches+5 })

	require.Equal(t, events, cdctest.MetricSeries(t, c.Reg, "couponlink_cdc_events_total"), "events applied while idle: the cdc's own writes fed back")
	v, _ := cdctest.Metric(t, c.Reg, "couponlink_cdc_batch_rows", nil)
	require.Equal(t, rowBatches, v, "batches with rows while idle")
	lag, ok := cdctest.Metric(t, c.Reg, "couponlink_cdc_lag_seconds", nil)
	require.True(t, ok)
	require.Less(t, lag, 2.0, "lag while idle")
	cp := e.checkpoint()
	require.True(t, cp.EventTime.Valid)
	require.WithinDuration(t, time.Now(), cp.EventTime.Time, 5*time.Second, "the idle checkpoint's event time is the heartbeat's")
	require.Equal(t, before.EventsApplied, cp.EventsApplied)
}

// A small scripted sequence gives exact values of
// couponlink_cdc_events_total{table,kind}, couponlink_inventory{template,
// channel,state} and couponlink_anomalies_total{kind}.
func TestMetricsAfterScriptedSequence(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	tpl := e.Template(map[string]int64{"app": 10, "web": 10}, time.Hour)
	c := e.StartCDC(nil, func(cfg *sink.Config, _ *sink.Daemon) { cfg.RedemptionGrace = 300 * time.Millisecond })
	e.WaitCheckpoint()
	ids := map[string]int64{}
	claim := func(name, ch string) {
		cl, err := e.Store.Claim(ctx, coupon.ClaimRequest{TemplateID: tpl, UserID: name, Channel: ch, RequestID: name})
		require.NoError(t, err)
		ids[name] = cl.UserCouponID
	}
	exec := func(q string, args ...any) {
		_, err := e.DB.Exec(q, args...)
		require.NoError(t, err, q)
	}
	claim("c1", "app")
	claim("c2", "app")
	claim("c3", "app")
	claim("c4", "web")
	claim("c5", "app")
	_, err := e.Store.Redeem(ctx, coupon.RedeemRequest{UserCouponID: ids["c1"], OrderID: "o1"})
	require.NoError(t, err)
	_, err = e.Store.Refund(ctx, coupon.RefundRequest{UserCouponID: ids["c1"], OrderID: "o1", Mode: coupon.RefundRecycle})
	require.NoError(t, err)
	exec(`UPDATE user_coupon SET status = 3 WHERE id = ?`, ids["c2"])                  // legacy expiry: legal
	exec(`UPDATE user_coupon SET status = 1 WHERE id = ?`, ids["c2"])                  // EXPIRED -> AVAILABLE: illegal
	exec(`DELETE FROM user_coupon WHERE id = ?`, ids["c3"])                            // deleted
	exec(`UPDATE user_coupon SET status = 2, order_id = 'x5' WHERE id = ?`, ids["c5"]) // USED, no redemption row
	exec(`UPDATE user_coupon SET status = 3 WHERE id = ?`, ids["c4"])                  // legal expiry, then its release
	tx, err := e.DB.Begin()
	require.NoError(t, err)
	_, err = tx.Exec(`INSERT INTO inventory_flow (user_coupon_id, kind, template_id, channel, from_status, to_status) VALUES (?, 'release', ?, 'web', 3, 3)`, ids["c4"], tpl)
	require.NoError(t, err)
	_, err = tx.Exec(`UPDATE channel_quota SET claimed = claimed - 1 WHERE template_id = ? AND channel = 'web'`, tpl)
	require.NoError(t, err)
	require.NoError(t, tx.Commit())
	exec(`DELETE FROM redemption_log WHERE user_coupon_id = ?`, ids["c1"])
	var vals []string
	for i := range 11 { // 11 coupons into web (quota 10) without taking slots: over-issue
		vals = append(vals, fmt.Sprintf("(%d, 'raw%d', 'web', 1, NOW(6), NOW(6) + INTERVAL 1 HOUR)", tpl, i))
	}
	exec(`INSERT INTO user_coupon (template_id, user_id, channel, status, claimed_at, expires_at) VALUES ` + strings.Join(vals, ", "))
	e.waitSettled(c, 30*time.Second)

	require.Equal(t, map[string]float64{
		"kind=insert,table=user_coupon":    16,
		"kind=update,table=user_coupon":    6, // redeem, refund, expire c2, illegal c2, USED c5, expire c4
		"kind=delete,table=user_coupon":    1,
		"kind=insert,table=redemption_log": 1,
		"kind=delete,table=redemption_log": 1,
		"kind=insert,table=inventory_flow": 3, // refund, the raw release of c4, the cdc's release of c1 (recycled)
		"kind=update,table=channel_quota":  7, // five claims, two releases
	}, cdctest.MetricSeries(t, c.Reg, "couponlink_cdc_events_total"))
	var applied float64
	for _, v := range cdctest.MetricSeries(t, c.Reg, "couponlink_cdc_events_total") {
		applied += v
	}
	require.EqualValues(t, applied, e.checkpoint().EventsApplied, "the checkpoint's events_applied")

	inv := map[string]float64{}
	for k, v := range cdctest.MetricSeries(t, c.Reg, "couponlink_inventory") {
		if strings.Contains(k, fmt.Sprintf("template=%d", tpl)) {
			inv[k] = v
		}
	}
	series := func(ch string, kv ...any) map[string]float64 {
		out := map[string]float64{}
		for i := 0; i < len(kv); i += 2 {
			out[fmt.Sprintf("channel=%s,state=%s,template=%d", ch, kv[i], tpl)] = float64(kv[i+1].(int))
		}
		return out
	}
	// c1 was refunded with recycle: the cdc gave its slot back to app
	want := series("app", "quota", 10, "claimable", 7, "held", 1, "used", 1, "expired", 0, "returned", 1, "released", 1, "frozen", 0)
	for k, v := range series("web", "quota", 10, "claimable", 10, "held", 11, "used", 0, "expired", 1, "returned", 0, "released", 1, "frozen", 0) {
		want[k] = v
	}
	require.Equal(t, want, inv)
	require.Equal(t, map[string]float64{
		"kind=illegal_transition": 1, "kind=deleted_coupon": 1, "kind=used_without_redemption": 1,
		"kind=duplicate_redemption": 0, "kind=over_issue": 1, "kind=undecodable_row": 0,
		"kind=double_spend": 0, "kind=per_user_limit_exceeded": 0, "kind=used_after_expiry": 0,
		"kind=claimed_off_shelf": 0,
	}, cdctest.MetricSeries(t, c.Reg, "couponlink_anomalies_total"))
	e.assertTruth(true)
}

// inventory.ReadStatus (what `couponlink status` prints) reflects the
// checkpoint, the anomalies and the counters.
func TestReadStatus(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	st, err := inventory.ReadStatus(ctx, e.DB, "default")
	require.NoError(t, err)
	require.False(t, st.Found, "a checkpoint before the cdc ever ran")

	w := &claimer{e: e, tpl: e.Template(map[string]int64{"app": 100, "web": 100, "sms": 100}, time.Hour)}
	w.claim(6)
	c := e.StartCDC(nil, leaderNamed("status-test"))
	e.WaitCheckpoint() // bootstrapped: what follows is applied from the binlog, as events
	w.claim(6)
	var id int64
	require.NoError(t, e.DB.QueryRow(`SELECT MAX(id) FROM user_coupon`).Scan(&id))
	_, err = e.DB.Exec(`UPDATE user_coupon SET status = 3 WHERE id = ?`, id)
	require.NoError(t, err)
	_, err = e.DB.Exec(`UPDATE user_coupon SET status = 1 WHERE id = ?`, id) // illegal
	require.NoError(t, err)
	_, err = e.DB.Exec(`DELETE FROM user_coupon WHERE id = ?`, id-1)
	require.NoError(t, err)
	e.assertTruth(true)
	c.Stop(t) // the checkpoint stays where it is

	st, err = inventory.ReadStatus(ctx, e.DB, "default")
	require.NoError(t, err)
	require.True(t, st.Found)
	cp := e.checkpoint()
	require.Equal(t, cp.Pos, st.Checkpoint.Pos)
	require.Equal(t, "status-test", st.Checkpoint.Leader)
	require.Equal(t, cp.Epoch, st.Checkpoint.Epoch)
	require.Equal(t, cp.EventsApplied, st.Checkpoint.EventsApplied)
	require.Positive(t, st.Checkpoint.EventsApplied)
	require.Equal(t, cp.Batches, st.Checkpoint.Batches)
	require.True(t, st.Checkpoint.BootstrappedAt.Valid)
	require.EqualValues(t, 2, st.Checkpoint.Anomalies)
	require.Equal(t, map[string]int64{inventory.AnomalyIllegalTransition: 1, inventory.AnomalyDeletedCoupon: 1}, st.Anomalies)
	require.GreaterOrEqual(t, st.Server.Compare(st.Checkpoint.Pos), 0, "the server's binlog end is at or after the checkpoint")
	require.Less(t, st.Lag(), 10*time.Second)

	quotas := map[inventory.Pair]inventory.Quota{}
	rows, err := e.DB.Query(`SELECT template_id, channel, quota, claimed FROM channel_quota`)
	require.NoError(t, err)
	for rows.Next() {
		var p inventory.Pair
		var q inventory.Quota
		require.NoError(t, rows.Scan(&p.Template, &p.Channel, &q.Quota, &q.Claimed))
		quotas[p] = q
	}
	require.NoError(t, rows.Close())
	var want []inventory.PairStatus
	for p, cnt := range e.Truth() {
		cnt.Quota, cnt.Claimed = quotas[p].Quota, quotas[p].Claimed
		want = append(want, inventory.PairStatus{Pair: p, Counts: cnt, HasQuota: true})
	}
	sort.Slice(want, func(i, j int) bool { return want[i].Channel < want[j].Channel })
	require.Equal(t, want, st.Pairs)
}

// Status.Lag: 0 when the checkpoint is the server's binlog end (caught up,
// however old its last event), else the age of the checkpoint's last event.
func TestStatusLag(t *testing.T) {
	now := time.Now()
	at := func(d time.Duration) sql.NullTime { return sql.NullTime{Time: now.Add(-d), Valid: true} }
	p := canal.Position{File: "mysql-bin.000002", Pos: 800}
	for _, tc := range []struct {
		name string
		st   inventory.Status
		want time.Duration
	}{
		{"no checkpoint", inventory.Status{Now: now, Server: p}, 0},
		{"caught up", inventory.Status{Found: true, Now: now, Server: p, Checkpoint: inventory.Checkpoint{Pos: p, EventTime: at(time.Hour)}}, 0},
		{"behind", inventory.Status{Found: true, Now: now, Server: canal.Position{File: p.File, Pos: 900}, Checkpoint: inventory.Checkpoint{Pos: p, EventTime: at(3 * time.Second)}}, 3 * time.Second},
		{"bootstrapped, no event yet", inventory.Status{Found: true, Now: now, Server: canal.Position{File: p.File, Pos: 900}, Checkpoint: inventory.Checkpoint{Pos: p}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) { require.Equal(t, tc.want, tc.st.Lag()) })
	}
}

// A new template's channel buckets count as inserts of channel_quota, a
// claim's guard as an update.
func TestQuotaEventsByKind(t *testing.T) {
	e := newEnv(t)
	c := e.StartCDC(nil)
	e.WaitCheckpoint()
	tpl := e.Template(map[string]int64{"app": 5, "web": 5}, time.Hour)
	_, err := e.Store.Claim(context.Background(), coupon.ClaimRequest{TemplateID: tpl, UserID: "u", Channel: "app", RequestID: "r"})
	require.NoError(t, err)
	e.WaitCheckpoint()
	series := cdctest.MetricSeries(t, c.Reg, "couponlink_cdc_events_total")
	require.EqualValues(t, 2, series["kind=insert,table=channel_quota"])
	require.EqualValues(t, 1, series["kind=update,table=channel_quota"])
}
