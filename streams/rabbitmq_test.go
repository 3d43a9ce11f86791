package streams_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/streams"
	"github.com/couponlink/couponlink/webhook"
)

// rabbitExchange is the exchange a test publishes to: the default one in
// a vhost of the test's own, else a name of its own in "/".
func rabbitExchange(v *testenv.RabbitVhost) string {
	if v.Owned {
		return streams.DefaultExchange
	}
	return "clt-" + webhook.NewID()[:8]
}

// rabbitQueue declares exchange as the sink does and a durable queue bound
// to all its routing keys (deleted when the test ends).
func rabbitQueue(t *testing.T, url, exchange string) string {
	t.Helper()
	queue := "clt-" + webhook.NewID()[:8]
	testenv.AMQPQueue(t, url, exchange, queue)
	t.Cleanup(func() {
		if c, err := amqp.Dial(url); err == nil {
			if ch, err := c.Channel(); err == nil {
				_, _ = ch.QueueDelete(queue, false, false, false)
				if exchange != streams.DefaultExchange {
					_ = ch.ExchangeDelete(exchange, false, false)
				}
			}
			_ = c.Close()
		}
	})
	return queue
}

// rabbitDrain takes every message waiting in queue, in queue order.
func rabbitDrain(t testing.TB, url, queue string) []amqp.Delivery {
	t.Helper()
	ch := testenv.AMQPChannel(t, url)
	defer ch.Close()
	var out []amqp.Delivery
	for {
		d, ok, err := ch.Get(queue, true)
		require.NoError(t, err)
		if !ok {
			return out
		}
		out = append(out, d)
	}
}

func rabbitMessages(n int) []webhook.Message {
	out := make([]webhook.Message, n)
	for i := range out {
		typ := webhook.Types[i%len(webhook.Types)]
		id := webhook.NewID()
		out[i] = webhook.Message{OutboxID: int64(i + 1), ID: id, Type: typ,
			Body: fmt.Appendf(nil, `{"id":%q,"type":%q,"time":"2026-12-06T10:00:%02dZ","data":{"seq":%d}}`, id, typ, i%60, i)}
	}
	return out
}

// sendAll sends msgs as a Relay does, the rest again after an error (at
// most tries times): it returns how many Sends it took.
func sendAll(t *testing.T, s webhook.Sink, msgs []webhook.Message, tries int) int {
	t.Helper()
	for try := 1; ; try++ {
		n, err := s.Send(context.Background(), msgs)
		msgs = msgs[n:]
		if err == nil {
			require.Empty(t, msgs)
			return try
		}
		require.False(t, webhook.IsRefused(err), "an outage, not the event's fault: %v", err)
		require.NotContains(t, err.Error(), "guest:guest")
		require.Less(t, try, tries, "Send keeps failing: %v", err)
	}
}

// A RabbitMQ sink publishes a batch in order to its topic exchange, each
// message persistent, routed by the event type, with the event id as its
// message id and the body byte for byte; after the broker closed its
// connection the next Send connects again and delivers: nothing lost,
// nothing twice, in order.
func TestRabbitMQSinkInOrderAcrossClosedConnection(t *testing.T) {
	v := testenv.RabbitMQ(t)
	exchange := rabbitExchange(v)
	queue := rabbitQueue(t, v.URL(), exchange)
	sinks, err := streams.Open(v.URL()+"?exchange="+exchange, nil)
	require.NoError(t, err)
	defer sinks[0].Close()
	require.Equal(t, "rabbitmq", sinks[0].Name())

	msgs := rabbitMessages(60)
	n, err := sinks[0].Send(context.Background(), msgs[:30])
	require.NoError(t, err)
	require.Equal(t, 30, n)
	if v.Owned {
		v.CloseConnections()
		time.Sleep(200 * time.Millisecond) // let the client see it (a Send before fails, and the next one reconnects: sendAll)
	}
	tries := sendAll(t, sinks[0], msgs[30:], 3)
	require.LessOrEqual(t, tries, 2)
	t.Logf("the batch after the closed connection took %d Send(s)", tries)

	got := rabbitDrain(t, v.URL(), queue)
	require.Len(t, got, len(msgs))
	for i, d := range got {
		m := msgs[i]
		require.Equal(t, m.ID, d.MessageId, "message %d out of order", i)
		require.Equal(t, m.Type, d.RoutingKey)
		require.Equal(t, m.Type, d.Type)
		require.Equal(t, exchange, d.Exchange)
		require.Equal(t, amqp.Persistent, d.DeliveryMode)
		require.Equal(t, "application/json", d.ContentType)
		require.Equal(t, string(m.Body), string(d.Body))
		require.Equal(t, fmt.Sprintf("2026-12-06T10:00:%02dZ", i%60), d.Timestamp.UTC().Format(time.RFC3339))
	}
}

// Every outbox event reaches a RabbitMQ queue bound to the sink's
// exchange, once per message id after deduplication and in outbox order
// (first copies), across connections the broker closed and positions set
// back (as after a cdc killed between a confirm and saving its position).
func TestRabbitMQEveryEventOnceAcrossOutages(t *testing.T) {
	db, _ := testenv.MySQL(t)
	v := testenv.RabbitMQ(t)
	if !v.Owned {
		t.Fatal("needs a vhost of its own (rabbitmqctl add_vhost) to close the sink's connections")
	}
	queue := rabbitQueue(t, v.URL(), streams.DefaultExchange)
	sinks, err := streams.Open(v.URL()+"?name=rmq", nil)
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	relays(t, db, reg, sinks)
	wait := func(what string) {
		cdctest.WaitFor(t, 60*time.Second, what, func() bool { return caughtUp(t, db, "rmq") })
	}
	enqueue(t, db, 60)
	wait("the sink takes the first events")
	v.CloseConnections()
	enqueue(t, db, 60)
	wait("the sink reconnects and takes the next events")
	v.CloseConnections()
	enqueue(t, db, 60)
	wait("the sink reconnects again")
	resend(t, db, 50)
	enqueue(t, db, 30)
	wait("the sink takes the resent and the new events")

	want := testenv.OutboxBodies(t, db)
	require.Len(t, want, 210)
	count, bodies := map[string]int{}, map[string]string{}
	var first []string
	for _, d := range rabbitDrain(t, v.URL(), queue) {
		require.Equal(t, amqp.Persistent, d.DeliveryMode)
		if count[d.MessageId] == 0 {
			first = append(first, d.MessageId)
		}
		count[d.MessageId]++
		bodies[d.MessageId] = string(d.Body)
	}
	requireExactlyOnce(t, want, count, bodies, 2, "rabbitmq")
	resent := 0
	for _, n := range count {
		resent += n - 1
	}
	require.Equal(t, 50, resent, "the resent events are not the duplicates seen")
	require.Equal(t, outboxOrder(t, db), first, "first copies not in outbox order")
}

// outboxOrder is the outbox's event ids in outbox order.
func outboxOrder(t testing.TB, db *sql.DB) []string {
	t.Helper()
	return testenv.Column[string](t, db, `SELECT event_id FROM webhook_outbox ORDER BY id`)
}

// A RabbitMQ sink's URL parameters are checked at Open, and a refused
// login is an outage whose error does not show the password.
func TestRabbitMQSinkURL(t *testing.T) {
	for _, bad := range []string{
		"amqp://u:hunter22@127.0.0.1:5672/?declare=maybe",
		"amqp://u:hunter22@127.0.0.1:5672/?tls_ca=ca.pem",
		"amqp://u:hunter22@127.0.0.1:5672/?exchnage=x",
		"amqps://u:hunter22@127.0.0.1:5672/?tls_ca=/nonexistent/ca.pem",
	} {
		_, err := streams.Open(bad, nil)
		require.Error(t, err, bad)
		require.NotContains(t, err.Error(), "hunter22", bad)
	}
	sinks, err := streams.Open("amqps://u:hunter22@127.0.0.1:5671/v?name=a,amqp://127.0.0.1/?name=b&exchange=x&declare=false", nil)
	require.NoError(t, err)
	for _, s := range sinks {
		require.NoError(t, s.Close())
	}

	sinks, err = streams.Open("amqp://guest:wrong-secret@"+testenv.RabbitMQAddr()+"/", nil)
	require.NoError(t, err)
	defer sinks[0].Close()
	n, err := sinks[0].Send(context.Background(), rabbitMessages(1))
	require.Zero(t, n)
	require.ErrorContains(t, err, "(403)")
	require.NotContains(t, err.Error(), "wrong-secret")
	require.False(t, webhook.IsRefused(err), "an outage, not the event's fault")
}

// A message the broker nacks (a queue full with overflow reject-publish)
// stops Send there: the messages before it count as taken, the error is
// an outage (the Relay sends it again), and the sink goes on once there
// is room.
func TestRabbitMQNackStopsSend(t *testing.T) {
	v := testenv.RabbitMQ(t)
	exchange := rabbitExchange(v)
	conn, err := amqp.Dial(v.URL())
	require.NoError(t, err)
	defer conn.Close()
	ch, err := conn.Channel()
	require.NoError(t, err)
	require.NoError(t, ch.ExchangeDeclare(exchange, amqp.ExchangeTopic, true, false, false, false, nil))
	q, err := ch.QueueDeclare("", false, true, true, false, amqp.Table{"x-max-length": int32(5), "x-overflow": "reject-publish"})
	require.NoError(t, err)
	require.NoError(t, ch.QueueBind(q.Name, "#", exchange, false, nil))
	sinks, err := streams.Open(v.URL()+"?exchange="+exchange+"&declare=false", nil)
	require.NoError(t, err)
	defer sinks[0].Close()

	msgs := rabbitMessages(8)
	n, err := sinks[0].Send(context.Background(), msgs)
	require.Equal(t, 5, n)
	require.ErrorContains(t, err, "nacked")
	require.False(t, webhook.IsRefused(err))
	_, err = ch.QueuePurge(q.Name, false)
	require.NoError(t, err)
	n, err = sinks[0].Send(context.Background(), msgs[5:])
	require.NoError(t, err)
	require.Equal(t, 3, n)
}

// Every outbox event reaches a durable queue once per message id after
// deduplication, in outbox order (first copies), across restarts of the
// broker (a node of the test's own): killed (-9) while the relay sends,
// and stopped (TERM) while events wait. Nothing confirmed is lost; what
// was not is sent again.
func TestRabbitMQEveryEventOnceAcrossBrokerRestarts(t *testing.T) {
	db, _ := testenv.MySQL(t)
	start := time.Now()
	rs := testenv.OwnRabbitMQ(t)
	t.Logf("own RabbitMQ node up in %s", time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("rabbitmq-server's log:\n%s", rs.Log())
		}
	})
	queue := rabbitQueue(t, rs.AMQPURL(), streams.DefaultExchange)
	sinks, err := streams.Open(rs.AMQPURL(), nil)
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	relays(t, db, reg, sinks)
	wait := func(what string) {
		cdctest.WaitFor(t, 90*time.Second, what, func() bool { return caughtUp(t, db, "rabbitmq") })
	}
	failed := func() float64 {
		v, _ := cdctest.Metric(t, reg, "couponlink_event_deliveries_total", map[string]string{"sink": "rabbitmq", "result": "failed"})
		return v
	}

	enqueue(t, db, 60)
	wait("the sink takes the first events")
	var more sync.WaitGroup
	more.Go(func() { enqueue(t, db, 60) }) // while the broker is killed
	time.Sleep(50 * time.Millisecond)
	rs.Stop(syscall.SIGKILL)
	more.Wait()
	enqueue(t, db, 30)
	cdctest.WaitFor(t, 30*time.Second, "failed rounds counted while the broker is down", func() bool { return failed() > 0 })
	start = time.Now()
	rs.Start()
	t.Logf("restarted after kill -9 in %s", time.Since(start).Round(time.Millisecond))
	wait("the sink catches up after the broker's restart")

	rs.Stop(syscall.SIGTERM)
	enqueue(t, db, 60)
	before := failed()
	cdctest.WaitFor(t, 30*time.Second, "failed rounds counted while the broker is stopped", func() bool { return failed() > before })
	rs.Start()
	wait("the sink catches up after a clean restart")

	want := testenv.OutboxBodies(t, db)
	require.Len(t, want, 210)
	count, bodies := map[string]int{}, map[string]string{}
	var first []string
	for _, d := range rabbitDrain(t, rs.AMQPURL(), queue) {
		if count[d.MessageId] == 0 {
			first = append(first, d.MessageId)
		}
		count[d.MessageId]++
		bodies[d.MessageId] = string(d.Body)
	}
	requireExactlyOnce(t, want, count, bodies, 2, "rabbitmq")
	require.Equal(t, outboxOrder(t, db), first, "first copies not in outbox order")
	resent := 0
	for _, n := range count {
		resent += n - 1
	}
	t.Logf("%d events in the queue twice (sent again after the kill)", resent)
}

// An amqps:// sink to a node serving TLS alone and asking for a client
// certificate: with its own tls_ca, tls_cert and tls_key it publishes;
// without a client certificate, with the system's CAs, or in clear, it
// cannot, and no error shows the password.
func TestAMQPSSink(t *testing.T) {
	ca := testenv.NewCA(t, "test")
	rs := testenv.OwnRabbitMQTLS(t, ca)
	cert, key := ca.Issue("client")
	base := "amqps://guest:guest@" + rs.Addr + "/"
	sendOne := func(spec string) error {
		sinks, err := streams.Open(spec, nil)
		require.NoError(t, err, spec)
		defer sinks[0].Close()
		_, err = sinks[0].Send(context.Background(), rabbitMessages(1))
		if err != nil {
			t.Logf("%s: %v", spec[strings.Index(spec, "@"):], err)
			require.NotContains(t, err.Error(), "guest:guest")
			require.False(t, webhook.IsRefused(err), "an outage, not the event's fault: %v", err)
		}
		return err
	}
	require.NoError(t, sendOne(base+"?tls_ca="+ca.File+"&tls_cert="+cert+"&tls_key="+key), "its own CA and client certificate")
	require.Error(t, sendOne(base+"?tls_ca="+ca.File), "no client certificate")
	require.ErrorContains(t, sendOne(base), "certificate", "the system's CAs")
	require.Error(t, sendOne("amqp://guest:guest@"+rs.Addr+"/"), "in clear")
}

// A message over the broker's max_message_size is the event's own fault:
// the relay drops it after its attempts and the events behind it go on
// (the sink connects again after the broker closed its channel).
func TestRabbitMQRefusedEventDropped(t *testing.T) {
	db, _ := testenv.MySQL(t)
	rs := testenv.OwnRabbitMQ(t, "max_message_size = 300")
	queue := rabbitQueue(t, rs.AMQPURL(), streams.DefaultExchange)
	sinks, err := streams.Open(rs.AMQPURL(), nil)
	require.NoError(t, err)
	defer sinks[0].Close()
	r := relayOverOversized(t, db, sinks[0])
	ctx := context.Background()
	// a round that loses the batch's confirms (the broker closes the
	// channel at the large message), two that refuse it alone, one for
	// the rest
	rounds := 0
	for ; rounds < 10 && !caughtUp(t, db, "rabbitmq"); rounds++ {
		_, err := r.Round(ctx)
		require.NoError(t, err)
	}
	require.True(t, caughtUp(t, db, "rabbitmq"))
	t.Logf("caught up in %d rounds", rounds)
	count, _ := rabbitCount(rabbitDrain(t, rs.AMQPURL(), queue))
	require.Len(t, count, 3, "the events around the refused one")
	var dropped int
	require.NoError(t, db.QueryRow(`SELECT dropped FROM event_sink_position WHERE sink = 'rabbitmq'`).Scan(&dropped))
	require.Equal(t, 1, dropped)
}

// rabbitCount is, per message id, how many of ds, and the ids in order of
// their first copies.
func rabbitCount(ds []amqp.Delivery) (map[string]int, []string) {
	count := map[string]int{}
	var first []string
	for _, d := range ds {
		if count[d.MessageId] == 0 {
			first = append(first, d.MessageId)
		}
		count[d.MessageId]++
	}
	return count, first
}
