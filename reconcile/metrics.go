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
	corrected    *prometheus.CounterVec
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
			Name: "couponlink_reconcile_drift", Help: "Absolute difference from the truth found by the last pass that compared it, by template, channel and store (counter, template, quota: the claim guard, redis, legacy, claimed_users: members of a claimed set missing or without the limit; over_issue: coupons over the quota or budget, by how many).",
		}, []string{"template", "channel", "store"}),
		corrected: f.NewCounterVec(prometheus.CounterOpts{
			Name: "couponlink_reconcile_corrected_total", Help: "Values the reconciler corrected, by store (counter, template, redis; claimed_users: members of a legacy front end's claimed set added or removed) and the bucket they belong to (template; channel, empty for a template's cached counts): each is a wrong value something wrote. CouponlinkReconcileCorrected fires on any.",
		}, []string{"store", "template", "channel"}),
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
	return m
}

// observeDrift sets the drift gauge from the pass's differences, but the
// findings a person acknowledged as they are: their alerts stay quiet. A
// store the pass could not compare (the counters and the cached counts
// while the cdc is behind) keeps what the last pass that compared it
// found: drift is gone only when a pass proves it gone.
func (r *Reconciler) observeDrift(rep *Report) {
	compared := func(store string) bool {
		return rep.CountersCompared || r.sum != nil || (store != StoreCounter && store != StoreTemplate)
	}
	next := map[driftKey]float64{}
	for k, v := range r.drift {
		if !compared(k.store) {
			next[k] = v
		}
	}
	for _, d := range rep.Differences {
		if d.Finding == api.FindingAcknowledged {
			continue
		}
		next[driftKey{strconv.FormatInt(d.Template, 10), d.Channel, driftStore(d)}] += float64(abs(d.Delta()))
	}
	r.m.drift.Reset()
	for k, v := range next {
		r.m.drift.WithLabelValues(k.template, k.channel, k.store).Set(v)
	}
	r.drift = next
}

// driftStore is the store label of a difference in the drift gauge: its
// store, but over_issue for an over-issue found in the truth (coupons
// over the quota or the budget), apart from the claim guard's drift (store
// quota): only the first is over-issue (CouponlinkOverIssue).
func driftStore(d Difference) string {
	if d.Field == "over_issue" {
		return "over_issue"
	}
	return d.Store
}

// driftKey is a series of the drift gauge.
type driftKey struct{ template, channel, store string }
