package sink_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/internal/testenv"
)

// The event streams under crashes: `couponlink cdc` processes with a Redis
// stream, a NATS JetStream and a RabbitMQ sink are killed with SIGKILL at
// random moments while the workload makes events (channels selling out,
// releases, quota transfers, anomalies), and each sink's server is
// restarted once (NATS killed -9 and started on its store; Redis killed -9
// and started on its append-only file; RabbitMQ killed -9 and started on
// its database, the durable queue keeping what it confirmed). At the end
// every event of the outbox is in each
// sink exactly once after deduplication on the event id (JetStream: once
// without any, its duplicate window drops what a killed cdc sent again),
// with the outbox's body byte for byte.
func TestStreamsExactlyOnceAcrossCDCKillsAndSinkRestarts(t *testing.T) {
	e := newEnv(t)
	ns, rs, rq := testenv.OwnNATS(t), testenv.OwnRedis(t), testenv.OwnRabbitMQ(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("nats-server's log:\n%s", ns.Log())
		}
	})
	testenv.AMQPQueue(t, rq.AMQPURL(), "ev", "orders")
	runner := newCDCRunner(t, e, testenv.RedisAddr(t))
	runner.args = append(runner.args, "-event-sinks", fmt.Sprintf("redis://%s?stream=ev,nats://%s?stream=EV&subject=ev,%s?exchange=ev", rs.Addr, ns.Addr, rq.AMQPURL()),
		"-quota-mode", "auto", "-quota-min-age", "0s", "-quota-cooldown", "0s", "-quota-min-claims", "20", "-quota-low", "0.6",
		"-quota-high", "0.7", "-quota-reserve", "0", "-rebalance-every", "50ms")
	const kills = 4
	var done atomic.Int64
	w := newWorkload(e, wlConfig{Workers: 4, Ops: 3_000, Quota: 300, OverIssue: true, More: func() bool { return done.Load() < kills }})
	p := runner.start()
	e.WaitCheckpoint()
	wait := w.start()
	rng := rand.New(rand.NewPCG(rand.Uint64(), 18))
	for done.Load() < kills {
		start := e.checkpoint().Batches
		cdctest.WaitFor(t, 60*time.Second, "the cdc applies batches", func() bool {
			require.False(t, p.exited(), "couponlink cdc exited by itself: %v", p.err)
			return e.checkpoint().Batches > start+1
		})
		switch done.Load() {
		case 1:
			ns.Stop(syscall.SIGKILL)
		case 2:
			ns.Start()
			rs.Stop(syscall.SIGKILL)
		case 3:
			rs.Start()
			rq.Stop(syscall.SIGKILL)
			rq.Start()
		}
		time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond) // the random moment of the kill
		_ = p.signal(syscall.SIGKILL)
		done.Add(1)
		p = runner.start()
	}
	wait()
	e.WaitCheckpoint()

	// the cdc judges pending redemption checks after the grace: more
	// events may come; wait until both sinks hold exactly the outbox
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	defer rdb.Close()
	var want, rb, nb, qb map[string]string
	var rc, nc, qc map[string]int
	cdctest.WaitFor(t, 120*time.Second, "the sinks hold every event of the outbox", func() bool {
		want = testenv.OutboxBodies(t, e.DB)
		rc, rb = testenv.StreamEntries(t, rdb, "ev")
		nc, nb = testenv.JetStreamMessages(t, ns.URL(), "EV")
		qc, qb = testenv.AMQPMessages(t, rq.AMQPURL(), "orders")
		return e.pendingChecks() == 0 && maps.Equal(want, rb) && maps.Equal(want, nb) && maps.Equal(want, qb)
	})
	require.NotEmpty(t, want)
	types := map[string]int{}
	require.NoError(t, forRows(e, `SELECT event FROM webhook_outbox`, func(s string) { types[s]++ }))
	t.Logf("%d events in the outbox: %v", len(want), types)
	require.Equal(t, want, rb, "Redis stream after dedup on the id: not exactly the outbox's events and bodies")
	require.Equal(t, want, nb, "JetStream: not exactly the outbox's events and bodies")
	for id, n := range nc {
		require.Equal(t, 1, n, "JetStream holds event %s %d times", id, n)
	}
	resent := 0
	for _, n := range rc {
		resent += n - 1
	}
	t.Logf("Redis: %d entries for %d events (%d sent again after kills)", len(want)+resent, len(want), resent)
	require.Equal(t, want, qb, "RabbitMQ queue after dedup on the message id: not exactly the outbox's events and bodies")
	resent = 0
	for _, n := range qc {
		resent += n - 1
	}
	t.Logf("RabbitMQ: %d messages for %d events (%d sent again after kills)", len(want)+resent, len(want), resent)
	require.NoError(t, p.signal(syscall.SIGTERM), "couponlink cdc did not exit cleanly on SIGTERM")
}

// forRows calls f with the one string column of each row of query.
func forRows(e *env, query string, f func(string)) error {
	rows, err := e.DB.Query(query)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return err
		}
		f(s)
	}
	return rows.Err()
}
