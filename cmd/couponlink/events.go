package main

import (
	"database/sql"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/couponlink/couponlink/internal/settings"
	"github.com/couponlink/couponlink/internal/tlsconf"
	"github.com/couponlink/couponlink/streams"
	"github.com/couponlink/couponlink/webhook"
)

// webhookSettings are the cdc's flags of the webhook.
type webhookSettings struct {
	url                     *string
	secret, previousSecret  func() string
	legacySignature         *bool
	maxAttempts, maxPending *int
}

func webhookFlags(f *settings.Flags) *webhookSettings {
	return &webhookSettings{
		url:    f.EnvRedacted("webhook-url", "COUPONLINK_WEBHOOK_URL", "", "receiver of the webhook events (quota.*, channel.*, anomaly.detected, reconcile.needs_review; docs/events.md); empty: no webhooks"),
		secret: f.EnvSecret("webhook-secret", "COUPONLINK_WEBHOOK_SECRET", "HMAC-SHA256 key the webhook requests are signed with: X-Couponlink-Signature: t=<unix>,v1=<hex> (required with -webhook-url)"),
		previousSecret: f.EnvSecret("webhook-previous-secret", "COUPONLINK_WEBHOOK_PREVIOUS_SECRET",
			"during a rotation, the secret being replaced: each request is signed with both (v1 twice) until every receiver has the new one"),
		legacySignature: f.EnvBool("webhook-legacy-signature", "COUPONLINK_WEBHOOK_LEGACY_SIGNATURE", false,
			"also send the old body-only signature (X-Couponlink-Body-Signature: sha256=<hex>), replayable, for receivers not yet moved; removed in the next release"),
		maxAttempts: f.EnvInt("webhook-max-attempts", "COUPONLINK_WEBHOOK_MAX_ATTEMPTS", 12, "delivery rounds (with exponential backoff, 1 s to 10 min) before an event is dropped"),
		maxPending:  f.EnvInt("webhook-max-pending", "COUPONLINK_WEBHOOK_MAX_PENDING", 100_000, "bound of the webhook outbox; beyond it the oldest events are dropped (counted, logged)"),
	}
}

// dispatcher is the webhook dispatcher, or nil without -webhook-url. It
// delivers while epoch (the cdc's leader epoch of checkpoint) is not 0:
// only the leader sends, and a new leader takes the rounds' leases over at
// once.
func (o *webhookSettings) dispatcher(db *sql.DB, reg prometheus.Registerer, sm *webhook.SinkMetrics, checkpoint string, format webhook.Format, epoch func() int64, log *slog.Logger) (*webhook.Dispatcher, error) {
	if *o.url == "" {
		return nil, nil
	}
	return webhook.New(webhook.Config{DB: db, URL: *o.url, Secret: []byte(o.secret()), PreviousSecret: []byte(o.previousSecret()),
		LegacySignature: *o.legacySignature, MaxAttempts: *o.maxAttempts,
		MaxPending: *o.maxPending, Logger: log, Registerer: reg, SinkMetrics: sm, Epoch: epoch, Checkpoint: checkpoint, PollEvery: eventPoll, Format: format})
}

// eventPoll is how often the webhook dispatcher looks for due events (the
// relays' default too): a new leader's events go out well within a second.
const eventPoll = 200 * time.Millisecond

// eventSettings are the cdc's flags of the event streams (Redis streams,
// NATS JetStream, RabbitMQ) beside the webhook.
type eventSettings struct {
	sinks                   func() string
	maxAttempts, maxPending *int
	lowShare                *float64
	format                  *string
}

func eventFlags(f *settings.Flags) *eventSettings {
	o := &eventSettings{
		sinks: f.EnvSecret("event-sinks", "COUPONLINK_EVENT_SINKS", "comma-separated stream sinks of the webhook events, each with its own position: "+
			"redis://[user:password@]host:port[/db]?stream=couponlink:events&maxlen=1000000&name=redis (rediss:// for TLS, with tls_ca=, tls_cert=, tls_key= files, else -redis-tls*'s), "+
			"nats://host:port?subject=couponlink.events&stream=COUPONLINK_EVENTS&duplicates=2m&name=nats, "+
			"kafka://[user:password@]host:port[,host:port]?topic=couponlink.events&topic_per_type=false&sasl=plain|scram-sha-256|scram-sha-512&name=kafka (kafkas:// for TLS, with tls_ca=, tls_cert=, tls_key= files), "+
			"amqp://user:password@host:port/vhost?exchange=couponlink.events&declare=true&name=rabbitmq (amqps:// for TLS, with tls_ca=, tls_cert=, tls_key= files) (docs/events.md); empty: none"),
		maxAttempts: f.EnvInt("event-sink-max-attempts", "COUPONLINK_EVENT_SINK_MAX_ATTEMPTS", 12, "rounds a stream sink may refuse one event (too large) before it is dropped; an unreachable sink is retried without limit"),
		lowShare:    f.EnvFloat("channel-low-share", "COUPONLINK_CHANNEL_LOW_SHARE", 0.1, "a channel bucket whose claimable slots fall to this share of its quota (rounded up) or below writes a channel.low event (0: none)"),
		format: f.EnvString("event-format", "COUPONLINK_EVENT_FORMAT", webhook.FormatNative, "what the webhook and the stream sinks send: native (the stored JSON body) or cloudevents "+
			"(CloudEvents 1.0: a structured application/cloudevents+json envelope to the webhook, Redis and NATS, the body with ce_* or cloudEvents_* headers to Kafka and RabbitMQ; docs/events.md)"),
		maxPending: f.EnvInt("event-sink-max-pending", "COUPONLINK_EVENT_SINK_MAX_PENDING", 100_000, "events a stream sink may fall behind; beyond it its oldest are dropped (counted, logged)"),
	}
	f.AfterParse(func() error {
		if _, err := webhook.ParseFormat(*o.format, ""); err != nil {
			return fmt.Errorf("-event-format (COUPONLINK_EVENT_FORMAT): %w", err)
		}
		return nil
	})
	return o
}

// on says whether any stream sink is configured.
func (o *eventSettings) on() bool { return o.sinks() != "" }

// relays opens the configured sinks and returns a relay for each (none
// without -event-sinks). prune: no webhook dispatcher prunes the outbox,
// the relays do. They deliver while epoch (the cdc's leader epoch) is not
// 0, like the dispatcher. A rediss:// sink without TLS files of its own
// uses redisTLS (the -redis-tls* settings; nil: the system's CAs).
func (o *eventSettings) relays(db *sql.DB, m *webhook.SinkMetrics, prune bool, checkpoint string, format webhook.Format, epoch func() int64, redisTLS *tlsconf.Config, log *slog.Logger) ([]*webhook.Relay, error) {
	sinks, err := streams.Open(o.sinks(), redisTLS, format)
	if err != nil {
		return nil, err
	}
	out := make([]*webhook.Relay, 0, len(sinks))
	for i, s := range sinks {
		r, err := webhook.NewRelay(webhook.RelayConfig{DB: db, Sink: s, MaxAttempts: *o.maxAttempts, MaxPending: *o.maxPending,
			PruneOutbox: prune, Metrics: m, Logger: log, Epoch: epoch, Checkpoint: checkpoint, PollEvery: eventPoll})
		if err != nil {
			for _, s := range sinks[i:] {
				_ = s.Close()
			}
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// sinkMetrics registers the per-sink delivery metrics when the webhook or
// a stream sink is on (nil otherwise).
func sinkMetrics(reg prometheus.Registerer, on bool) (*webhook.SinkMetrics, error) {
	if !on {
		return nil, nil
	}
	return webhook.NewSinkMetrics(reg)
}
