// Package streams holds the event sinks beside webhooks: a Redis stream
// and a NATS JetStream subject, each fed from the webhook outbox by a
// webhook.Relay with its own position. Open parses the cdc's
// -event-sinks list.
package streams

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/couponlink/couponlink/internal/redact"
	"github.com/couponlink/couponlink/internal/tlsconf"
	"github.com/couponlink/couponlink/webhook"
)

// Defaults of a sink URL's parameters.
const (
	DefaultRedisStream = "couponlink:events"
	DefaultMaxLen      = 1_000_000
	DefaultSubject     = "couponlink.events"
	DefaultNATSStream  = "COUPONLINK_EVENTS"
)

// Open builds the sinks of spec, a comma-separated list of URLs:
//
//	redis://[user:password@]host:port[/db]?stream=couponlink:events&maxlen=1000000&name=redis
//	rediss://[user:password@]host:port[/db]?tls_ca=ca.pem&tls_cert=client.pem&tls_key=client-key.pem&skip_verify=false&...
//	nats://host:port?subject=couponlink.events&stream=COUPONLINK_EVENTS&create=true&duplicates=2m&max_msgs=0&name=nats
//	kafka://[user:password@]host:port[,host:port]?topic=couponlink.events&topic_per_type=false&sasl=plain&delivery_timeout=4s&name=kafka
//	amqp://user:password@host:port/vhost?exchange=couponlink.events&declare=true&name=rabbitmq
//	amqps://user:password@host:port/vhost?tls_ca=ca.pem&tls_cert=client.pem&tls_key=client-key.pem&skip_verify=false&...
//
// (rediss://, tls://, kafkas:// and amqps:// for TLS; a kafkas:// or
// amqps:// sink takes tls_ca, tls_cert, tls_key and skip_verify like
// rediss://, never the -redis-tls* settings; sasl is plain,
// scram-sha-256 or scram-sha-512). Every parameter is optional; name
// defaults to the scheme's family (redis, nats, kafka, rabbitmq) and
// must be unique: it keys the sink's position and labels its metrics. A
// rediss:// sink checks the server with its own tls_ca, tls_cert and
// tls_key (PEM files) when it has any, else with redisTLS (the
// -redis-tls* settings) when not nil, else with the system's CAs; a
// kafkas:// or amqps:// sink with its own files, else the system's CAs.
// Empty spec: no sinks. On an
// error it closes what it opened; the error never shows a password.
// format (at most one; none: native) is what the sinks send: in
// CloudEvents format the Redis and NATS sinks send the structured
// envelope, the Kafka and RabbitMQ sinks the stored body with the
// attributes in headers (binary mode).
func Open(spec string, redisTLS *tlsconf.Config, format ...webhook.Format) ([]webhook.Sink, error) {
	var f webhook.Format
	if len(format) > 0 {
		f = format[0]
	}
	var out []webhook.Sink
	seen := map[string]bool{}
	fail := func(err error) ([]webhook.Sink, error) {
		for _, s := range out {
			_ = s.Close()
		}
		return nil, err
	}
	for _, raw := range sinkURLs(spec) {
		s, err := open(raw, redisTLS, f)
		if err != nil {
			return fail(err)
		}
		if seen[s.Name()] {
			_ = s.Close()
			return fail(fmt.Errorf("event sink name %q used twice: give each its own with ?name=", s.Name()))
		}
		seen[s.Name()] = true
		out = append(out, s)
	}
	return out, nil
}

func open(raw string, redisTLS *tlsconf.Config, f webhook.Format) (webhook.Sink, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errors.New("event sink: an unparsable URL")
	}
	q := u.Query()
	param := func(k, def string) string {
		v := q.Get(k)
		q.Del(k)
		if v == "" {
			return def
		}
		return v
	}
	switch u.Scheme {
	case "redis", "rediss":
		name, stream := param("name", "redis"), param("stream", DefaultRedisStream)
		maxLen, err := strconv.ParseInt(param("maxlen", strconv.Itoa(DefaultMaxLen)), 10, 64)
		if err != nil || maxLen < 0 {
			return nil, fmt.Errorf("event sink %s (%s): maxlen is not a count", name, redact.String(u.String()))
		}
		own := tlsconf.Settings{CA: param("tls_ca", ""), Cert: param("tls_cert", ""), Key: param("tls_key", "")}
		skip, err := strconv.ParseBool(param("skip_verify", "false"))
		if err != nil {
			return nil, fmt.Errorf("event sink %s (%s): skip_verify is not true or false", name, redact.String(u.String()))
		}
		tc, err := sinkTLS(u.Scheme, own, skip, redisTLS)
		if err != nil {
			return nil, fmt.Errorf("event sink %s (%s): %w", name, redact.String(u.String()), err)
		}
		u.RawQuery = q.Encode()
		opt, err := redis.ParseURL(u.String())
		if err != nil {
			return nil, fmt.Errorf("event sink %s (%s): %v", name, redact.String(u.String()), redactErr(err, u))
		}
		opt.TLSConfig = tc.For(u.Hostname())
		opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout = time.Second, 2*time.Second, 2*time.Second
		rs := NewRedisStream(name, redis.NewClient(opt), stream, maxLen)
		rs.format = f
		return withoutSecret(rs, u), nil
	case "nats", "tls":
		cfg := NATSConfig{Name: param("name", "nats"), Subject: param("subject", DefaultSubject), Stream: param("stream", DefaultNATSStream), Format: f}
		var err error
		if cfg.Create, err = strconv.ParseBool(param("create", "true")); err != nil {
			return nil, fmt.Errorf("event sink %s (%s): create is not true or false", cfg.Name, redact.String(u.String()))
		}
		if cfg.Duplicates, err = time.ParseDuration(param("duplicates", "2m")); err != nil || cfg.Duplicates <= 0 {
			return nil, fmt.Errorf("event sink %s (%s): duplicates is not a positive duration", cfg.Name, redact.String(u.String()))
		}
		if cfg.MaxMsgs, err = strconv.ParseInt(param("max_msgs", "0"), 10, 64); err != nil || cfg.MaxMsgs < 0 {
			return nil, fmt.Errorf("event sink %s (%s): max_msgs is not a count", cfg.Name, redact.String(u.String()))
		}
		if len(q) > 0 {
			return nil, fmt.Errorf("event sink %s (%s): unknown parameters %v", cfg.Name, redact.String(u.String()), keys(q))
		}
		u.RawQuery = ""
		cfg.URL = u.String()
		s, err := NewNATSStream(cfg)
		if err != nil {
			return nil, errors.New(redactErr(err, u))
		}
		return withoutSecret(s, u), nil
	case "kafka", "kafkas":
		return openKafka(u, param, q, f)
	case "amqp", "amqps":
		return openRabbitMQ(u, param, f)
	default:
		return nil, fmt.Errorf("event sink %s: the scheme is not redis, rediss, nats, tls, kafka, kafkas, amqp or amqps", redact.String(u.String()))
	}
}

// sinkTLS is the TLS of a Redis, Kafka or RabbitMQ sink: none for
// redis://, kafka:// and amqp:// (where own files or skip_verify are an
// error); for rediss://, kafkas:// and amqps:// (global nil for the last
// two), own's files
// (verify mode, or skip-verify with skip) when it names any or skip is
// set, else global (the -redis-tls* settings) when not nil, else the
// system's CAs.
func sinkTLS(scheme string, own tlsconf.Settings, skip bool, global *tlsconf.Config) (*tlsconf.Config, error) {
	mine := own.CA != "" || own.Cert != "" || own.Key != "" || skip
	if scheme != "rediss" && scheme != "kafkas" && scheme != "amqps" {
		if mine {
			if scheme == "amqp" {
				return nil, errors.New("tls_ca, tls_cert, tls_key and skip_verify are for an amqps:// URL")
			}
			return nil, errors.New("tls_ca, tls_cert, tls_key and skip_verify are for a rediss:// or kafkas:// URL")
		}
		return nil, nil
	}
	if !mine && global != nil {
		return global, nil
	}
	own.Mode = tlsconf.Verify
	if skip {
		own.Mode = tlsconf.SkipVerify
	}
	c, err := own.Load()
	if err != nil {
		return nil, fmt.Errorf("TLS (tls_ca, tls_cert, tls_key): %w", err)
	}
	return c, nil
}

// redactErr hides the URL's password in an error of the parser.
func redactErr(err error, u *url.URL) string {
	msg := err.Error()
	if p, ok := u.User.Password(); ok && p != "" {
		msg = strings.ReplaceAll(msg, p, "xxxxx")
	}
	return msg
}

// sinkURLs splits spec at its commas; a piece without "://" goes on
// the URL before it (a kafka:// URL's host:port,host:port).
func sinkURLs(spec string) []string {
	var out []string
	for raw := range strings.SplitSeq(spec, ",") {
		raw = strings.TrimSpace(raw)
		switch {
		case raw == "":
		case !strings.Contains(raw, "://") && len(out) > 0:
			out[len(out)-1] += "," + raw
		default:
			out = append(out, raw)
		}
	}
	return out
}

func keys(q url.Values) []string {
	out := make([]string, 0, len(q))
	for k := range q {
		out = append(out, k)
	}
	return out
}
