package reconcile

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/couponlink/couponlink/api"
)

type metrics struct {
	runs         *prometheus.CounterVec
	drift        *prometheus.GaugeVec
	corrections  *prometheus.CounterVec
	needsReview  prometheus.Gauge
	lastSuccess  prometheus.Gauge
	duration     prometheus.Histogram
	cdcBehind    prometheus.Gauge
	rowsRead     prometheus.Counter
	replayedRows prometheus.Counter
}

func newMetrics(r prometheus.Registerer) *metrics {
	f := promauto.With(r)
	m := &metrics{
		runs: f.NewCounterVec(prometheus.CounterOpts{
			Name: "couponlink_reconcile_runs_total", Help: "Reconciliation passes by result (clean, auto_fixed, needs_review, error).",
		}, []string{"result"}),
		drift: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "couponlink_reconcile_drift", Help: "Absolute difference from the truth found in the last pass, by template, channel and store (counter, template, quota, redis, legacy).",
		}, []string{"template", "channel", "store"}),
		corrections: f.NewCounterVec(prometheus.CounterOpts{
			Name: "couponlink_reconcile_corrections_total", Help: "Corrections written, by store and mode (auto, manual).",
		}, []string{"store", "mode"}),
		needsReview: f.NewGauge(prometheus.GaugeOpts{
			Name: "couponlink_reconcile_needs_review", Help: "Reconcile tasks that need a person and are not resolved.",
		}),
		lastSuccess: f.NewGauge(prometheus.GaugeOpts{
			Name: "couponlink_reconcile_last_success_timestamp_seconds", Help: "When the last pass that compared everything finished (unix seconds).",
		}),
		duration: f.NewHistogram(prometheus.HistogramOpts{
			Name: "couponlink_reconcile_duration_seconds", Help: "Duration of a reconciliation pass.",
			Buckets: []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300},
		}),
		cdcBehind: f.NewGauge(prometheus.GaugeOpts{
			Name: "couponlink_reconcile_cdc_behind", Help: "1 when the last pass could not compare the counters because the cdc had not reached the snapshot.",
		}),
		rowsRead: f.NewCounter(prometheus.CounterOpts{
			Name: "couponlink_reconcile_rows_counted_total", Help: "User coupons counted by reconciliation snapshots.",
		}),
		replayedRows: f.NewCounter(prometheus.CounterOpts{
			Name: "couponlink_reconcile_replayed_rows_total", Help: "Binlog row changes replayed to move a snapshot's truth to the cdc's checkpoint.",
		}),
	}
	// acknowledged (only findings a person acknowledged) shows once a
	// pass had that result
	for _, r := range []string{resultClean, resultAutoFixed, resultNeedsReview, resultError} {
		m.runs.WithLabelValues(r)
	}
	for _, s := range []string{StoreCounter, StoreTemplate, StoreQuota, StoreRedis, StoreLegacy} {
		m.corrections.WithLabelValues(s, "auto")
		m.corrections.WithLabelValues(s, "manual")
	}
	return m
}

// observeDrift sets the drift gauge from the pass's differences, but the
// findings a person acknowledged as they are: their alerts stay quiet.
func (r *Reconciler) observeDrift(rep *Report) {
	r.m.drift.Reset()
	for _, d := range rep.Differences {
		if d.Finding == api.FindingAcknowledged {
			continue
		}
		delta := d.Delta()
		if delta < 0 {
			delta = -delta
		}
		g := r.m.drift.WithLabelValues(strconv.FormatInt(d.Template, 10), d.Channel, d.Store)
		g.Add(float64(delta))
	}
}
