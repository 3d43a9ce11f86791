package sink_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/sink"
)

// Redis is a loseable accelerator (invariant 4): a FLUSHALL mid-workload,
// a FLUSHALL while the cdc is idle, and a Redis killed and restarted on the
// same port mid-workload all end with every stock key equal to quota -
// claimed, without any action, and couponlink_redis_behind_batches back
// to 0. While Redis is down the counters go on and reach the truth.
func TestRedisFlushAndRestart(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	r := startPrivateRedis(t)
	e.RDB = r.client() // this test's own Redis: it may be flushed and killed
	c := e.StartCDC(nil)
	e.WaitCheckpoint()
	behind := func() float64 {
		v, ok := cdctest.Metric(t, c.Reg, "couponlink_redis_behind_batches", nil)
		require.True(t, ok, "couponlink_redis_behind_batches is not exported")
		return v
	}
	rebuilds := func() float64 {
		v, _ := cdctest.Metric(t, c.Reg, "couponlink_redis_rebuilds_total", nil)
		return v
	}
	w := newWorkload(e, wlConfig{Workers: 4, Ops: 1_500, Quota: 300})
	e.AssertRedis()
	require.True(t, e.RDB.Exists(ctx, e.Keys.Epoch()).Val() == 1, "the full-copy marker is set")

	// 1. FLUSHALL in the middle of the workload
	wait := w.start()
	cdctest.WaitFor(t, 60*time.Second, "the workload is under way", func() bool { return w.ops.Load() >= 500 })
	require.NoError(t, e.RDB.FlushAll(ctx).Err())
	wait()
	e.WaitCheckpoint()
	e.AssertRedis()
	cdctest.WaitFor(t, 30*time.Second, "redis_behind_batches back to 0", func() bool { return behind() == 0 })

	// 2. FLUSHALL while nothing is written: only the cdc's own probe can notice
	before := rebuilds()
	require.NoError(t, e.RDB.FlushAll(ctx).Err())
	e.AssertRedis()
	// the rebuild writes the keys, then the marker, then counts itself
	cdctest.WaitFor(t, 30*time.Second, "the rebuild counted", func() bool { return rebuilds() > before })
	require.True(t, e.RDB.Exists(ctx, e.Keys.Epoch()).Val() == 1, "the full-copy marker is set again")

	// 3. Redis killed mid-workload: the counters go on; Redis is behind
	w.cfg.Ops += 1_500
	wait = w.start()
	cdctest.WaitFor(t, 60*time.Second, "the workload is under way", func() bool { return w.ops.Load() >= int64(w.cfg.Ops-1_000) })
	r.kill()
	cdctest.WaitFor(t, 60*time.Second, "redis_behind_batches > 0 while Redis is down", func() bool { return behind() > 0 })
	wait()
	e.WaitCheckpoint()
	require.Equal(t, e.Truth(), e.Counters(), "counters stopped while Redis was down")
	require.Positive(t, behind(), "Redis is down, yet the cdc says it is current")
	require.True(t, c.Running(), "the cdc stopped because Redis is down")

	// 4. Redis back (empty, same port): rebuilt by itself
	r.start()
	e.AssertRedis()
	cdctest.WaitFor(t, 30*time.Second, "redis_behind_batches back to 0", func() bool { return behind() == 0 })
	e.assertTruth(true)
}

// Two cdcs of two primaries (here two databases) share a key prefix, each
// with its own checkpoint name and its own templates: after the prefix's
// keys are flushed, each sees its own full-copy marker gone and rebuilds
// its own templates' keys (one marker for both would let only the first
// one rebuild).
func TestSharedPrefixEachRebuilds(t *testing.T) {
	a, b := newEnv(t), newEnv(t)
	b.Keys = a.Keys
	_, err := b.DB.Exec("ALTER TABLE coupon_template AUTO_INCREMENT = 1000") // the primaries' ids do not meet
	require.NoError(t, err)
	for i, e := range []*env{a, b} {
		e.Checkpoint = fmt.Sprint("p", i)
		w := &claimer{e: e, tpl: e.Template(map[string]int64{"app": 100, "web": 100, "sms": 100}, time.Hour)}
		w.claim(7)
		e.StartCDC(nil, func(cfg *sink.Config, _ *sink.Daemon) { cfg.Name = e.Checkpoint })
	}
	for _, e := range []*env{a, b} {
		e.Settle()
	}
	keys := a.PrefixKeys()
	require.NotEmpty(t, keys)
	require.NoError(t, a.RDB.Del(context.Background(), keys...).Err()) // a FLUSHALL of the shared prefix
	for _, e := range []*env{a, b} {
		e.AssertRedis()
	}
}
