package sink_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/internal/cdcenv"
	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/inventory"
	"github.com/couponlink/couponlink/sink"
)

// Over-issue is judged from the truth, not from counters a hand edit
// corrupted. A counter raised by hand by 500 (10 coupons held, quota 100)
// is loaded into the cdc's counters when it follows a correction and when
// it restarts: couponlink_over_issued stays 0 and no over_issue anomaly is
// recorded, also when more claims land on the bucket. Coupons really past
// the quota (raw INSERTs that bypass the claim guard) are over-issue all
// the same.
func TestHandEditedCounterIsNotOverIssue(t *testing.T) {
	t.Parallel()
	e := cdcenv.New(t)
	tpl := e.Template(map[string]int64{"app": 100}, time.Hour)
	claim := func(from, to int) {
		for i := from; i < to; i++ {
			name := fmt.Sprint("u", i)
			_, err := e.Store.Claim(e.Ctx, coupon.ClaimRequest{TemplateID: tpl, UserID: name, Channel: "app", RequestID: name})
			require.NoError(t, err)
		}
	}
	claim(0, 10)
	c := e.StartCDC(nil)
	e.Settle()
	exec := func(q string, args ...any) {
		t.Helper()
		_, err := e.DB.Exec(q, args...)
		require.NoError(t, err)
	}
	held := func() float64 {
		v, _ := cdctest.Metric(t, c.Reg, "couponlink_inventory", map[string]string{"template": fmt.Sprint(tpl), "channel": "app", "state": "held"})
		return v
	}
	assertNoOverIssue := func(msg string) {
		t.Helper()
		over, ok := cdctest.Metric(t, c.Reg, "couponlink_over_issued", nil)
		require.True(t, ok)
		require.Zero(t, over, "couponlink_over_issued: %s", msg)
		v, _ := cdctest.Metric(t, c.Reg, "couponlink_anomalies_total", map[string]string{"kind": inventory.AnomalyOverIssue})
		require.Zero(t, v, "over_issue anomalies: %s", msg)
	}

	// the hand edit, then a correction elsewhere: the cdc reloads its counters
	exec(`UPDATE inventory_counter SET held = held + 500 WHERE template_id = ? AND channel = 'app'`, tpl)
	exec(`INSERT INTO correction_log (task_id, store, target, old_value, new_value, reason, mode, actor)
		VALUES (NULL, 'counter', 'elsewhere', 1, 2, 'a correction of another bucket', 'auto', 'test')`)
	cdctest.WaitFor(t, 30*time.Second, "the cdc reloads the hand-edited counter", func() bool { return held() == 510 })
	assertNoOverIssue("after the reload of a counter 500 too high")

	// more claims on the bucket: its counters move past the quota, its coupons do not
	claim(10, 15)
	e.Settle()
	require.EqualValues(t, 515, held())
	assertNoOverIssue("claims on top of the corrupted counter")

	// a restart loads the same counters
	c.Stop(t)
	c = e.StartCDC(nil)
	e.Settle()
	require.EqualValues(t, 515, held())
	assertNoOverIssue("after a restart")

	// coupons really past the quota: 15 + 90 > 100
	var vals []string
	for i := range 90 {
		vals = append(vals, fmt.Sprintf("(%d, 'raw%d', 'app', 1, NOW(6), NOW(6) + INTERVAL 1 HOUR)", tpl, i))
	}
	exec(`INSERT INTO user_coupon (template_id, user_id, channel, status, claimed_at, expires_at) VALUES ` + strings.Join(vals, ", "))
	e.Settle()
	cdctest.WaitFor(t, 10*time.Second, "couponlink_over_issued counts the bucket really over its quota", func() bool {
		over, _ := cdctest.Metric(t, c.Reg, "couponlink_over_issued", nil)
		return over == 1
	})
}

// An over-issue is confirmed against what the server shows, not the first
// count only: the binlog can hand the cdc a claim before the claim's rows
// are visible to a new read. With the truth's first counts made to miss
// the last coupon (as such a read sees it), the over_issue anomaly is
// still recorded, couponlink_over_issued still counts the bucket, and the
// recounts are counted.
func TestOverIssueConfirmedOnceVisible(t *testing.T) {
	t.Parallel()
	e := cdcenv.New(t)
	tpl := e.Template(map[string]int64{"app": 15}, time.Hour)
	for i := range 15 {
		name := fmt.Sprint("u", i)
		_, err := e.Store.Claim(e.Ctx, coupon.ClaimRequest{TemplateID: tpl, UserID: name, Channel: "app", RequestID: name})
		require.NoError(t, err)
	}
	var hiding atomic.Int32 // counts still to be made without the newest coupon
	q := inventory.NewQueries(canal.DefaultMapping())
	c := e.StartCDC(nil, func(cfg *sink.Config, _ *sink.Daemon) {
		sink.CountTruth(cfg, func(ctx context.Context, ids []int64) (map[inventory.Pair]*inventory.Counts, error) {
			truth, err := q.CountTemplates(ctx, e.DB, ids)
			if err == nil && hiding.Add(-1) >= 0 {
				truth[inventory.Pair{Template: tpl, Channel: "app"}].Held-- // the 16th coupon, not visible yet
			}
			return truth, err
		})
	})
	e.Settle()
	hiding.Store(3)
	// the 16th coupon, past the claim guard (a raw INSERT as a shop's bug writes it)
	_, err := e.DB.Exec(`INSERT INTO user_coupon (template_id, user_id, channel, status, claimed_at, expires_at)
		VALUES (?, 'raw', 'app', 1, NOW(6), NOW(6) + INTERVAL 1 HOUR)`, tpl)
	require.NoError(t, err)
	e.Settle()
	cdctest.WaitFor(t, 10*time.Second, "the over-issue is recorded and counted", func() bool {
		anomalies, _ := cdctest.Metric(t, c.Reg, "couponlink_anomalies_total", map[string]string{"kind": inventory.AnomalyOverIssue})
		over, _ := cdctest.Metric(t, c.Reg, "couponlink_over_issued", nil)
		return anomalies == 1 && over == 1
	})
	recounts, _ := cdctest.Metric(t, c.Reg, "couponlink_cdc_over_issue_recounts_total", nil)
	require.GreaterOrEqual(t, recounts, 1.0, "the count that missed the coupon was made again")
}
