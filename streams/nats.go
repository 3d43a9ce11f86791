package streams

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/couponlink/couponlink/webhook"
)

// HeaderEvent carries the event type on a JetStream message; Nats-Msg-Id
// (nats.MsgIdHdr) carries the event id.
const HeaderEvent = "Couponlink-Event"

// NATSConfig configures a JetStream sink.
type NATSConfig struct {
	Name    string // the sink's name
	URL     string // nats://host:port (several, comma-separated, for a cluster)
	Subject string // prefix: an event goes to <Subject>.<type>, e.g. couponlink.events.quota.transferred
	Stream  string // the JetStream stream that takes <Subject>.>
	// Create makes the stream (file storage, the duplicate window below)
	// when it does not exist.
	Create     bool
	Duplicates time.Duration // the created stream's duplicate window; default 2m
	MaxMsgs    int64         // the created stream's bound (oldest removed); 0: none
	// Format: in CloudEvents format a message's data is the structured
	// envelope, with Content-Type application/cloudevents+json.
	Format webhook.Format
}

// NATSStream publishes events to JetStream: PublishMsg with the event id
// as Nats-Msg-Id and an ack, so that the stream's duplicate window drops
// an event sent again (a cdc killed between the publish and saving its
// position) by itself.
type NATSStream struct {
	cfg   NATSConfig
	nc    *nats.Conn
	js    jetstream.JetStream
	ready bool // the stream was found or made
}

// NewNATSStream connects to cfg.URL. The connection retries by itself,
// at start too: a NATS server that is down does not keep the cdc from
// starting, its events wait in the outbox.
func NewNATSStream(cfg NATSConfig) (*NATSStream, error) {
	if cfg.Duplicates <= 0 {
		cfg.Duplicates = 2 * time.Minute
	}
	nc, err := nats.Connect(cfg.URL, nats.Name("couponlink-cdc"), nats.MaxReconnects(-1), nats.ReconnectWait(250*time.Millisecond),
		nats.RetryOnFailedConnect(true), nats.ReconnectBufSize(-1), nats.Timeout(2*time.Second))
	if err != nil {
		return nil, fmt.Errorf("connect to NATS for sink %s: %w", cfg.Name, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("JetStream for sink %s: %w", cfg.Name, err)
	}
	return &NATSStream{cfg: cfg, nc: nc, js: js}, nil
}

// Name is the sink's name.
func (s *NATSStream) Name() string { return s.cfg.Name }

// Send publishes msgs one by one, each acknowledged by the stream, and
// returns how many, from the first, were. A message too large for the
// stream is refused (webhook.Refused); anything else is an outage.
func (s *NATSStream) Send(ctx context.Context, msgs []webhook.Message) (int, error) {
	if err := s.ensure(ctx); err != nil {
		return 0, err
	}
	for i, m := range msgs {
		msg := nats.NewMsg(s.cfg.Subject + "." + m.Type)
		msg.Data = m.Body
		msg.Header.Set(HeaderEvent, m.Type)
		if s.cfg.Format.CloudEvents {
			env, _, err := webhook.CloudEvent(m, s.cfg.Format.Source)
			if err != nil {
				return i, webhook.Refused(err)
			}
			msg.Data = env
			msg.Header.Set("Content-Type", webhook.CloudEventsContentType)
		}
		_, err := s.js.PublishMsg(ctx, msg, jetstream.WithMsgID(m.ID), jetstream.WithExpectStream(s.cfg.Stream))
		if err != nil {
			if errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, jetstream.ErrStreamNotFound) {
				s.ready = false // gone (deleted, or lost by the server): look for it, or make it, again
			}
			err = fmt.Errorf("publish event %s to %s: %w", m.ID, msg.Subject, err)
			if errors.Is(err, nats.ErrMaxPayload) || errors.Is(err, jetstream.ErrStreamMessageExceedsMaximum) {
				err = webhook.Refused(err)
			}
			return i, err
		}
	}
	return len(msgs), nil
}

// ensure finds the stream, or makes it (Create), once.
func (s *NATSStream) ensure(ctx context.Context) error {
	if s.ready {
		return nil
	}
	_, err := s.js.Stream(ctx, s.cfg.Stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) && s.cfg.Create {
		limit := int64(-1)
		if s.cfg.MaxMsgs > 0 {
			limit = s.cfg.MaxMsgs
		}
		_, err = s.js.CreateStream(ctx, jetstream.StreamConfig{Name: s.cfg.Stream, Subjects: []string{s.cfg.Subject + ".>"},
			Storage: jetstream.FileStorage, Duplicates: s.cfg.Duplicates, MaxMsgs: limit})
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			err = nil // made meanwhile by another cdc
		}
	}
	if err != nil {
		return fmt.Errorf("JetStream stream %s: %w", s.cfg.Stream, err)
	}
	s.ready = true
	return nil
}

// Close closes the connection.
func (s *NATSStream) Close() error {
	s.nc.Close()
	return nil
}
