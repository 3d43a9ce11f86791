package httpapi

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

type metrics struct {
	requests     *prometheus.CounterVec
	duration     *prometheus.HistogramVec
	transitions  *prometheus.CounterVec
	sweeps       *prometheus.CounterVec
	claimGroups  prometheus.Histogram
	redeemGroups prometheus.Histogram
}

// groupBuckets are the group sizes of the combiners' histograms.
var groupBuckets = []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512}

func newMetrics(r prometheus.Registerer) *metrics {
	f := promauto.With(r)
	return &metrics{
		requests: f.NewCounterVec(prometheus.CounterOpts{
			Name: "couponlink_api_requests_total", Help: "API requests by route and HTTP status code.",
		}, []string{"route", "code"}),
		duration: f.NewHistogramVec(prometheus.HistogramOpts{
			Name: "couponlink_api_request_duration_seconds", Help: "API request latency by route.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"route"}),
		transitions: f.NewCounterVec(prometheus.CounterOpts{
			Name: "couponlink_api_transitions_total", Help: "Coupon state changes written by the API, by action (claim, redeem, refund_restore, refund_recycle, void, expire).",
		}, []string{"kind"}),
		sweeps: f.NewCounterVec(prometheus.CounterOpts{
			Name: "couponlink_api_expiry_sweeps_total", Help: "Expiry sweeps run by the API, by result (ok, error).",
		}, []string{"result"}),
		claimGroups: f.NewHistogram(prometheus.HistogramOpts{
			Name: "couponlink_api_claim_group_size", Help: "Claims per transaction of the claim combiner (only when -combine-claims is on).",
			Buckets: groupBuckets,
		}),
		redeemGroups: f.NewHistogram(prometheus.HistogramOpts{
			Name: "couponlink_api_redemption_group_size", Help: "Redemptions per transaction of the redemption combiner (only when -combine-redemptions is on).",
			Buckets: groupBuckets,
		}),
	}
}

// route is a route's request counter by status code and its latency
// histogram, looked up once per route and status instead of by label
// values on every request (each series still appears with its first
// request).
func (m *metrics) route(pattern string) (count func(status int) prometheus.Counter, took func() prometheus.Observer) {
	var byStatus sync.Map // int -> prometheus.Counter
	count = func(status int) prometheus.Counter {
		if c, ok := byStatus.Load(status); ok {
			return c.(prometheus.Counter)
		}
		c := m.requests.WithLabelValues(pattern, strconv.Itoa(status))
		byStatus.Store(status, c)
		return c
	}
	took = sync.OnceValue(func() prometheus.Observer { return m.duration.WithLabelValues(pattern) })
	return count, took
}
