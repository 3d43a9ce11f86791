package reconcile_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/reconcile"
)

// Without the binlog, and with the cdc down (its checkpoint behind the
// snapshot), a pass says the counters were not compared and still compares
// (and fixes) what does not depend on the cdc: channel_quota and the Redis
// stock keys.
func TestCdcDownComparesWhatItCan(t *testing.T) {
	t.Parallel()
	e, tpl := driftEnv(t)
	e.CDC.Stop(t)

	e.claim(tpl, "app", 2) // claimable app 38; Redis still says 40
	e.exec(`UPDATE channel_quota SET claimed = claimed + 1 WHERE template_id = ? AND channel = 'web'`, tpl)
	e.exec(`UPDATE inventory_counter SET held = held + 1 WHERE template_id = ? AND channel = 'web'`, tpl) // not compared

	r, reg := e.reconciler(func(c *reconcile.Config) { c.CatchUpWait = 500 * time.Millisecond; c.Binlog = canal.Config{} })
	rep := e.pass(r)
	require.False(t, rep.CountersCompared)
	require.Contains(t, rep.Note, "counters not compared")
	require.Contains(t, rep.Note, "is the cdc down")
	app, web, all := e.Keys.Stock(tpl, "app"), e.Keys.Stock(tpl, "web"), e.Keys.TemplateStock(tpl)
	require.ElementsMatch(t, []string{
		"quota " + target(tpl, "web", "claimed") + " 5 6 needs_review",
		"redis " + app + " 38 40 fixed",
		"redis " + web + " 44 45 fixed",
		"redis " + all + " 82 85 fixed",
	}, diffs(rep.Differences))
	require.Equal(t, "needs_review", rep.Status)
	for _, c := range e.corrections() {
		require.Equal(t, "redis", c.Store, "only Redis is corrected: %+v", c)
	}
	require.Equal(t, int64(6), e.int(`SELECT held FROM inventory_counter WHERE template_id = ? AND channel = 'web'`, tpl), "counters untouched")
	require.Contains(t, e.task(rep.TaskID).Summary, "counters not compared")
	behind, _ := cdctest.Metric(t, reg, "couponlink_reconcile_cdc_behind", nil)
	require.Equal(t, 1.0, behind)
	last, _ := cdctest.Metric(t, reg, "couponlink_reconcile_last_success_timestamp_seconds", nil)
	require.Zero(t, last, "a pass that could not compare the counters is not a success")
}

// With the binlog, a cdc that is down is still checked: its counters are
// compared at its own checkpoint (the truth replayed back to it), and the
// pass says the cdc is behind.
func TestCdcDownComparedAtItsCheckpoint(t *testing.T) {
	t.Parallel()
	e, tpl := driftEnv(t)
	e.CDC.Stop(t)
	e.claim(tpl, "app", 2) // after the checkpoint: replayed back out of the truth
	e.exec(`UPDATE inventory_counter SET held = held + 1 WHERE template_id = ? AND channel = 'web'`, tpl)

	// CatchUpWait also bounds the replay: 2 s leaves room on a loaded machine
	r, reg := e.reconciler(func(c *reconcile.Config) { c.CatchUpWait = 2 * time.Second })
	// the checkpoint must look stale (saved longer ago than CatchUpWait)
	for e.int(`SELECT TIMESTAMPDIFF(MICROSECOND, updated_at, NOW(6)) FROM cdc_checkpoint`) < 2_100_000 {
		time.Sleep(20 * time.Millisecond)
	}
	rep := e.pass(r)
	require.True(t, rep.CountersCompared, rep.Note)
	require.Contains(t, rep.Note, "the cdc is behind")
	require.Contains(t, diffs(rep.Differences), "counter "+target(tpl, "web", "held")+" 5 6 fixed")
	behind, _ := cdctest.Metric(t, reg, "couponlink_reconcile_cdc_behind", nil)
	require.Equal(t, 1.0, behind)
}
