package reconcile_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/reconcile"
	"github.com/couponlink/couponlink/sink"
)

// Passes on a live, correct system (claims and redemptions through the
// write path, the cdc following) never find drift and never correct
// anything: whatever moves while a pass looks is in flight, not wrong.
func TestLiveSystemNoFalseCorrections(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startCDC(nil)
	tpl := e.template(map[string]int64{"app": 100000, "web": 100000})
	e.settle()

	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var ops atomic.Int64
	var failed atomic.Value
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ch := []string{"app", "web"}[w%2]
			for i := 0; ctx.Err() == nil; i++ {
				c, err := e.store.Claim(ctx, coupon.ClaimRequest{TemplateID: tpl, UserID: fmt.Sprint("w", w), Channel: ch,
					RequestID: fmt.Sprintf("live-%d-%d", w, i)})
				if err == nil && i%3 == 0 {
					_, err = e.store.Redeem(ctx, coupon.RedeemRequest{UserCouponID: c.UserCouponID, OrderID: fmt.Sprint("o", c.UserCouponID)})
				}
				if err != nil && ctx.Err() == nil {
					failed.CompareAndSwap(nil, err)
					return
				}
				ops.Add(1)
			}
		}()
	}
	t.Cleanup(func() { stop(); wg.Wait() })

	// Redis is left out while writes flow (owner-mode keys move with every
	// claim: busy); counters, template caches and quotas are compared.
	r, _ := e.reconciler(func(c *reconcile.Config) { c.RedisMode = sink.RedisOff })
	deadline := time.Now().Add(3 * time.Second)
	passes, inFlight := 0, 0
	for passes < 10 || time.Now().Before(deadline) {
		rep := e.pass(r)
		passes++
		inFlight += rep.InFlight
		require.True(t, rep.CountersCompared, rep.Note)
		require.Empty(t, rep.Differences, "pass %d on a live system after %d operations", passes, ops.Load())
		require.Equal(t, "clean", rep.Status)
	}
	stop()
	wg.Wait()
	require.Nil(t, failed.Load(), "a write failed")
	require.Empty(t, e.corrections(), "nothing was corrected")
	t.Logf("%d passes during %d operations; %d counter rows in flight", passes, ops.Load(), inFlight)

	e.settle()
	r, _ = e.reconciler()
	rep := e.pass(r)
	require.Equal(t, "clean", rep.Status, "%v", diffs(rep.Differences))
	require.Empty(t, rep.Differences)
}
