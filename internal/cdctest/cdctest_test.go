package cdctest_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/inventory"
)

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "c_total", Help: "c"}, []string{"a", "b"})
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "g", Help: "g"})
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "h", Help: "h"})
	reg.MustRegister(c, g, h)
	c.WithLabelValues("x", "1").Add(2)
	c.WithLabelValues("y", "1").Add(3)
	g.Set(7)
	h.Observe(0.1)
	h.Observe(0.2)

	v, ok := cdctest.Metric(t, reg, "c_total", map[string]string{"a": "y"})
	require.True(t, ok)
	require.Equal(t, 3.0, v, "a subset of the labels selects a series")
	_, ok = cdctest.Metric(t, reg, "c_total", map[string]string{"a": "z"})
	require.False(t, ok)
	_, ok = cdctest.Metric(t, reg, "c_total", map[string]string{"zz": "x"})
	require.False(t, ok, "a label the series lacks never matches")
	v, ok = cdctest.Metric(t, reg, "g", nil)
	require.True(t, ok)
	require.Equal(t, 7.0, v)
	v, _ = cdctest.Metric(t, reg, "h", nil)
	require.Equal(t, 2.0, v, "a histogram's sample count")
	_, ok = cdctest.Metric(t, reg, "missing", nil)
	require.False(t, ok)

	require.Equal(t, 5.0, cdctest.MetricSum(t, reg, "c_total"))
	require.Equal(t, map[string]float64{"a=x,b=1": 2, "a=y,b=1": 3}, cdctest.MetricSeries(t, reg, "c_total"))
	all := cdctest.AllSeries(t, reg, "c_total")
	require.Len(t, all, 2)
	require.Equal(t, "a=x,b=1", all[0].Key())
	require.Empty(t, cdctest.AllSeries(t, reg, "missing"))
}

func TestWaitFor(t *testing.T) {
	n := 0
	cdctest.WaitFor(t, time.Second, "three polls", func() bool { n++; return n == 3 })
	require.Equal(t, 3, n)
}

func TestAdd(t *testing.T) {
	var c inventory.Counts
	for _, st := range coupon.Statuses {
		require.True(t, cdctest.Add(&c, st, int64(st)))
	}
	require.Equal(t, inventory.Counts{Held: 1, Used: 2, Expired: 3, Returned: 4}, c)
	require.False(t, cdctest.Add(&c, coupon.None, 1))
	require.Equal(t, inventory.Counts{Held: 1, Used: 2, Expired: 3, Returned: 4}, c, "unchanged")
}
