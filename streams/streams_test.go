package streams_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/streams"
	"github.com/couponlink/couponlink/webhook"
)

// resend sets every sink's position back by n events, as a relay that
// dies between a send and saving its position leaves it: it sends those
// events again.
func resend(t testing.TB, db *sql.DB, n int) {
	t.Helper()
	_, err := db.Exec(`UPDATE event_sink_position SET last_id = last_id - ?`, n)
	require.NoError(t, err)
}

// relayOverOversized is a relay to sink that gives up an event after two
// attempts, over an outbox of an event, then one of 400 bytes of detail
// (more than a broker set to 300 takes), then two more.
func relayOverOversized(t *testing.T, db *sql.DB, sink webhook.Sink) *webhook.Relay {
	t.Helper()
	m, err := webhook.NewSinkMetrics(prometheus.NewRegistry())
	require.NoError(t, err)
	r, err := webhook.NewRelay(webhook.RelayConfig{DB: db, Sink: sink, Metrics: m, MaxAttempts: 2, MinBackoff: time.Nanosecond,
		MaxBackoff: time.Nanosecond, Logger: testenv.QuietLogger()})
	require.NoError(t, err)
	enqueue(t, db, 1)
	tx, err := db.Begin()
	require.NoError(t, err)
	require.NoError(t, webhook.Enqueue(context.Background(), tx, webhook.Event{Type: webhook.AnomalyDetected,
		Data: map[string]string{"detail": string(make([]byte, 400))}}))
	require.NoError(t, tx.Commit())
	enqueue(t, db, 2)
	return r
}

// enqueue writes n events of every type in transactions of three.
func enqueue(t testing.TB, db *sql.DB, n int) {
	t.Helper()
	ctx := context.Background()
	for i := 0; i < n; i += 3 {
		tx, err := db.BeginTx(ctx, nil)
		require.NoError(t, err)
		var es []webhook.Event
		for j := i; j < min(i+3, n); j++ {
			es = append(es, webhook.Event{Type: webhook.Types[j%len(webhook.Types)], Template: int64(1 + j%4), Channel: "app",
				Data: map[string]any{"seq": j}})
		}
		require.NoError(t, webhook.Enqueue(ctx, tx, es...))
		require.NoError(t, tx.Commit())
	}
}

// relays runs a relay per sink until the test ends.
func relays(t *testing.T, db *sql.DB, reg prometheus.Registerer, sinks []webhook.Sink) {
	t.Helper()
	m, err := webhook.NewSinkMetrics(reg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, s := range sinks {
		r, err := webhook.NewRelay(webhook.RelayConfig{DB: db, Sink: s, Metrics: m, Logger: testenv.QuietLogger(),
			MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, PollEvery: 20 * time.Millisecond, Lease: 4 * time.Second})
		require.NoError(t, err)
		wg.Go(func() { _ = r.Run(ctx) })
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// caughtUp says whether sink's position reached the outbox's last id.
func caughtUp(t testing.TB, db *sql.DB, sink string) bool {
	t.Helper()
	var pos, last int64
	err := db.QueryRow(`SELECT p.last_id, (SELECT MAX(id) FROM webhook_outbox) FROM event_sink_position p WHERE p.sink = ?`, sink).Scan(&pos, &last)
	if errors.Is(err, sql.ErrNoRows) {
		return false
	}
	require.NoError(t, err)
	return pos == last
}

// requireExactlyOnce checks a sink's copy against the outbox: every event
// there, with the outbox's body byte for byte, nothing else; per id at
// most maxCopies entries (1: the sink dedupes by itself).
func requireExactlyOnce(t testing.TB, want map[string]string, count map[string]int, bodies map[string]string, maxCopies int, sink string) {
	t.Helper()
	require.Equal(t, want, bodies, "%s: after dedup on the id, not exactly the outbox's events and bodies", sink)
	for id, n := range count {
		require.LessOrEqual(t, n, maxCopies, "%s: event %s %d times", sink, id, n)
	}
}

// Every event reaches each sink exactly once per id after deduplication,
// while each sink in turn is down: NATS killed (-9) and restarted on its
// store, Redis paused (unreachable: connections hang) and resumed. The
// sink that is up is never held back by the other; positions resent (as
// after a cdc killed between a send and saving its position) are dropped
// by JetStream's duplicate window and deduped on the id for Redis.
func TestEverySinkEveryEventOnceAcrossOutages(t *testing.T) {
	db, _ := testenv.MySQL(t)
	ns, rs := testenv.OwnNATS(t), testenv.OwnRedis(t)
	sinks, err := streams.Open(fmt.Sprintf("redis://%s?stream=ev&name=redis,nats://%s?stream=EV&subject=ev&name=nats", rs.Addr, ns.Addr), nil)
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	relays(t, db, reg, sinks)
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	both := func(what string) {
		cdctest.WaitFor(t, 60*time.Second, what, func() bool { return caughtUp(t, db, "redis") && caughtUp(t, db, "nats") })
	}

	enqueue(t, db, 60)
	both("both sinks take the first events")

	ns.Stop(syscall.SIGKILL)
	enqueue(t, db, 60)
	cdctest.WaitFor(t, 30*time.Second, "Redis goes on while NATS is down", func() bool { return caughtUp(t, db, "redis") })
	cdctest.WaitFor(t, 30*time.Second, "failed NATS rounds counted", func() bool {
		v, _ := cdctest.Metric(t, reg, "couponlink_event_deliveries_total", map[string]string{"sink": "nats", "result": "failed"})
		return v > 0
	})
	require.False(t, caughtUp(t, db, "nats"))
	ns.Start()
	both("NATS catches up once restarted")

	rs.Pause(true)
	enqueue(t, db, 60)
	cdctest.WaitFor(t, 30*time.Second, "NATS goes on while Redis hangs", func() bool { return caughtUp(t, db, "nats") })
	rs.Pause(false)
	both("Redis catches up once it answers again")

	resend(t, db, 50)
	enqueue(t, db, 30)
	both("both sinks take the resent and the new events")

	want := testenv.OutboxBodies(t, db)
	require.Len(t, want, 210)
	rc, rb := testenv.StreamEntries(t, rdb, "ev")
	requireExactlyOnce(t, want, rc, rb, 2, "redis")
	nc, nb := testenv.JetStreamMessages(t, ns.URL(), "EV")
	requireExactlyOnce(t, want, nc, nb, 1, "nats")
	resent := 0
	for _, n := range rc {
		resent += n - 1
	}
	require.Equal(t, 50, resent, "Redis: the resent events are not the duplicates seen")
	delivered, _ := cdctest.Metric(t, reg, "couponlink_event_deliveries_total", map[string]string{"sink": "nats", "result": "delivered"})
	require.Equal(t, 260.0, delivered, "NATS deliveries: 210 events and 50 resent")
}

// A consumer group reading the Redis stream with XREADGROUP, acking and
// deduping on the id field, sees every event of the outbox once.
func TestRedisConsumerGroupSeesEveryEvent(t *testing.T) {
	db, _ := testenv.MySQL(t)
	rdb := testenv.Redis(t)
	stream := testenv.KeyPrefix(t) + "events"
	t.Cleanup(func() { rdb.Del(context.Background(), stream) })
	sinks, err := streams.Open("redis://"+testenv.RedisAddr(t)+"?stream="+stream+"&maxlen=10000", nil)
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, rdb.XGroupCreateMkStream(ctx, stream, "orders", "0").Err())
	relays(t, db, prometheus.NewRegistry(), sinks)
	enqueue(t, db, 100)
	// and a replay: the position set back, those events sent again
	cdctest.WaitFor(t, 30*time.Second, "the sink takes the events", func() bool { return caughtUp(t, db, "redis") })
	resend(t, db, 10)
	enqueue(t, db, 20)
	cdctest.WaitFor(t, 30*time.Second, "the sink takes the events", func() bool { return caughtUp(t, db, "redis") })

	seen := map[string]string{}
	dupes := 0
	for two := 0; two < 2; {
		res, err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "orders", Consumer: "c1", Streams: []string{stream, ">"},
			Count: 25, Block: 100 * time.Millisecond}).Result()
		if errors.Is(err, redis.Nil) {
			two++
			continue
		}
		require.NoError(t, err)
		for _, m := range res[0].Messages {
			id := m.Values[streams.FieldID].(string)
			if _, dup := seen[id]; dup {
				dupes++ // already handled: ack and skip
			} else {
				seen[id] = m.Values[streams.FieldBody].(string)
			}
			require.NoError(t, rdb.XAck(ctx, stream, "orders", m.ID).Err())
		}
	}
	require.Equal(t, testenv.OutboxBodies(t, db), seen, "the consumer group did not see every event once")
	require.Equal(t, 10, dupes)
	pending, err := rdb.XPending(ctx, stream, "orders").Result()
	require.NoError(t, err)
	require.Zero(t, pending.Count)
}

// A message the JetStream stream refuses (larger than its max_msg_size)
// is dropped after the attempts, and the events behind it go on.
func TestNATSRefusedEventDropped(t *testing.T) {
	db, _ := testenv.MySQL(t)
	ns := testenv.OwnNATS(t)
	nc, err := nats.Connect(ns.URL())
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx := context.Background()
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "SMALL", Subjects: []string{"small.>"}, MaxMsgSize: 300})
	require.NoError(t, err)
	sinks, err := streams.Open("nats://"+ns.Addr+"?stream=SMALL&subject=small&create=false", nil)
	require.NoError(t, err)
	r := relayOverOversized(t, db, sinks[0])
	for range 3 {
		_, err := r.Round(ctx)
		require.NoError(t, err)
	}
	count, _ := testenv.JetStreamMessages(t, ns.URL(), "SMALL")
	require.Len(t, count, 3, "the events around the refused one")
	require.True(t, caughtUp(t, db, "nats"))
	var dropped int
	require.NoError(t, db.QueryRow(`SELECT dropped FROM event_sink_position WHERE sink = 'nats'`).Scan(&dropped))
	require.Equal(t, 1, dropped)
}

// A Redis that refuses the password takes nothing: Send says so (it once
// read the pipeline's commands, left without an error of their own, as
// taken), and the error does not show the password.
func TestRedisWrongPasswordTakesNothing(t *testing.T) {
	rs := testenv.OwnRedis(t, "--requirepass", "right-secret")
	sinks, err := streams.Open("redis://:wrong-secret@"+rs.Addr+"?stream=ev", nil)
	require.NoError(t, err)
	defer sinks[0].Close()
	n, err := sinks[0].Send(context.Background(), []webhook.Message{{OutboxID: 1, ID: webhook.NewID(), Type: "quota.released", Body: []byte(`{}`)}})
	require.Zero(t, n)
	require.ErrorContains(t, err, "WRONGPASS")
	require.NotContains(t, err.Error(), "wrong-secret")
	require.False(t, webhook.IsRefused(err), "an outage, not the event's fault")
}
