package sink_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/sink"
)

// A chore that fails never fails a batch: with release_due gone, every
// pass of the release chore fails — logged, counted, tried again — while
// the batches go on applying, the tail is never restarted (the leader's
// epoch stays), and the counters stay exact. Once the table is back, the
// next pass succeeds.
func TestChoreFailureNeverFailsABatch(t *testing.T) {
	e := newEnv(t)
	w := &claimer{e: e, tpl: e.Template(map[string]int64{"app": 100, "web": 100, "sms": 100}, time.Hour)}
	c := e.StartCDC(nil, func(cfg *sink.Config, _ *sink.Daemon) { cfg.ReleaseEvery = 20 * time.Millisecond })
	e.WaitCheckpoint()
	epoch := func() (n int64) {
		require.NoError(t, e.DB.QueryRow(`SELECT epoch FROM cdc_checkpoint WHERE name = 'default'`).Scan(&n))
		return n
	}
	started := epoch()
	runs := func(result string) float64 {
		v, _ := cdctest.Metric(t, c.Reg, "couponlink_cdc_release_runs_total", map[string]string{"result": result})
		return v
	}

	_, err := e.DB.Exec(`RENAME TABLE release_due TO release_due_away`)
	require.NoError(t, err)
	failed := runs("error")
	w.claim(10) // batches, and heartbeats, while every release pass fails
	cdctest.WaitFor(t, 30*time.Second, "release passes failing", func() bool { return runs("error") >= failed+3 })
	e.assertTruth(true)
	w.claim(5)
	e.assertTruth(true)
	require.Equal(t, started, epoch(), "the tail restarted: a chore's failure failed a batch")
	require.True(t, c.Running())

	_, err = e.DB.Exec(`RENAME TABLE release_due_away TO release_due`)
	require.NoError(t, err)
	ok := runs("ok")
	cdctest.WaitFor(t, 30*time.Second, "a release pass after the table came back", func() bool { return runs("ok") > ok })
	require.Equal(t, started, epoch())
}
