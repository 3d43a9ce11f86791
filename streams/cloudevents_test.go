package streams_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/streams"
	"github.com/couponlink/couponlink/webhook"
)

var ceFormat = webhook.Format{CloudEvents: true, Source: webhook.CloudEventsSource("default")}

// requireStructured checks that body is m as a structured CloudEvent
// (strictly valid, the stored body whole as data).
func requireStructured(t *testing.T, m webhook.Message, body string) {
	t.Helper()
	attrs, data, err := testenv.StructuredCloudEvent([]byte(body))
	require.NoError(t, err, "%s", body)
	require.Equal(t, m.ID, attrs["id"])
	require.Equal(t, "io.couponlink."+m.Type, attrs["type"])
	require.Equal(t, "couponlink/cdc/default", attrs["source"])
	require.Contains(t, attrs, "time")
	require.JSONEq(t, string(m.Body), string(data))
}

// In CloudEvents format the Redis stream's body field and the JetStream
// message's data are structured CloudEvents (structured mode); the id
// field and Nats-Msg-Id stay the event id.
func TestCloudEventsStructuredRedisAndNATS(t *testing.T) {
	ns, rs := testenv.OwnNATS(t), testenv.OwnRedis(t)
	sinks, err := streams.Open(fmt.Sprintf("redis://%s?stream=ev&name=redis,nats://%s?stream=EV&subject=ev&name=nats", rs.Addr, ns.Addr), nil, ceFormat)
	require.NoError(t, err)
	msgs := rabbitMessages(12)
	for _, s := range sinks {
		defer s.Close()
		n, err := s.Send(context.Background(), msgs)
		require.NoError(t, err, s.Name())
		require.Equal(t, len(msgs), n, s.Name())
	}
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	defer rdb.Close()
	count, bodies := testenv.StreamEntries(t, rdb, "ev")
	require.Len(t, count, len(msgs))
	for _, m := range msgs {
		require.Equal(t, 1, count[m.ID])
		requireStructured(t, m, bodies[m.ID])
	}
	count, bodies = testenv.JetStreamMessages(t, ns.URL(), "EV")
	require.Len(t, count, len(msgs))
	for _, m := range msgs {
		require.Equal(t, 1, count[m.ID])
		requireStructured(t, m, bodies[m.ID])
	}

	// a stored body that is not JSON is refused, after those before it
	bad := append(rabbitMessages(2), webhook.Message{OutboxID: 99, ID: webhook.NewID(), Type: webhook.ChannelLow, Body: []byte("{")})
	for _, s := range sinks {
		n, err := s.Send(context.Background(), bad)
		require.Equal(t, 2, n, s.Name())
		require.True(t, webhook.IsRefused(err), "%s: %v", s.Name(), err)
	}
}

// binaryAttributes are the CloudEvents attributes of a binary-mode
// message: the headers with prefix, and the content type as
// datacontenttype.
func binaryAttributes(headers map[string]string, prefix, contentType string) map[string]string {
	attrs := map[string]string{"datacontenttype": contentType}
	for k, v := range headers {
		if name, ok := strings.CutPrefix(k, prefix); ok {
			attrs[name] = v
		}
	}
	return attrs
}

func requireBinary(t *testing.T, m webhook.Message, attrs map[string]string, body string) {
	t.Helper()
	require.NoError(t, testenv.CheckCloudEvent(attrs), "%v", attrs)
	require.Equal(t, "application/json", attrs["datacontenttype"])
	require.Equal(t, m.ID, attrs["id"])
	require.Equal(t, "io.couponlink."+m.Type, attrs["type"])
	require.Equal(t, "couponlink/cdc/default", attrs["source"])
	require.Contains(t, attrs, "time")
	require.Equal(t, string(m.Body), body, "binary mode: the stored body as it is")
}

// In CloudEvents format a Kafka record keeps the stored body and its id
// and type headers, and carries the attributes as ce_* headers with
// content-type (binary mode).
func TestCloudEventsBinaryKafka(t *testing.T) {
	_, addrs := kafkaCluster(t, kfake.SeedTopics(3, "ev"))
	sinks, err := streams.Open("kafka://"+addrs+"?topic=ev", nil, ceFormat)
	require.NoError(t, err)
	defer sinks[0].Close()
	msgs := kafkaMessages(t, 20)
	n, err := sinks[0].Send(context.Background(), msgs)
	require.NoError(t, err)
	require.Equal(t, len(msgs), n)
	recs := consumeKafka(t, addrs, len(msgs), "ev")
	require.Zero(t, requireEveryEventOnce(t, msgs, recs))
	byID := map[string]webhook.Message{}
	for _, m := range msgs {
		byID[m.ID] = m
	}
	for _, r := range recs {
		requireBinary(t, byID[r.id], binaryAttributes(r.headers, "ce_", r.headers["content-type"]), r.body)
	}

	bad := append(kafkaMessages(t, 2), webhook.Message{OutboxID: 99, ID: webhook.NewID(), Type: webhook.ChannelLow, Body: []byte("{")})
	n, err = sinks[0].Send(context.Background(), bad)
	require.Equal(t, 2, n)
	require.True(t, webhook.IsRefused(err), "%v", err)
}

// In CloudEvents format a RabbitMQ message keeps the stored body and
// carries the attributes as cloudEvents_* headers (the AMQP binding's
// application properties) with content type application/json.
func TestCloudEventsBinaryRabbitMQ(t *testing.T) {
	v := testenv.RabbitMQ(t)
	exchange := rabbitExchange(v)
	queue := rabbitQueue(t, v.URL(), exchange)
	sinks, err := streams.Open(v.URL()+"?exchange="+exchange, nil, ceFormat)
	require.NoError(t, err)
	defer sinks[0].Close()
	msgs := rabbitMessages(10)
	n, err := sinks[0].Send(context.Background(), msgs)
	require.NoError(t, err)
	require.Equal(t, len(msgs), n)
	got := rabbitDrain(t, v.URL(), queue)
	require.Len(t, got, len(msgs))
	for i, d := range got {
		headers := map[string]string{}
		for k, v := range d.Headers {
			s, ok := v.(string)
			require.True(t, ok, "header %s is a %T", k, v)
			headers[k] = s
		}
		requireBinary(t, msgs[i], binaryAttributes(headers, streams.AMQPCloudEventsPrefix, d.ContentType), string(d.Body))
	}
}
