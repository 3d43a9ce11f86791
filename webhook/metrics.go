package webhook

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	deliveries    *prometheus.CounterVec
	pending       prometheus.Gauge
	oldestPending prometheus.Gauge
}

func newMetrics(r prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "couponlink_webhook_deliveries_total",
			Help: "Webhook delivery rounds, by event type and result (delivered; failed: will be tried again; dropped: given up after too many attempts or because the outbox was full).",
		}, []string{"event", "result"}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "couponlink_webhook_outbox_pending",
			Help: "Webhook events in the outbox waiting to be delivered.",
		}),
		oldestPending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "couponlink_webhook_oldest_pending_seconds",
			Help: "Age of the oldest webhook event waiting to be delivered (0 when none waits).",
		}),
	}
	for _, c := range []prometheus.Collector{m.deliveries, m.pending, m.oldestPending} {
		if err := r.Register(c); err != nil {
			return nil, fmt.Errorf("register webhook metrics: %w", err)
		}
	}
	for _, e := range Types {
		for _, res := range []string{resultDelivered, resultFailed, resultDropped} {
			m.deliveries.WithLabelValues(e, res)
		}
	}
	return m, nil
}
