package streams

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/couponlink/couponlink/internal/redact"
	"github.com/couponlink/couponlink/internal/tlsconf"
	"github.com/couponlink/couponlink/webhook"
)

// AMQPCloudEventsPrefix prefixes the CloudEvents attributes among a
// message's headers (the AMQP binding's application properties; the
// binding prefers cloudEvents_ to the older cloudEvents:).
const AMQPCloudEventsPrefix = "cloudEvents_"

// DefaultExchange is a RabbitMQ sink's exchange when its URL names none.
const DefaultExchange = "couponlink.events"

// RabbitMQConfig configures a RabbitMQ sink.
type RabbitMQConfig struct {
	Name     string // the sink's name
	URL      string // amqp://user:pass@host:port/vhost or amqps://..., without query parameters
	Exchange string // the topic exchange the events are published to, routing key = the event type
	// Declare declares Exchange (durable, topic) on every connect; false
	// for a user without the configure permission, the exchange made by
	// an administrator.
	Declare bool
	TLS     *tls.Config   // for amqps://; nil: the system's CAs
	Confirm time.Duration // how long Send waits for a confirm before it calls the connection lost; default 30s
	// Format: in CloudEvents format (binary mode, AMQP binding) a message
	// also carries the attributes as cloudEvents_* headers.
	Format webhook.Format
}

// RabbitMQ publishes events to a RabbitMQ topic exchange on a channel in
// confirm mode: every message is persistent (delivery mode 2), routed by
// its event type, carries the event id as its message id, and counts as
// taken only once the broker acked it (for a durable queue: written to
// it). A message published again (a cdc killed between the confirm and
// saving its position) is a second message with the same message id:
// consumers dedupe on it.
//
// The connection is made on the first Send, and again on the Send after
// it or its channel was lost: a broker that is down does not keep the cdc
// from starting, its events wait in the outbox.
type RabbitMQ struct {
	cfg RabbitMQConfig

	mu       sync.Mutex
	conn     *amqp.Connection
	ch       *amqp.Channel
	closed   chan *amqp.Error // the channel's close reason
	oneByOne bool             // a message was too large: confirm each before the next
}

// NewRabbitMQ returns a sink publishing to cfg.Exchange; it connects on
// the first Send.
func NewRabbitMQ(cfg RabbitMQConfig) *RabbitMQ {
	if cfg.Exchange == "" {
		cfg.Exchange = DefaultExchange
	}
	if cfg.Confirm <= 0 {
		cfg.Confirm = 30 * time.Second
	}
	return &RabbitMQ{cfg: cfg}
}

// Name is the sink's name.
func (s *RabbitMQ) Name() string { return s.cfg.Name }

// Send publishes msgs in order and waits for their confirms; it returns
// how many, from the first, the broker acked. A nack, a lost channel or
// connection, or a confirm that does not come stops there with an error
// (an outage: the Relay sends the rest again). A message larger than the
// broker's max_message_size is refused (webhook.Refused): the broker
// closes the channel at once, the confirms of the messages before it
// lost with it, so after such a close the sink publishes one message at
// a time, each confirmed before the next, until a Send takes all its
// messages: the one refused is then known.
func (s *RabbitMQ) Send(ctx context.Context, msgs []webhook.Message) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.connect(); err != nil {
		return 0, err
	}
	for done := 0; done < len(msgs); {
		window := len(msgs) - done
		if s.oneByOne {
			window = 1
		}
		n, err := s.publish(ctx, msgs[done:done+window])
		done += n
		if err != nil {
			return done, err
		}
	}
	s.oneByOne = false
	return len(msgs), nil
}

// publish publishes msgs and waits for their confirms: how many, from the
// first, were acked.
func (s *RabbitMQ) publish(ctx context.Context, msgs []webhook.Message) (int, error) {
	confirms := make([]*amqp.DeferredConfirmation, 0, len(msgs))
	var pubErr error
	for _, m := range msgs {
		var headers amqp.Table
		if s.cfg.Format.CloudEvents {
			_, attrs, err := webhook.CloudEvent(m, s.cfg.Format.Source)
			if err != nil {
				pubErr = webhook.Refused(err)
				break
			}
			headers = amqp.Table{}
			for _, k := range ceAttributes {
				if v, ok := attrs[k]; ok {
					headers[AMQPCloudEventsPrefix+k] = v
				}
			}
		}
		dc, err := s.ch.PublishWithDeferredConfirmWithContext(ctx, s.cfg.Exchange, m.Type, false, false, amqp.Publishing{
			ContentType: "application/json", DeliveryMode: amqp.Persistent, MessageId: m.ID, Type: m.Type,
			Timestamp: eventTime(m.Body), AppId: "couponlink", Body: m.Body, Headers: headers,
		})
		if err != nil {
			pubErr = fmt.Errorf("publish event %s to exchange %s: %w", m.ID, s.cfg.Exchange, err)
			break
		}
		confirms = append(confirms, dc)
	}
	wait, cancel := context.WithTimeout(ctx, s.cfg.Confirm)
	defer cancel()
	for i, dc := range confirms {
		ack, err := dc.WaitContext(wait)
		switch {
		case err != nil && ctx.Err() != nil:
			s.drop()
			return i, fmt.Errorf("confirm of event %s: %w", msgs[i].ID, ctx.Err())
		case err != nil:
			s.drop()
			return i, fmt.Errorf("confirm of event %s: none after %s, the connection is given up", msgs[i].ID, s.cfg.Confirm)
		case !ack && s.ch.IsClosed():
			return i, s.lost(msgs[i].ID, len(msgs) == 1)
		case !ack:
			return i, fmt.Errorf("event %s nacked by the broker (exchange %s)", msgs[i].ID, s.cfg.Exchange)
		}
	}
	if pubErr != nil {
		if webhook.IsRefused(pubErr) { // not sent: the channel is fine
			return len(confirms), pubErr
		}
		if s.ch.IsClosed() {
			return len(confirms), s.lost(msgs[len(confirms)].ID, len(msgs) == 1)
		}
		s.drop()
		return len(confirms), pubErr
	}
	return len(msgs), nil
}

// lost is the error of a channel closed before event id's confirm, with
// the broker's reason when it gave one, the connection dropped so that
// the next Send makes a new one. A message over max_message_size is the
// event's own fault when it was the only one in flight (alone); else
// the sink goes one by one (oneByOne) to find which.
func (s *RabbitMQ) lost(id string, alone bool) error {
	var reason *amqp.Error
	select {
	case reason = <-s.closed:
	case <-time.After(100 * time.Millisecond):
	}
	s.drop()
	if reason == nil {
		return fmt.Errorf("event %s: the channel to RabbitMQ closed before its confirm", id)
	}
	err := fmt.Errorf("event %s: the channel to RabbitMQ closed before its confirm: %w", id, reason)
	if reason.Code == amqp.PreconditionFailed && strings.Contains(reason.Reason, "size") {
		if alone {
			return webhook.Refused(err)
		}
		s.oneByOne = true
		return fmt.Errorf("%w (a message of the batch is too large: sent again one by one)", err)
	}
	return err
}

// connect makes the connection and the confirm-mode channel when there is
// none or they were lost, and declares the exchange (Declare).
func (s *RabbitMQ) connect() error {
	if s.ch != nil && !s.ch.IsClosed() && !s.conn.IsClosed() {
		return nil
	}
	s.drop()
	conn, err := amqp.DialConfig(s.cfg.URL, amqp.Config{
		Heartbeat: 10 * time.Second, TLSClientConfig: s.cfg.TLS, Properties: amqp.Table{"connection_name": "couponlink-cdc " + s.cfg.Name},
		Dial: amqp.DefaultDial(3 * time.Second), // the dial and the TLS and AMQP handshakes
	})
	if err != nil {
		return fmt.Errorf("connect to RabbitMQ for sink %s: %w", s.cfg.Name, err)
	}
	ch, err := conn.Channel()
	if err == nil {
		err = ch.Confirm(false)
	}
	if err == nil && s.cfg.Declare {
		err = ch.ExchangeDeclare(s.cfg.Exchange, amqp.ExchangeTopic, true, false, false, false, nil)
		if err != nil {
			err = fmt.Errorf("declare exchange %s (declare=false if it is made by an administrator): %w", s.cfg.Exchange, err)
		}
	}
	if err != nil {
		_ = conn.Close()
		return fmt.Errorf("RabbitMQ channel for sink %s: %w", s.cfg.Name, err)
	}
	s.conn, s.ch = conn, ch
	s.closed = ch.NotifyClose(make(chan *amqp.Error, 1))
	return nil
}

// drop closes the connection, if any: the next Send makes a new one.
func (s *RabbitMQ) drop() {
	if s.conn != nil {
		_ = s.conn.CloseDeadline(time.Now().Add(time.Second))
	}
	s.conn, s.ch, s.closed = nil, nil, nil
}

// Close closes the connection.
func (s *RabbitMQ) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.drop()
	return nil
}

// eventTime is a stored body's time (when the change happened), else now.
func eventTime(body []byte) time.Time {
	var b struct {
		Time time.Time `json:"time"`
	}
	if json.Unmarshal(body, &b) != nil || b.Time.IsZero() {
		return time.Now().UTC()
	}
	return b.Time
}

var _ webhook.Sink = (*RabbitMQ)(nil)

// openRabbitMQ is Open's amqp:// and amqps:// case; param takes a query
// parameter out of u's query (its default when absent).
func openRabbitMQ(u *url.URL, param func(k, def string) string, f webhook.Format) (webhook.Sink, error) {
	cfg := RabbitMQConfig{Name: param("name", "rabbitmq"), Exchange: param("exchange", DefaultExchange), Format: f}
	where := func(what string, args ...any) error {
		return fmt.Errorf("event sink %s (%s): "+what, append([]any{cfg.Name, redact.String(u.String())}, args...)...)
	}
	var err error
	if cfg.Declare, err = strconv.ParseBool(param("declare", "true")); err != nil {
		return nil, where("declare is not true or false")
	}
	own := tlsconf.Settings{CA: param("tls_ca", ""), Cert: param("tls_cert", ""), Key: param("tls_key", "")}
	skip, err := strconv.ParseBool(param("skip_verify", "false"))
	if err != nil {
		return nil, where("skip_verify is not true or false")
	}
	if q := u.Query(); len(q) > 0 {
		known := []string{"name", "exchange", "declare", "tls_ca", "tls_cert", "tls_key", "skip_verify"}
		for _, k := range known {
			q.Del(k)
		}
		if len(q) > 0 {
			return nil, where("unknown parameters %v", keys(q))
		}
	}
	tc, err := sinkTLS(u.Scheme, own, skip, nil)
	if err != nil {
		return nil, where("%w", err)
	}
	if tc != nil {
		cfg.TLS = tc.For(u.Hostname())
	}
	plain := *u
	plain.RawQuery = ""
	if _, err := amqp.ParseURI(plain.String()); err != nil {
		return nil, where("%s", redactErr(err, u))
	}
	cfg.URL = plain.String()
	return withoutSecret(NewRabbitMQ(cfg), u), nil
}
