package sink_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/internal/redisconn"
	"github.com/couponlink/couponlink/internal/testenv"
)

// The invariants on a Redis Cluster of three masters: a random workload
// (claims, redemptions, refunds, voids, expiry sweeps, raw SQL) with the
// cdc in owner mode, a FLUSHALL on every master and a restart of the cdc
// in the middle of it; afterwards the counters equal the truth and every
// stock key (spread over the masters by their template hash tags) equals
// quota − claimed. Then a flush of each master alone, while nothing is
// written, is seen (each master holds an epoch marker) and rebuilt.
func TestRedisClusterInvariants(t *testing.T) {
	e := newEnv(t)
	cluster := testenv.OwnRedisCluster(t)
	e.RDB = cluster.Client()
	c := e.StartCDC(nil)
	e.WaitCheckpoint()
	rebuilds := func() float64 {
		v, _ := cdctest.Metric(t, c.Reg, "couponlink_redis_rebuilds_total", nil)
		return v
	}
	w := newWorkload(e, wlConfig{Workers: 4, Ops: 4_000, Quota: 300})
	e.AssertRedis()
	before := rebuilds()

	wait := w.start()
	cdctest.WaitFor(t, 60*time.Second, "the workload is under way", func() bool { return w.ops.Load() >= 1_000 })
	cluster.FlushAll()
	cdctest.WaitFor(t, 30*time.Second, "the cdc saw the flush and rebuilt", func() bool { return rebuilds() > before })
	cdctest.WaitFor(t, 60*time.Second, "the workload goes on", func() bool { return w.ops.Load() >= 2_500 })
	c.Stop(t)
	c = e.StartCDC(nil)
	wait()
	e.assertTruth(true)

	masters := map[string]int{}
	for _, addr := range cluster.Addrs {
		node := redis.NewClient(&redis.Options{Addr: addr})
		keys, err := redisconn.ScanPrefix(context.Background(), node, e.Keys.Prefix+"stock:")
		require.NoError(t, err)
		require.NoError(t, node.Close())
		masters[addr] = len(keys)
	}
	require.Len(t, masters, 3)
	spread := 0
	for _, n := range masters {
		if n > 0 {
			spread++
		}
	}
	require.GreaterOrEqual(t, spread, 2, "the stock keys of three templates lie on one master: %v", masters)

	for _, addr := range cluster.Addrs {
		before := rebuilds()
		cluster.Flush(addr)
		cdctest.WaitFor(t, 30*time.Second, "a rebuild after the flush of "+addr, func() bool { return rebuilds() > before })
		e.AssertRedis()
	}
}
