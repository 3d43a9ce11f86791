package streams

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/couponlink/couponlink/internal/redact"
	"github.com/couponlink/couponlink/internal/tlsconf"
	"github.com/couponlink/couponlink/webhook"
)

// Kafka record headers: consumers dedupe on KafkaHeaderID.
const (
	KafkaHeaderID   = "id"   // the event id, the body's id
	KafkaHeaderType = "type" // the event type, the body's type
)

// Defaults of a Kafka sink.
const (
	DefaultKafkaTopic = "couponlink.events"
	// below a relay's send timeout (half its lease: 5 s by default), so
	// that a Send does not outlast its round
	DefaultKafkaDeliveryTimeout = 4 * time.Second
)

// KafkaConfig configures a Kafka sink.
type KafkaConfig struct {
	Name    string   // the sink's name
	Brokers []string // host:port of some brokers (the rest are found from them)
	// Topic takes every event; with TopicPerType it is the prefix of
	// <Topic>.<type> instead, e.g. couponlink.events.channel.low. The
	// topics must exist (or the brokers create them by themselves).
	Topic        string
	TopicPerType bool
	TLS          *tlsconf.Config // nil: plaintext
	// SASL is "", "plain", "scram-sha-256" or "scram-sha-512", with User
	// and Password.
	SASL, User, Password string
	// DeliveryTimeout bounds how long a record is retried (the producer
	// retries a broker's retriable errors by itself) before Send gives up
	// on it; default DefaultKafkaDeliveryTimeout.
	DeliveryTimeout time.Duration
	// Format: in CloudEvents format (binary mode) a record also carries
	// the attributes as ce_* headers and content-type: application/json.
	Format webhook.Format
}

// KafkaSink produces events to Kafka with an idempotent producer and
// acks=all: one record per event, the body as its value, the template id
// as its key (the event type for an event without one), so that one
// campaign's events land in one partition, in order; headers id and
// type. An event sent again (a cdc killed between the produce and saving
// its position, or a later record of a batch whose earlier one failed) is
// a second record with the same id header: consumers dedupe on it.
type KafkaSink struct {
	cfg KafkaConfig
	cl  *kgo.Client
}

// NewKafkaSink makes the client; it connects on first use, so a cluster
// that is down does not keep the cdc from starting.
func NewKafkaSink(cfg KafkaConfig) (*KafkaSink, error) {
	if cfg.Topic == "" {
		cfg.Topic = DefaultKafkaTopic
	}
	if cfg.DeliveryTimeout <= 0 {
		cfg.DeliveryTimeout = DefaultKafkaDeliveryTimeout
	}
	if len(cfg.Brokers) == 0 {
		return nil, fmt.Errorf("kafka sink %s: no broker", cfg.Name)
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ClientID("couponlink-cdc"),
		// kgo's defaults, said out loud: an idempotent producer (no
		// DisableIdempotentWrite) needs acks from all in-sync replicas
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordDeliveryTimeout(cfg.DeliveryTimeout),
		// one produce request in flight per broker, and nothing sent
		// before Send has buffered its records (manual flushing): each
		// partition's records of one Send go in one batch, which the
		// broker takes or fails whole, so that no later record of a
		// partition is written before an earlier one that failed (with
		// kgo's linger 0 the first records went alone and a later batch
		// could be written ahead of a failed one); sent again, a key's
		// events stay in order
		kgo.MaxProduceRequestsInflightPerBroker(1),
		kgo.ManualFlushing(),
		// a moved partition leader (NOT_LEADER_FOR_PARTITION) is looked
		// up again within a second, not kgo's 5 s: well inside the
		// delivery timeout
		kgo.MetadataMinAge(time.Second),
	}
	if cfg.TLS != nil {
		opts = append(opts, kgo.Dialer(tlsDialer(cfg.TLS)))
	}
	if cfg.SASL != "" {
		m, err := saslMechanism(cfg.SASL, cfg.User, cfg.Password)
		if err != nil {
			return nil, fmt.Errorf("kafka sink %s: %w", cfg.Name, err)
		}
		opts = append(opts, kgo.SASL(m))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka sink %s: %w", cfg.Name, err)
	}
	return &KafkaSink{cfg: cfg, cl: cl}, nil
}

func saslMechanism(name, user, pass string) (sasl.Mechanism, error) {
	if user == "" {
		return nil, fmt.Errorf("sasl=%s needs a user (user:password@ in the URL)", name)
	}
	switch strings.ToLower(name) {
	case "plain":
		return plain.Auth{User: user, Pass: pass}.AsMechanism(), nil
	case "scram-sha-256":
		return scram.Auth{User: user, Pass: pass}.AsSha256Mechanism(), nil
	case "scram-sha-512":
		return scram.Auth{User: user, Pass: pass}.AsSha512Mechanism(), nil
	}
	return nil, fmt.Errorf("sasl %q is not plain, scram-sha-256 or scram-sha-512", name)
}

// tlsDialer dials each broker with tc for its own host name (tc checks
// the certificate against the host dialled).
func tlsDialer(tc *tlsconf.Config) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		d := net.Dialer{Timeout: 5 * time.Second}
		raw, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		conn := tls.Client(raw, tc.For(host))
		if err := conn.HandshakeContext(ctx); err != nil {
			_ = raw.Close()
			return nil, err
		}
		return conn, nil
	}
}

// Name is the sink's name.
func (s *KafkaSink) Name() string { return s.cfg.Name }

// record is m as a Kafka record.
func (s *KafkaSink) record(m webhook.Message) (*kgo.Record, error) {
	topic := s.cfg.Topic
	if s.cfg.TopicPerType {
		topic += "." + m.Type
	}
	r := &kgo.Record{Topic: topic, Key: []byte(RecordKey(m)), Value: m.Body,
		Headers: []kgo.RecordHeader{{Key: KafkaHeaderID, Value: []byte(m.ID)}, {Key: KafkaHeaderType, Value: []byte(m.Type)}}}
	if s.cfg.Format.CloudEvents {
		_, attrs, err := webhook.CloudEvent(m, s.cfg.Format.Source)
		if err != nil {
			return nil, webhook.Refused(err)
		}
		for _, k := range ceAttributes {
			if v, ok := attrs[k]; ok {
				r.Headers = append(r.Headers, kgo.RecordHeader{Key: "ce_" + k, Value: []byte(v)})
			}
		}
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: "content-type", Value: []byte(attrs["datacontenttype"])})
	}
	return r, nil
}

// ceAttributes are the CloudEvents attributes a binary-mode message
// carries as headers, in this order (datacontenttype goes in the
// protocol's own content type).
var ceAttributes = []string{"specversion", "id", "source", "type", "time"}

// RecordKey is the key of m's record: the body's template id, else the
// event type.
func RecordKey(m webhook.Message) string {
	var b struct {
		Template json.Number `json:"template"`
	}
	if json.Unmarshal(m.Body, &b) == nil && b.Template != "" && b.Template != "0" {
		return b.Template.String()
	}
	return m.Type
}

// Send produces msgs and waits for the brokers' acks; it returns how
// many, from the first, were acknowledged, with the first failure's
// error. A record larger than the topic takes is refused
// (webhook.Refused); anything else is an outage. Records after a failed
// one may have been written too: sent again, they are duplicates that
// consumers drop on the id header.
func (s *KafkaSink) Send(ctx context.Context, msgs []webhook.Message) (int, error) {
	done := 0
	for done < len(msgs) {
		rest := msgs[done:]
		recs := make([]*kgo.Record, 0, len(rest))
		var refused error // a body CloudEvents cannot take: after those before it
		size := 0
		for _, m := range rest {
			r, err := s.record(m)
			if err != nil {
				refused = err
				break
			}
			if size += len(r.Key) + len(r.Value) + 64; len(recs) > 0 && size > kafkaCallBytes {
				break // the rest in the next round: one batch a partition
			}
			recs = append(recs, r)
		}
		if len(recs) == 0 {
			return done, refused
		}
		errs := s.produce(ctx, recs...)
		i := 0
		for i < len(recs) && errs[recs[i]] == nil {
			i++
		}
		done += i
		if i == len(recs) {
			if refused != nil || done == len(msgs) {
				return done, refused
			}
			continue // cut by kafkaCallBytes
		}
		err := errs[recs[i]]
		if tooLarge(err) && len(recs) > 1 {
			// the batch holding it may be what was too large: the record
			// alone says whether it is
			fresh, _ := s.record(msgs[done]) // made once already: no error
			err = s.produce(ctx, fresh)[fresh]
			if err == nil {
				done++
				continue
			}
		}
		m := msgs[done]
		err = fmt.Errorf("produce event %s to kafka topic %s: %w", m.ID, recs[i].Topic, err)
		if tooLarge(err) {
			err = webhook.Refused(err)
		}
		return done, err
	}
	return done, nil
}

// kafkaCallBytes bounds the records one produce call carries, well under
// kgo's batch size (1 MB): all of a partition's records of a call fit in
// one batch.
const kafkaCallBytes = 512 << 10

// produce buffers recs, flushes them and waits for each one's result.
func (s *KafkaSink) produce(ctx context.Context, recs ...*kgo.Record) map[*kgo.Record]error {
	errs := make(map[*kgo.Record]error, len(recs))
	var mu sync.Mutex
	var wg sync.WaitGroup
	wg.Add(len(recs))
	for _, r := range recs {
		s.cl.Produce(ctx, r, func(r *kgo.Record, err error) {
			mu.Lock()
			errs[r] = err
			mu.Unlock()
			wg.Done()
		})
	}
	_ = s.cl.Flush(ctx) // each record's own error says how it ended
	wg.Wait()
	return errs
}

func tooLarge(err error) bool {
	return errors.Is(err, kerr.MessageTooLarge) || errors.Is(err, kerr.RecordListTooLarge)
}

// Close flushes nothing (Send waits for its acks) and closes the client.
func (s *KafkaSink) Close() error {
	s.cl.Close()
	return nil
}

// kafkaBrokers splits a URL's host list (host:port,host:port), with 9092
// for a host without a port.
func kafkaBrokers(hosts string) []string {
	var out []string
	for h := range strings.SplitSeq(hosts, ",") {
		h = strings.TrimSpace(h)
		if h == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(h); err != nil {
			h = net.JoinHostPort(h, strconv.Itoa(9092))
		}
		out = append(out, h)
	}
	return out
}

// openKafka is Open's kafka:// and kafkas:// case; param takes a query
// parameter out of q, which must be empty after.
func openKafka(u *url.URL, param func(k, def string) string, q url.Values, f webhook.Format) (webhook.Sink, error) {
	cfg := KafkaConfig{Name: param("name", "kafka"), Brokers: kafkaBrokers(u.Host), Topic: param("topic", DefaultKafkaTopic),
		SASL: param("sasl", ""), Format: f}
	where := func(what string) error {
		return fmt.Errorf("event sink %s (%s): %s", cfg.Name, redact.String(u.String()), what)
	}
	var err error
	if cfg.TopicPerType, err = strconv.ParseBool(param("topic_per_type", "false")); err != nil {
		return nil, where("topic_per_type is not true or false")
	}
	if cfg.DeliveryTimeout, err = time.ParseDuration(param("delivery_timeout", DefaultKafkaDeliveryTimeout.String())); err != nil || cfg.DeliveryTimeout <= 0 {
		return nil, where("delivery_timeout is not a positive duration")
	}
	own := tlsconf.Settings{CA: param("tls_ca", ""), Cert: param("tls_cert", ""), Key: param("tls_key", "")}
	skip, err := strconv.ParseBool(param("skip_verify", "false"))
	if err != nil {
		return nil, where("skip_verify is not true or false")
	}
	if len(q) > 0 {
		return nil, where(fmt.Sprintf("unknown parameters %v", keys(q)))
	}
	if len(cfg.Brokers) == 0 {
		return nil, where("no broker host:port")
	}
	if cfg.TLS, err = sinkTLS(u.Scheme, own, skip, nil); err != nil {
		return nil, where(err.Error())
	}
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Password, _ = u.User.Password()
		if cfg.SASL == "" {
			return nil, where("a user in the URL needs sasl=plain, scram-sha-256 or scram-sha-512")
		}
	}
	s, err := NewKafkaSink(cfg)
	if err != nil {
		return nil, where(redactErr(err, u))
	}
	return withoutSecret(s, u), nil
}
