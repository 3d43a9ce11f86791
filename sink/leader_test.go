package sink_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/internal/cdcenv"
	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/sink"
)

// claimer makes numbered claims and redemptions through the write path.
type claimer struct {
	e   *env
	tpl int64
	n   int
}

func (c *claimer) claim(k int) {
	c.e.T.Helper()
	ctx := context.Background()
	for range k {
		ch := []string{"app", "web", "sms"}[c.n%3]
		cp, err := c.e.Store.Claim(ctx, coupon.ClaimRequest{TemplateID: c.tpl, UserID: fmt.Sprint("u", c.n), Channel: ch, RequestID: fmt.Sprint("r", c.n)})
		require.NoError(c.e.T, err)
		if c.n%3 == 0 {
			_, err = c.e.Store.Redeem(ctx, coupon.RedeemRequest{UserCouponID: cp.UserCouponID, OrderID: fmt.Sprint("o", c.n)})
			require.NoError(c.e.T, err)
		}
		c.n++
	}
}

func leaderNamed(name string) func(*sink.Config, *sink.Daemon) {
	return func(cfg *sink.Config, _ *sink.Daemon) { cfg.Leader = name }
}

// Two daemons on one database: only the one holding the leader lock
// applies; the standby waits, and takes over from the checkpoint when the
// leader stops, with the counters still exact.
func TestLeaderLockAndTakeover(t *testing.T) {
	e := newEnv(t)
	w := &claimer{e: e, tpl: e.Template(map[string]int64{"app": 100, "web": 100, "sms": 100}, time.Hour)}
	w.claim(5)
	a := e.StartCDC(nil, leaderNamed("cdc-a"))
	e.WaitCheckpoint()
	require.Equal(t, "cdc-a", e.checkpoint().Leader)
	b := e.StartCDC(nil, leaderNamed("cdc-b"))

	w.claim(20)
	e.assertTruth(true)
	cp := e.checkpoint()
	require.Equal(t, "cdc-a", cp.Leader, "the standby took the checkpoint while the leader runs")
	leader := func(c *cdcenv.CDC) float64 { v, _ := cdctest.Metric(t, c.Reg, "couponlink_cdc_leader", nil); return v }
	require.EqualValues(t, 1, leader(a))
	require.EqualValues(t, 0, leader(b), "the standby says it leads")
	require.Positive(t, cdctest.MetricSum(t, a.Reg, "couponlink_cdc_events_total"))
	require.Zero(t, cdctest.MetricSum(t, b.Reg, "couponlink_cdc_events_total"), "the standby applied events")
	require.True(t, b.Running())

	a.Stop(t)
	cdctest.WaitFor(t, 30*time.Second, "the standby takes over", func() bool { return e.checkpoint().Leader == "cdc-b" })
	require.Greater(t, e.checkpoint().Epoch, cp.Epoch, "a new leader takes a new epoch")
	w.claim(20)
	e.assertTruth(true)
	require.EqualValues(t, 1, leader(b))
	require.Positive(t, cdctest.MetricSum(t, b.Reg, "couponlink_cdc_events_total"))
	require.Empty(t, e.anomalies())
}

// Fencing: when another cdc takes the checkpoint's epoch while a daemon
// runs, the daemon's next batch fails with ErrFenced without committing
// anything; the daemon gives the lock up and waits as a standby (it does
// not exit: a fenced leader is a standby, not a failure), and takes over
// again, from the checkpoint, when the lock is free.
func TestFencedLeaderBecomesStandby(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	w := &claimer{e: e, tpl: e.Template(map[string]int64{"app": 100, "web": 100, "sms": 100}, time.Hour)}
	w.claim(5)
	a := e.StartCDC(nil, leaderNamed("cdc-a"))
	e.assertTruth(true)
	before := e.Counters()
	leader := func() float64 { v, _ := cdctest.Metric(t, a.Reg, "couponlink_cdc_leader", nil); return v }

	// the intruder queues for the lock, then takes the epoch without it
	log := testenv.QuietLogger()
	lock := make(chan *sink.Leader, 1)
	go func() {
		l, err := sink.AcquireLeader(ctx, e.DB, sink.LeaderConfig{Checkpoint: "default", Logger: log})
		assert.NoError(t, err)
		lock <- l
	}()
	intruder, err := sink.New(sink.Config{DB: e.DB, Leader: "intruder", Logger: log, Registerer: prometheus.NewRegistry()})
	require.NoError(t, err)
	_, err = intruder.Start(ctx, false)
	require.NoError(t, err)
	w.claim(3)
	var held *sink.Leader
	select {
	case held = <-lock:
	case <-time.After(30 * time.Second):
		t.Fatal("the fenced daemon did not give the lock up within 30 s")
	}
	require.NotNil(t, held)
	require.Equal(t, "intruder", e.checkpoint().Leader)
	require.Equal(t, before, e.Counters(), "the fenced daemon committed counters after it lost the epoch")
	cdctest.WaitFor(t, 10*time.Second, "the fenced daemon says it does not lead", func() bool { return leader() == 0 })
	require.True(t, a.Running(), "a fenced daemon exits instead of waiting as a standby")

	held.Release(ctx)
	cdctest.WaitFor(t, 30*time.Second, "the standby takes over again", func() bool { return e.checkpoint().Leader == "cdc-a" })
	w.claim(3)
	e.assertTruth(true)
	require.EqualValues(t, 1, leader())
}
