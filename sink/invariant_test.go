package sink_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/inventory"
	"github.com/couponlink/couponlink/sink"
)

// The invariant test: a random mixed workload of 20,000 operations on six
// goroutines — the write path and raw SQL, legal and illegal — while the
// cdc runs. Once the checkpoint has reached the writers' last position:
// counters == GROUP BY over user_coupon (+ release flows) for every
// (template, channel, state), Redis == quota - claimed per bucket and per
// template, coupon_template's cached counts == truth, and the anomalies
// recorded are exactly the ones the workload caused, by kind.
func TestInvariantsUnderRandomWorkload(t *testing.T) {
	e := newEnv(t)
	w := newWorkload(e, wlConfig{Workers: 6, Ops: 20_000, Quota: 900, OverIssue: true})
	c := e.StartCDC(nil, func(cfg *sink.Config, _ *sink.Daemon) { cfg.RedemptionGrace = 2 * time.Second })
	e.WaitCheckpoint() // bootstrapped before the first write: every change is seen in the binlog

	start := time.Now()
	w.run()
	t.Logf("workload took %s", time.Since(start).Round(time.Millisecond))
	require.GreaterOrEqual(t, w.ops.Load(), int64(20_000))

	e.waitSettled(c, 60*time.Second)
	truth := e.Truth()
	require.Len(t, truth, 3+3+4+1, "every bucket of the workload holds coupons") // three templates' channels, + partner
	require.Equal(t, truth, e.Counters(), "derived counters differ from GROUP BY over user_coupon")
	e.AssertRedis()
	e.assertTemplateCaches()

	want := w.expected()
	for _, k := range []string{inventory.AnomalyIllegalTransition, inventory.AnomalyDeletedCoupon, inventory.AnomalyUsedWithoutRedemption, inventory.AnomalyOverIssue} {
		require.Positive(t, want[k], "the workload caused no %s: it proves nothing about it", k)
	}
	require.Equal(t, want, e.anomalies(), "anomalies recorded (cdc_anomaly) differ from the ones the workload caused")
	cp := e.checkpoint()
	require.EqualValues(t, sum(want), cp.Anomalies, "the checkpoint's anomaly count")
	for k, n := range want {
		v, _ := cdctest.Metric(t, c.Reg, "couponlink_anomalies_total", map[string]string{"kind": k})
		require.EqualValues(t, n, v, "couponlink_anomalies_total{kind=%q}", k)
	}
	over, _ := cdctest.Metric(t, c.Reg, "couponlink_over_issued", nil)
	require.EqualValues(t, 1, over, "couponlink_over_issued: the workload's over-issue bucket %v, and no other", w.over)
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
