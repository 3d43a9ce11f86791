// Package cdctest holds the helpers the tests of sink, reconcile, deploy and
// the API share: reading gathered Prometheus metrics, reading the truth of
// user_coupon and the cdc's inventory_counter rows (reference schema), and
// polling a condition. It is not used by production code.
package cdctest

import (
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/inventory"
)

// WaitFor polls cond (a condition, never a guess of how long something
// needs) every 10 ms until it holds, or fails the test with what after the
// deadline.
func WaitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within %s", what, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Metric returns the value of one series of a gathered metric (a counter,
// a gauge, an untyped value, or a histogram's sample count), and whether it
// exists. The series is the first whose labels include every one of labels
// (nil: the first series).
func Metric(t testing.TB, g prometheus.Gatherer, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	for _, m := range family(t, g, name) {
		if labelsMatch(m, labels) {
			return value(m), true
		}
	}
	return 0, false
}

// MetricSum adds all series of a metric (values as Metric reads them).
func MetricSum(t testing.TB, g prometheus.Gatherer, name string) float64 {
	t.Helper()
	var sum float64
	for _, m := range family(t, g, name) {
		sum += value(m)
	}
	return sum
}

// Series is one series of a gathered metric.
type Series struct {
	Labels []*dto.LabelPair // in label-name order, as gathered
	Value  float64          // as Metric reads it
}

// Key renders the series' labels as k=v,k=v in label-name order.
func (s Series) Key() string {
	parts := make([]string, 0, len(s.Labels))
	for _, l := range s.Labels {
		parts = append(parts, l.GetName()+"="+l.GetValue())
	}
	return strings.Join(parts, ",")
}

// AllSeries returns every series of a metric, in the order Gather returns
// them (sorted by label values).
func AllSeries(t testing.TB, g prometheus.Gatherer, name string) []Series {
	t.Helper()
	var out []Series
	for _, m := range family(t, g, name) {
		out = append(out, Series{Labels: m.GetLabel(), Value: value(m)})
	}
	return out
}

// MetricSeries returns every series of a metric, keyed by Series.Key.
func MetricSeries(t testing.TB, g prometheus.Gatherer, name string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, s := range AllSeries(t, g, name) {
		out[s.Key()] = s.Value
	}
	return out
}

// NoDefaultMetrics fails the test when a couponlink metric is on the
// default registry: every component registers on the one it is given.
func NoDefaultMetrics(t testing.TB) {
	t.Helper()
	fams, err := prometheus.DefaultGatherer.Gather()
	require.NoError(t, err)
	for _, f := range fams {
		if strings.HasPrefix(f.GetName(), "couponlink_") {
			t.Errorf("%s is on the default registry", f.GetName())
		}
	}
}

// family gathers g and returns the series of the metric family name.
func family(t testing.TB, g prometheus.Gatherer, name string) []*dto.Metric {
	t.Helper()
	fams, err := g.Gather()
	require.NoError(t, err)
	var out []*dto.Metric
	for _, f := range fams {
		if f.GetName() == name {
			out = append(out, f.GetMetric()...)
		}
	}
	return out
}

func labelsMatch(m *dto.Metric, want map[string]string) bool {
	n := 0
	for _, l := range m.GetLabel() {
		if v, ok := want[l.GetName()]; ok {
			if v != l.GetValue() {
				return false
			}
			n++
		}
	}
	return n == len(want)
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Histogram != nil:
		return float64(m.GetHistogram().GetSampleCount())
	case m.Untyped != nil:
		return m.GetUntyped().GetValue()
	}
	return 0
}

// Add adds n coupons in state st to c, and reports whether st is one of
// the four stored states (false: c is unchanged).
func Add(c *inventory.Counts, st coupon.Status, n int64) bool { return c.Bump(st, n) }

// Truth counts user_coupon per pair and state, and the release rows of
// inventory_flow (kind 'release') per pair, in the reference schema. A pair
// appears only when it has a user coupon or a release row.
func Truth(t testing.TB, db *sql.DB) map[inventory.Pair]inventory.Counts {
	t.Helper()
	out := map[inventory.Pair]inventory.Counts{}
	rows, err := db.Query(`SELECT template_id, channel, status, COUNT(*) FROM user_coupon GROUP BY 1, 2, 3`)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var p inventory.Pair
		var st coupon.Status
		var n int64
		require.NoError(t, rows.Scan(&p.Template, &p.Channel, &st, &n))
		c := out[p]
		if !Add(&c, st, n) {
			t.Fatalf("status %d in user_coupon", st)
		}
		out[p] = c
	}
	require.NoError(t, rows.Err())
	frows, err := db.Query(`SELECT template_id, channel, COUNT(*) FROM inventory_flow WHERE kind = 'release' GROUP BY 1, 2`)
	require.NoError(t, err)
	defer frows.Close()
	for frows.Next() {
		var p inventory.Pair
		var n int64
		require.NoError(t, frows.Scan(&p.Template, &p.Channel, &n))
		c := out[p]
		c.Released = n
		out[p] = c
	}
	require.NoError(t, frows.Err())
	return out
}

// Counters reads inventory_counter without its all-zero rows, so that it
// compares equal to Truth.
func Counters(t testing.TB, db *sql.DB) map[inventory.Pair]inventory.Counts {
	t.Helper()
	out := CounterRows(t, db)
	for p, c := range out {
		if c == (inventory.Counts{}) {
			delete(out, p)
		}
	}
	return out
}

// CounterRows reads every inventory_counter row, all-zero ones included.
func CounterRows(t testing.TB, db *sql.DB) map[inventory.Pair]inventory.Counts {
	t.Helper()
	rows, err := db.Query(`SELECT template_id, channel, held, used, expired, returned, released FROM inventory_counter`)
	require.NoError(t, err)
	defer rows.Close()
	out := map[inventory.Pair]inventory.Counts{}
	for rows.Next() {
		var p inventory.Pair
		var c inventory.Counts
		require.NoError(t, rows.Scan(&p.Template, &p.Channel, &c.Held, &c.Used, &c.Expired, &c.Returned, &c.Released))
		out[p] = c
	}
	require.NoError(t, rows.Err())
	return out
}
