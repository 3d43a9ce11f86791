package reconcile

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
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
			Name: "couponlink_reconcile_runs_total", Help: "Reconciliation passes by result (clean, auto_fixed, needs_review, acknowledged: only findings a person acknowledged, error).",
		}, []string{"result"}),
		drift: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "couponlink_reconcile_drift", Help: "Absolute difference from the truth found in the last pass, by template, channel and store (counter, template, quota, redis, legacy); a finding a person acknowledged as it is found is left out.",
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
	for _, r := range []string{resultClean, resultAutoFixed, resultNeedsReview, resultAcknowledged, resultError} {
		m.runs.WithLabelValues(r)
	}
	for _, s := range []string{StoreCounter, StoreTemplate, StoreQuota, StoreRedis, StoreLegacy} {
		m.corrections.WithLabelValues(s, "auto")
		m.corrections.WithLabelValues(s, "manual")
	}
	return m
}
