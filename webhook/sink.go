package webhook

import (
	"context"
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Sink is one destination of the outbox's events: the webhook receiver
// (HTTP), a Redis stream, a NATS JetStream subject. A Dispatcher delivers
// to the webhook receiver event by event (each with its own retries); a
// Relay delivers to a stream sink in outbox order from the sink's own
// position. Both take the stored bodies as they are: every sink sees the
// same event ids and bodies.
type Sink interface {
	// Name labels the sink's metrics and keys its delivery position.
	Name() string
	// Send delivers msgs in order and returns how many of them, from the
	// first, the sink took; fewer than len(msgs) comes with an error. An
	// error that is the event's own fault (the sink will never take it)
	// is wrapped by Refused; any other is an outage, retried without
	// limit (a Relay's backlog is bounded by MaxPending instead).
	Send(ctx context.Context, msgs []Message) (int, error)
	// Close releases the sink's connections.
	Close() error
}

// Message is one stored event as the sinks get it.
type Message struct {
	OutboxID int64  // webhook_outbox.id: the outbox order
	ID       string // the event id (32 hex characters), the body's id: consumers dedupe on it
	Type     string // the event type, the body's type
	Body     []byte // the stored JSON body, byte for byte
}

// RefusedError marks a send error that is the event's own fault.
type RefusedError struct{ Err error }

func (e *RefusedError) Error() string { return "refused: " + e.Err.Error() }
func (e *RefusedError) Unwrap() error { return e.Err }

// Refused wraps err as the event's own fault (nil stays nil).
func Refused(err error) error {
	if err == nil {
		return nil
	}
	return &RefusedError{Err: err}
}

// IsRefused says whether err is the event's own fault.
func IsRefused(err error) bool {
	var r *RefusedError
	return errors.As(err, &r)
}

// Results of a delivery, the result label of
// couponlink_event_deliveries_total and couponlink_webhook_deliveries_total.
const (
	resultDelivered = "delivered" // the sink took it
	resultFailed    = "failed"    // a round failed; the event will be tried again
	resultDropped   = "dropped"   // given up: attempts exhausted or the pending bound passed
)

// SinkMetrics are the per-sink delivery metrics every dispatcher and relay
// of one process share (one registration).
type SinkMetrics struct {
	deliveries *prometheus.CounterVec
	pending    *prometheus.GaugeVec
	oldest     *prometheus.GaugeVec
}

// NewSinkMetrics registers couponlink_event_deliveries_total{sink,result},
// couponlink_event_sink_pending{sink} and
// couponlink_event_sink_oldest_pending_seconds{sink} on r.
func NewSinkMetrics(r prometheus.Registerer) (*SinkMetrics, error) {
	m := &SinkMetrics{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "couponlink_event_deliveries_total",
			Help: "Delivery outcomes of the events, per sink (webhook, Redis stream, NATS JetStream) and result: delivered; failed (a round that failed, tried again); dropped (given up).",
		}, []string{"sink", "result"}),
		pending: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "couponlink_event_sink_pending",
			Help: "Outbox events a sink has not taken yet.",
		}, []string{"sink"}),
		oldest: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "couponlink_event_sink_oldest_pending_seconds",
			Help: "Age of the oldest outbox event a sink has not taken yet (0 when none waits).",
		}, []string{"sink"}),
	}
	for _, c := range []prometheus.Collector{m.deliveries, m.pending, m.oldest} {
		if err := r.Register(c); err != nil {
			return nil, fmt.Errorf("register event sink metrics: %w", err)
		}
	}
	return m, nil
}

// declare makes a sink's series exist from the start (0), so rates and
// alerts see them before the first failure.
func (m *SinkMetrics) declare(sink string) {
	if m == nil {
		return
	}
	for _, res := range []string{resultDelivered, resultFailed, resultDropped} {
		m.deliveries.WithLabelValues(sink, res)
	}
	m.pending.WithLabelValues(sink)
	m.oldest.WithLabelValues(sink)
}

func (m *SinkMetrics) count(sink, result string, n int) {
	if m == nil || n <= 0 {
		return
	}
	m.deliveries.WithLabelValues(sink, result).Add(float64(n))
}

func (m *SinkMetrics) setPending(sink string, n int64, oldest float64) {
	if m == nil {
		return
	}
	m.pending.WithLabelValues(sink).Set(float64(n))
	m.oldest.WithLabelValues(sink).Set(oldest)
}
