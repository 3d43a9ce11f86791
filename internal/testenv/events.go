package testenv

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// StreamEntries reads a whole Redis stream of events (the fields id and
// body, as streams.RedisStream writes them): per event id, how many entries,
// and each id's body.
func StreamEntries(t testing.TB, rdb *redis.Client, stream string) (count map[string]int, bodies map[string]string) {
	t.Helper()
	entries, err := rdb.XRange(context.Background(), stream, "-", "+").Result()
	require.NoError(t, err)
	count, bodies = map[string]int{}, map[string]string{}
	for _, e := range entries {
		id, _ := e.Values["id"].(string)
		count[id]++
		bodies[id], _ = e.Values["body"].(string)
	}
	return count, bodies
}

// JetStreamMessages reads every message of a JetStream stream of events: per Nats-Msg-Id,
// how many messages, and each one's data.
func JetStreamMessages(t testing.TB, url, name string) (count map[string]int, bodies map[string]string) {
	t.Helper()
	nc, err := nats.Connect(url)
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx := context.Background()
	count, bodies = map[string]int{}, map[string]string{}
	s, err := js.Stream(ctx, name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return count, bodies // not made yet (or lost by the server)
	}
	require.NoError(t, err)
	info, err := s.Info(ctx)
	require.NoError(t, err)
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		require.NoError(t, err)
		id := m.Header.Get(nats.MsgIdHdr)
		count[id]++
		bodies[id] = string(m.Data)
	}
	return count, bodies
}

// OutboxBodies is every event of db's outbox: id -> stored body.
func OutboxBodies(t testing.TB, db *sql.DB) map[string]string {
	t.Helper()
	out := map[string]string{}
	rows, err := db.Query(`SELECT event_id, body FROM webhook_outbox`)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var id, body string
		require.NoError(t, rows.Scan(&id, &body))
		out[id] = body
	}
	require.NoError(t, rows.Err())
	return out
}

// OutboxEvents decodes the outbox's events of one type, in outbox order.
func OutboxEvents(t testing.TB, db *sql.DB, event string) []map[string]any {
	t.Helper()
	rows, err := db.Query(`SELECT body FROM webhook_outbox WHERE event = ? ORDER BY id`, event)
	require.NoError(t, err)
	defer rows.Close()
	var out []map[string]any
	for rows.Next() {
		var body []byte
		require.NoError(t, rows.Scan(&body))
		var ev map[string]any
		require.NoError(t, json.Unmarshal(body, &ev))
		out = append(out, ev)
	}
	require.NoError(t, rows.Err())
	return out
}

// AMQPChannel is a channel on its own connection to the broker at url;
// closing the channel closes the connection too.
func AMQPChannel(t testing.TB, url string) *AMQPConnChannel {
	t.Helper()
	conn, err := amqp.Dial(url)
	require.NoError(t, err)
	ch, err := conn.Channel()
	if err != nil {
		conn.Close()
	}
	require.NoError(t, err)
	return &AMQPConnChannel{Channel: ch, conn: conn}
}

// AMQPConnChannel is an AMQP channel with the connection it alone uses.
type AMQPConnChannel struct {
	*amqp.Channel
	conn *amqp.Connection
}

// Close closes the connection, and with it the channel.
func (c *AMQPConnChannel) Close() error { return c.conn.Close() }

// AMQPQueue declares exchange as the RabbitMQ sink does (durable, topic)
// and a durable queue bound to all its routing keys, on the broker at url,
// before the sink sends: an exchange keeps nothing by itself.
func AMQPQueue(t testing.TB, url, exchange, queue string) {
	t.Helper()
	ch := AMQPChannel(t, url)
	defer ch.Close()
	require.NoError(t, ch.ExchangeDeclare(exchange, amqp.ExchangeTopic, true, false, false, false, nil))
	_, err := ch.QueueDeclare(queue, true, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, ch.QueueBind(queue, "#", exchange, false, nil))
}

// AMQPMessages reads every message of a RabbitMQ queue without taking
// them (unacked, requeued when the connection closes): per message id, how
// many messages, and each one's body.
func AMQPMessages(t testing.TB, url, queue string) (count map[string]int, bodies map[string]string) {
	t.Helper()
	ch := AMQPChannel(t, url)
	defer ch.Close()
	count, bodies = map[string]int{}, map[string]string{}
	for {
		d, ok, err := ch.Get(queue, false)
		require.NoError(t, err)
		if !ok {
			return count, bodies
		}
		count[d.MessageId]++
		bodies[d.MessageId] = string(d.Body)
	}
}
