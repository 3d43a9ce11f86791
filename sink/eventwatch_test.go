package sink_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/streams"
	"github.com/couponlink/couponlink/webhook"
)

// arrivals records when each sink (webhook, redis, nats, rabbitmq, kafka) first
// got each event (by id), as consumers of the sinks see them: a webhook
// receiver, a Redis stream reader, a NATS subscriber of the stream's
// subjects, a RabbitMQ queue's consumer, a Kafka topic's consumer.
type arrivals struct {
	mu    sync.Mutex
	first map[string]map[string]time.Time // sink -> event id -> first arrival
	hook  map[string]string               // the webhook bodies by event id
}

func newArrivals() *arrivals {
	return &arrivals{first: map[string]map[string]time.Time{"webhook": {}, "redis": {}, "nats": {}, "rabbitmq": {}, "kafka": {}}, hook: map[string]string{}}
}

func (a *arrivals) saw(sink, id string, body []byte) {
	now := time.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.first[sink][id]; !ok {
		a.first[sink][id] = now
	}
	if sink == "webhook" {
		a.hook[id] = string(body)
	}
}

// at is when sink first got event id (ok false: not yet).
func (a *arrivals) at(sink, id string) (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	at, ok := a.first[sink][id]
	return at, ok
}

// count is how many events sink got.
func (a *arrivals) count(sink string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.first[sink])
}

// webhookBodies are the webhook receiver's events, id -> body.
func (a *arrivals) webhookBodies() map[string]string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string]string, len(a.hook))
	for k, v := range a.hook {
		out[k] = v
	}
	return out
}

// receiver is a webhook receiver that takes every event (200).
func (a *arrivals) receiver(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		a.saw("webhook", r.Header.Get(webhook.HeaderEventID), body)
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// watchRedis reads the stream as a consumer would (XREAD, blocking) until
// the test ends.
func (a *arrivals) watchRedis(t *testing.T, addr, password, stream string) {
	rdb := redis.NewClient(&redis.Options{Addr: addr, Password: password})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done; _ = rdb.Close() })
	go func() {
		defer close(done)
		last := "0"
		for ctx.Err() == nil {
			res, err := rdb.XRead(ctx, &redis.XReadArgs{Streams: []string{stream, last}, Block: 100 * time.Millisecond}).Result()
			if errors.Is(err, redis.Nil) {
				continue // nothing new
			}
			if err != nil { // the server restarts: do not spin
				select {
				case <-ctx.Done():
				case <-time.After(10 * time.Millisecond):
				}
				continue
			}
			for _, s := range res {
				for _, m := range s.Messages {
					id, _ := m.Values[streams.FieldID].(string)
					a.saw("redis", id, nil)
					last = m.ID
				}
			}
		}
	}()
}

// watchNATS subscribes to the stream's subjects (core NATS: every publish
// the stream takes passes there too) until the test ends.
func (a *arrivals) watchNATS(t *testing.T, url, subject string) {
	nc, err := nats.Connect(url, nats.MaxReconnects(-1))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	_, err = nc.Subscribe(subject+".>", func(m *nats.Msg) { a.saw("nats", m.Header.Get(nats.MsgIdHdr), nil) })
	require.NoError(t, err)
	require.NoError(t, nc.Flush())
}

// watchRabbitMQ consumes a queue of its own bound to every routing key of
// exchange (declared as the sink declares it) until the test ends.
func (a *arrivals) watchRabbitMQ(t *testing.T, url, exchange string) {
	testenv.AMQPQueue(t, url, exchange, "watch")
	conn, err := amqp.Dial(url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	require.NoError(t, err)
	msgs, err := ch.Consume("watch", "", true, false, false, false, nil)
	require.NoError(t, err)
	go func() {
		for d := range msgs {
			a.saw("rabbitmq", d.MessageId, nil)
		}
	}()
}

// watchKafka consumes topic on the brokers at addrs from its start.
func (a *arrivals) watchKafka(t *testing.T, addrs, topic string) {
	cl := testenv.KafkaConsumer(t, addrs, topic)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done; cl.Close() })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
				for _, h := range r.Headers {
					if h.Key == streams.KafkaHeaderID {
						a.saw("kafka", string(h.Value), nil)
					}
				}
			})
		}
	}()
}
