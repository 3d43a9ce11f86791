package sink_test

import (
	"fmt"
	"maps"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/internal/testenv"
)

var eventSinks = []string{"webhook", "redis", "nats", "rabbitmq", "kafka"}

// eventsProcess is a `couponlink cdc` with its /metrics address.
type eventsProcess struct {
	*cdcProcess
	ops string
}

// startEvents starts a cdc of r on its own metrics address and waits
// until they answer.
func startEvents(t *testing.T, r *cdcRunner) eventsProcess {
	t.Helper()
	p := eventsProcess{ops: testenv.FreeAddr(t)}
	p.cdcProcess = r.start("-metrics-addr", p.ops)
	cdctest.WaitFor(t, 30*time.Second, "the cdc's metrics answer", func() bool {
		require.False(t, p.exited(), "couponlink cdc exited: %v", p.err)
		_, ok := scrape(t, p.ops, "couponlink_cdc_leader")
		return ok
	})
	return p
}

// firstEventAfter is the outbox's first event written after at (by id),
// and when it was written; ok false while there is none.
func firstEventAfter(t *testing.T, e *env, at time.Time) (id string, written time.Time, ok bool) {
	var micros int64
	err := e.DB.QueryRow(`SELECT event_id, CAST(UNIX_TIMESTAMP(created_at) * 1000000 AS SIGNED) FROM webhook_outbox
		WHERE created_at > FROM_UNIXTIME(?) ORDER BY id LIMIT 1`, float64(at.UnixMicro())/1e6).Scan(&id, &micros)
	if err != nil {
		return "", time.Time{}, false
	}
	return id, time.UnixMicro(micros), true
}

// killLeader kills the leader (-9) while events flow, waits until the
// standby leads and writes its first event, and returns how long after
// that event's commit each sink got it.
func killLeader(t *testing.T, e *env, a *arrivals, leader, standby eventsProcess) map[string]time.Duration {
	t.Helper()
	got := map[string]int{}
	for _, s := range eventSinks {
		got[s] = a.count(s)
	}
	cdctest.WaitFor(t, 60*time.Second, "the leader delivers to every sink", func() bool {
		for _, s := range eventSinks {
			if a.count(s) <= got[s] {
				return false
			}
		}
		return true
	})
	for _, s := range eventSinks {
		n, ok := scrape(t, standby.ops, fmt.Sprintf(`couponlink_event_deliveries_total{result="delivered",sink=%q}`, s))
		require.True(t, ok, "no delivery series of sink %s on the standby", s)
		require.Zero(t, n, "the standby delivered to sink %s", s)
	}
	before, name := e.checkpoint().Batches, processName(standby.cdcProcess)
	killed := time.Now()
	_ = leader.signal(syscall.SIGKILL)
	cdctest.WaitFor(t, 30*time.Second, "the standby leads and applies", func() bool {
		require.False(t, standby.exited(), "the standby exited: %v", standby.err)
		cp := e.checkpoint()
		return cp.Leader == name && cp.Batches > before
	})
	led := time.Since(killed)
	var id string
	var written time.Time
	cdctest.WaitFor(t, 60*time.Second, "the new leader writes an event", func() bool {
		var ok bool
		id, written, ok = firstEventAfter(t, e, killed)
		return ok
	})
	var behind int
	require.NoError(t, e.DB.QueryRow(`SELECT COUNT(*) FROM webhook_outbox o JOIN webhook_outbox f ON f.event_id = ?
		WHERE o.id < f.id AND (o.status = 'pending' OR o.finished_at > f.created_at)`, id).Scan(&behind))
	took := map[string]time.Duration{}
	cdctest.WaitFor(t, 30*time.Second, "every sink gets the new leader's first event", func() bool {
		for _, s := range eventSinks {
			if at, ok := a.at(s, id); ok {
				took[s] = at.Sub(written)
			}
		}
		return len(took) == len(eventSinks)
	})
	t.Logf("the standby led %s after the kill; its first event written %s after the kill (%d webhooks before it not yet delivered), got by webhook %s, redis %s, nats %s, rabbitmq %s, kafka %s after",
		led.Round(time.Millisecond), written.Sub(killed).Round(time.Millisecond), behind, took["webhook"].Round(time.Millisecond),
		took["redis"].Round(time.Millisecond), took["nats"].Round(time.Millisecond), took["rabbitmq"].Round(time.Millisecond),
		took["kafka"].Round(time.Millisecond))
	return took
}

// Leases that follow leadership: two `couponlink cdc` processes with the
// webhook, a Redis stream, a NATS JetStream, a RabbitMQ and a Kafka (kfake) sink under the workload;
// the leader is killed (-9) again and again while it delivers (it holds
// every sink's lease; the standby has delivered nothing). The new leader takes the leases at once: each sink
// gets the new leader's first event within a second of its commit. At the
// end each sink holds exactly the outbox (after dedupe on the id), and
// JetStream not one event twice.
func TestEventsResumeWithinASecondOfATakeover(t *testing.T) {
	e := newEnv(t)
	ns, rs, rq, kf := testenv.OwnNATS(t), testenv.OwnRedis(t), testenv.OwnRabbitMQ(t), testenv.OwnKafka(t, "ev")
	a := newArrivals()
	a.watchRedis(t, rs.Addr, "", "ev")
	a.watchNATS(t, ns.URL(), "ev")
	a.watchRabbitMQ(t, rq.AMQPURL(), "ev")
	a.watchKafka(t, kf, "ev")
	testenv.AMQPQueue(t, rq.AMQPURL(), "ev", "orders")
	r := newCDCRunner(t, e, testenv.RedisAddr(t))
	r.args = append(r.args, "-webhook-url", a.receiver(t), "-webhook-secret", "s",
		"-event-sinks", fmt.Sprintf("redis://%s?stream=ev,nats://%s?stream=EV&subject=ev,%s?exchange=ev,kafka://%s?topic=ev", rs.Addr, ns.Addr, rq.AMQPURL(), kf),
		"-quota-mode", "auto", "-quota-min-age", "0s", "-quota-cooldown", "0s", "-quota-min-claims", "20", "-quota-low", "0.6",
		"-quota-high", "0.7", "-quota-reserve", "0", "-rebalance-every", "50ms")
	leader := startEvents(t, r)
	e.WaitCheckpoint()
	standby := startEvents(t, r)
	var stop atomic.Bool
	w := newWorkload(e, wlConfig{Workers: 4, Ops: 1500, Quota: 300, More: func() bool { return !stop.Load() }})
	wait := w.start()
	fromEpoch := e.checkpoint().Epoch
	const kills = 3
	for range kills {
		took := killLeader(t, e, a, leader, standby)
		for _, s := range eventSinks {
			require.Less(t, took[s], time.Second, "sink %s got the new leader's first event late", s)
		}
		leader, standby = standby, startEvents(t, r)
	}
	stop.Store(true)
	wait()
	e.WaitCheckpoint()
	epoch := e.checkpoint().Epoch
	t.Logf("the epoch went %d -> %d for %d takeovers", fromEpoch, epoch, kills)
	require.Equal(t, int64(kills), epoch-fromEpoch, "one epoch per takeover: a takeover took none, or a restart without one took another")
	assertSinksHoldTheOutbox(t, e, a, rs.Addr, ns.URL(), rq.AMQPURL(), kf)
	require.NoError(t, leader.signal(syscall.SIGTERM), "couponlink cdc did not exit cleanly on SIGTERM")
}

// assertSinksHoldTheOutbox waits until the webhook receiver, the Redis
// stream, JetStream and the RabbitMQ queue "orders" each hold exactly the
// outbox's events after dedupe on the id, with its bodies, and checks
// JetStream holds none twice; with kafka (brokers), the Kafka topic "ev"
// too.
func assertSinksHoldTheOutbox(t *testing.T, e *env, a *arrivals, redisAddr, natsURL, amqpURL, kafka string) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	var want, rb, nb, hb, qb, kb map[string]string
	var rc, nc, qc, kc map[string]int
	cdctest.WaitFor(t, 120*time.Second, "every sink holds every event of the outbox", func() bool {
		want = testenv.OutboxBodies(t, e.DB)
		rc, rb = testenv.StreamEntries(t, rdb, "ev")
		nc, nb = testenv.JetStreamMessages(t, natsURL, "EV")
		qc, qb = testenv.AMQPMessages(t, amqpURL, "orders")
		hb = a.webhookBodies()
		kb = want
		if kafka != "" {
			kc, kb = testenv.KafkaRecords(t, kafka, "ev")
		}
		return e.pendingChecks() == 0 && maps.Equal(want, rb) && maps.Equal(want, nb) && maps.Equal(want, hb) && maps.Equal(want, qb) &&
			maps.Equal(want, kb)
	})
	require.NotEmpty(t, want)
	for id, n := range nc {
		require.Equal(t, 1, n, "JetStream holds event %s %d times", id, n)
	}
	resent := 0
	for _, n := range rc {
		resent += n - 1
	}
	queued := 0
	for _, n := range qc {
		queued += n
	}
	records := 0
	for _, n := range kc {
		records += n
	}
	t.Logf("%d events; Redis: %d entries (%d sent again); RabbitMQ: %d messages (%d sent again); Kafka: %d records (%d sent again)",
		len(want), len(want)+resent, resent, queued, queued-len(want), records, records-len(want))
}
