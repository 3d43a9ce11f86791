package reconcile_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/reconcile"
)

// fakeClock is a settable clock for Config.Now.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Set(t time.Time) { c.mu.Lock(); defer c.mu.Unlock(); c.t = t }

// The metrics after passes: runs by result, drift by template, channel and
// store (the last pass only), corrections by store and mode, open items,
// the time of the last complete pass, the duration histogram; after the
// first pass, every series as exposed (testutil.GatherAndCompare), with
// the rows counted and none on the default registry.
func TestMetricsAfterPasses(t *testing.T) {
	t.Parallel()
	e, tpl := driftEnv(t)
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	h := &hook{}
	r, reg := e.reconciler(func(c *reconcile.Config) { c.Now = clock.Now; c.Redis = hookedClient(t, h) })
	runs := func(result string) float64 {
		v, ok := cdctest.Metric(t, reg, "couponlink_reconcile_runs_total", map[string]string{"result": result})
		require.True(t, ok, "runs_total{result=%q} exists", result)
		return v
	}
	gauge := func(name string) float64 {
		v, ok := cdctest.Metric(t, reg, name, nil)
		require.True(t, ok, "%s exists", name)
		return v
	}
	corrections := func(store string) (n float64) { // summed over the buckets
		for _, s := range cdctest.AllSeries(t, reg, "couponlink_reconcile_corrected_total") {
			if strings.Contains(s.Key(), "store="+store+",") {
				n += s.Value
			}
		}
		return n
	}
	tp := fmt.Sprint(tpl)

	// 1. clean
	rep := e.pass(r)
	require.Equal(t, "clean", rep.Status)
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(afterOneCleanPass()), "couponlink_reconcile_runs_total",
		"couponlink_reconcile_corrected_total", "couponlink_reconcile_needs_review", "couponlink_reconcile_last_success_timestamp_seconds",
		"couponlink_reconcile_cdc_behind", "couponlink_reconcile_rows_counted_total", "couponlink_reconcile_drift"))
	cdctest.NoDefaultMetrics(t)
	v, _ := cdctest.Metric(t, reg, "couponlink_reconcile_duration_seconds", nil)
	require.Equal(t, 1.0, v, "one pass observed")

	// 2. a counter and a key fixed, the claim guard flagged
	clock.Set(time.Unix(1_700_000_600, 0))
	e.exec(`UPDATE inventory_counter SET held = held + 2 WHERE template_id = ? AND channel = 'app'`, tpl)
	e.exec(`UPDATE channel_quota SET claimed = claimed + 1 WHERE template_id = ? AND channel = 'app'`, tpl)
	e.Settle()                                                                 // the cdc rewrites the template's keys
	require.NoError(t, e.RDB.IncrBy(e.Ctx, e.Keys.Stock(tpl, "web"), 4).Err()) // then the drift
	rep = e.pass(r)
	require.Equal(t, "needs_review", rep.Status, "%v", diffs(rep.Differences))
	require.Equal(t, []float64{1, 0, 1, 0}, []float64{runs("clean"), runs("auto_fixed"), runs("needs_review"), runs("error")})
	require.ElementsMatch(t, []string{
		"channel=app,store=counter,template=" + tp + " 2",
		"channel=app,store=quota,template=" + tp + " 1",
		"channel=web,store=redis,template=" + tp + " 4",
	}, series(t, reg, "couponlink_reconcile_drift"))
	require.Equal(t, 1.0, corrections("counter"))
	require.Equal(t, 1.0, corrections("redis"))
	require.Zero(t, corrections("template"))
	require.Zero(t, corrections("quota"))
	require.Equal(t, 1.0, gauge("couponlink_reconcile_needs_review"))
	require.Equal(t, 1_700_000_600.0, gauge("couponlink_reconcile_last_success_timestamp_seconds"))

	// 3. resolved and repaired by a person: clean again, nothing open, no drift
	clock.Set(time.Unix(1_700_001_200, 0))
	require.NoError(t, reconcile.Resolve(e.Ctx, e.DB, rep.TaskID, "alice", "claimed was bumped by a test; set back", ""))
	e.exec(`UPDATE channel_quota SET claimed = claimed - 1 WHERE template_id = ? AND channel = 'app'`, tpl)
	e.Settle()
	rep = e.pass(r)
	require.Equal(t, "clean", rep.Status, "%v", diffs(rep.Differences))
	require.Equal(t, []float64{2, 0, 1, 0}, []float64{runs("clean"), runs("auto_fixed"), runs("needs_review"), runs("error")})
	require.Empty(t, series(t, reg, "couponlink_reconcile_drift"), "drift is the last pass's")
	require.Zero(t, gauge("couponlink_reconcile_needs_review"))
	require.Equal(t, 1.0, corrections("counter"), "nothing more corrected")
	require.Equal(t, 1_700_001_200.0, gauge("couponlink_reconcile_last_success_timestamp_seconds"))

	// 4. a failing pass: runs{error}, the last success stays
	clock.Set(time.Unix(1_700_001_800, 0))
	h.failPipelines.Store(true)
	require.NoError(t, e.RDB.IncrBy(e.Ctx, e.Keys.Stock(tpl, "web"), 1).Err()) // not even read
	_, err := r.Pass(e.Ctx)
	require.ErrorContains(t, err, "injected Redis failure")
	h.failPipelines.Store(false)
	require.Equal(t, []float64{2, 0, 1, 1}, []float64{runs("clean"), runs("auto_fixed"), runs("needs_review"), runs("error")})
	require.Equal(t, 1_700_001_200.0, gauge("couponlink_reconcile_last_success_timestamp_seconds"))
	require.Equal(t, "error", e.task(4).Status)
	v, _ = cdctest.Metric(t, reg, "couponlink_reconcile_duration_seconds", nil)
	require.Equal(t, 4.0, v)
}

// afterOneCleanPass is the exposition of the reconciler's series after one
// clean pass, at 1_700_000_000, over driftEnv's 15 coupons: every result
// exists at 0, and no correction or drift series.
func afterOneCleanPass() string {
	return `
# HELP couponlink_reconcile_runs_total Reconciliation passes by result (clean, auto_fixed, needs_review, error).
# TYPE couponlink_reconcile_runs_total counter
couponlink_reconcile_runs_total{result="clean"} 1
couponlink_reconcile_runs_total{result="auto_fixed"} 0
couponlink_reconcile_runs_total{result="needs_review"} 0
couponlink_reconcile_runs_total{result="error"} 0
# HELP couponlink_reconcile_needs_review Reconcile tasks that need a person and are not resolved.
# TYPE couponlink_reconcile_needs_review gauge
couponlink_reconcile_needs_review 0
# HELP couponlink_reconcile_last_success_timestamp_seconds When the last pass that compared everything finished (unix seconds).
# TYPE couponlink_reconcile_last_success_timestamp_seconds gauge
couponlink_reconcile_last_success_timestamp_seconds 1.7e+09
# HELP couponlink_reconcile_cdc_behind 1 when the last pass could not compare the counters because the cdc had not reached the snapshot.
# TYPE couponlink_reconcile_cdc_behind gauge
couponlink_reconcile_cdc_behind 0
# HELP couponlink_reconcile_rows_counted_total User coupons counted by reconciliation snapshots.
# TYPE couponlink_reconcile_rows_counted_total counter
couponlink_reconcile_rows_counted_total 15
`
}

// Run passes at once and then every interval, until its context ends.
func TestRunLoop(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.StartCDC(nil)
	e.claim(e.Template(map[string]int64{"app": 10}, time.Hour), "app", 2)
	e.Settle()
	r, reg := e.reconciler()
	ctx, cancel := context.WithCancel(e.Ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx, 50*time.Millisecond) }()
	cdctest.WaitFor(t, testCatchUp, "three passes", func() bool {
		v, _ := cdctest.Metric(t, reg, "couponlink_reconcile_runs_total", map[string]string{"result": "clean"})
		return v >= 3
	})
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(testCatchUp):
		t.Fatal("Run did not return after its context ended")
	}
	var odd []string
	for id := int64(1); id <= e.int(`SELECT COALESCE(MAX(id), 0) FROM reconcile_task`); id++ {
		if tr := e.task(id); tr.Status != "clean" && tr.Status != "error" {
			odd = append(odd, fmt.Sprintf("task %d %s: %s %v", id, tr.Status, tr.Summary, tr.Differences))
		}
	}
	require.Empty(t, odd, "every finished pass was clean")
}
