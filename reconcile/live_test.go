package reconcile_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/inventory"
	"github.com/couponlink/couponlink/reconcile"
)

// Passes on a live, correct system (claims and redemptions through the
// write path, the cdc following) never find drift and never correct
// anything: whatever moves while a pass looks is in flight, not wrong.
func TestLiveSystemNoFalseCorrections(t *testing.T) {
	t.Parallel()
	e, _, w := liveEnv(t, "live")

	// Redis is left out while writes flow (owner-mode keys move with every
	// claim: busy); counters, template caches and quotas are compared.
	r, _ := e.reconciler(func(c *reconcile.Config) { c.RedisMode = inventory.RedisOff })
	deadline := time.Now().Add(3 * time.Second)
	passes, inFlight := 0, 0
	for passes < 10 || time.Now().Before(deadline) {
		rep := e.pass(r)
		passes++
		inFlight += rep.InFlight
		require.True(t, rep.CountersCompared, rep.Note)
		require.Empty(t, rep.Differences, "pass %d on a live system after %d operations", passes, w.ops.Load())
		require.Equal(t, "clean", rep.Status)
	}
	w.stop(t)
	require.Empty(t, e.corrections(), "nothing was corrected")
	t.Logf("%d passes during %d operations; %d counter rows in flight", passes, w.ops.Load(), inFlight)

	e.Settle()
	r, _ = e.reconciler()
	rep := e.pass(r)
	require.Equal(t, "clean", rep.Status, "%v", diffs(rep.Differences))
	require.Empty(t, rep.Differences)
}

// With the binlog at hand, a pass compares every counter row exactly at
// the cdc's checkpoint, even while every row moves: none is left "in
// flight", and a counter broken under load is found and corrected by
// exactly the error, while the cdc keeps adding to it.
func TestBusySystemComparesAtTheCheckpoint(t *testing.T) {
	t.Parallel()
	e, tpl, w := liveEnv(t, "busy")

	binlog, err := canal.ConfigFromDSN(e.DSN)
	require.NoError(t, err)
	r, _ := e.reconciler(func(c *reconcile.Config) { c.RedisMode = inventory.RedisOff; c.Binlog = binlog })
	for pass := 0; pass < 5; pass++ {
		rep := e.pass(r)
		require.True(t, rep.CountersCompared, rep.Note)
		require.Zero(t, rep.InFlight, "with the binlog no row waits")
		require.Empty(t, rep.Differences, "pass %d after %d operations", pass, w.ops.Load())
	}
	// break one counter under load: +2 held
	_, err = e.DB.Exec(`UPDATE inventory_counter SET held = held + 2 WHERE template_id = ? AND channel = 'app'`, tpl)
	require.NoError(t, err)
	rep := e.pass(r)
	got := summarize(rep.Differences)
	want := []string{fmt.Sprintf("counter %d/app/held +2 fixed", tpl)}
	if len(got) == 2 { // the cdc refreshed the template cache from the broken counter before the read
		want = append(want, fmt.Sprintf("template %d/issued_count +2 fixed", tpl))
	}
	require.Equal(t, want, got)
	w.stop(t)
	e.Settle()
	rep = e.pass(r)
	require.Equal(t, "clean", rep.Status, "%v", diffs(rep.Differences))
	require.Equal(t, e.Truth(), e.CounterRows(), "the correction held while the cdc kept adding")
}

// writes is 4 workers claiming on both channels of a template, redeeming
// every third coupon, until stopped.
type writes struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	ops    atomic.Int64
	failed atomic.Value
}

// liveEnv is a system in use: the cdc following a template of two large
// channels (app, web) while startWrites' clients claim and redeem on it
// (their users and request ids start with prefix).
func liveEnv(t *testing.T, prefix string) (*env, int64, *writes) {
	e := newEnv(t)
	e.StartCDC(nil)
	tpl := e.Template(map[string]int64{"app": 100000, "web": 100000}, time.Hour)
	e.Settle()
	return e, tpl, startWrites(t, e, tpl, prefix)
}

func startWrites(t *testing.T, e *env, tpl int64, prefix string) *writes {
	ctx, cancel := context.WithCancel(context.Background())
	w := &writes{cancel: cancel}
	for n := range 4 {
		w.wg.Go(func() {
			ch := []string{"app", "web"}[n%2]
			for i := 0; ctx.Err() == nil; i++ {
				c, err := e.Store.Claim(ctx, coupon.ClaimRequest{TemplateID: tpl, UserID: fmt.Sprint(prefix, n), Channel: ch,
					RequestID: fmt.Sprintf("%s-%d-%d", prefix, n, i)})
				if err == nil && i%3 == 0 {
					_, err = e.Store.Redeem(ctx, coupon.RedeemRequest{UserCouponID: c.UserCouponID, OrderID: fmt.Sprint("o", c.UserCouponID)})
				}
				if err != nil && ctx.Err() == nil {
					w.failed.CompareAndSwap(nil, err)
					return
				}
				w.ops.Add(1)
			}
		})
	}
	t.Cleanup(func() { cancel(); w.wg.Wait() })
	return w
}

// stop ends the writes and fails the test if one of them failed.
func (w *writes) stop(t *testing.T) {
	t.Helper()
	w.cancel()
	w.wg.Wait()
	require.Nil(t, w.failed.Load(), "a write failed")
}

func summarize(ds []reconcile.Difference) []string {
	var out []string
	for _, d := range ds {
		out = append(out, fmt.Sprintf("%s %s %+d %s", d.Store, d.Target, d.Delta(), d.Action))
	}
	return out
}
