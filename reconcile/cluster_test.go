package reconcile_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/internal/testenv"
)

// Owner mode on a Redis Cluster of three masters: stock keys of several
// templates (spread over the masters by their hash tags) off up, off down
// and missing are set to the truth by compare-and-set once quiet, and the
// next pass is clean.
func TestRedisClusterOffIsFixedByCAS(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cluster := testenv.OwnRedisCluster(t)
	e.RDB = cluster.Client()
	e.StartCDC(nil)
	var tpls []int64
	for range 6 {
		tpl := e.Template(map[string]int64{"app": 50, "web": 50}, time.Hour)
		e.claim(tpl, "app", 10)
		e.claim(tpl, "web", 5)
		tpls = append(tpls, tpl)
	}
	e.Settle()
	var want []string
	for _, tpl := range tpls {
		app, web, all := e.Keys.Stock(tpl, "app"), e.Keys.Stock(tpl, "web"), e.Keys.TemplateStock(tpl)
		require.NoError(t, e.RDB.Set(e.Ctx, app, 47, 0).Err()) // up
		require.NoError(t, e.RDB.Set(e.Ctx, web, 12, 0).Err()) // down
		require.NoError(t, e.RDB.Del(e.Ctx, all).Err())        // missing
		want = append(want, "redis "+app+" 40 47 fixed", "redis "+web+" 45 12 fixed", "redis "+all+" 85 nil fixed")
	}

	r, _ := e.reconciler()
	rep := e.pass(r)
	require.Equal(t, "auto_fixed", rep.Status)
	require.ElementsMatch(t, want, diffs(rep.Differences))
	require.Len(t, e.correctionsOf(rep.TaskID), len(want))
	for k, v := range e.OwnerKeys() {
		require.Equal(t, str(ptr(v)), str(e.redisGet(k)), k)
	}
	rep = e.pass(r)
	require.Equal(t, "clean", rep.Status, "%v", diffs(rep.Differences))

	// the command, given the masters as a list, or one of them with -redis-cluster
	bin := testenv.BuildCouponlink(t)
	for i, redisFlags := range [][]string{{"-redis", strings.Join(cluster.Addrs, ",")}, {"-redis", cluster.Addrs[1], "-redis-cluster"}} {
		key := e.Keys.Stock(tpls[i], "app")
		require.NoError(t, e.RDB.Set(e.Ctx, key, 1, 0).Err())
		code, out, _ := cli(t, bin, append([]string{"-once", "-dsn", e.DSN, "-key-prefix", e.Keys.Prefix, "-quiet", testQuiet.String(),
			"-catch-up-wait", testCatchUp.String(), "-log-level", "error"}, redisFlags...)...)
		require.Equal(t, 0, code, out)
		require.Contains(t, out, "auto_fixed")
		require.Equal(t, "40", str(e.redisGet(key)), key)
	}
}

// Corrector mode on a Redis Cluster: the cdc follows a legacy schema
// (writing no key), and the legacy front end's stock keys (no hash tag:
// each in its own slot) that are off or missing are set by compare-and-set
// when quiet; after the front end's own DECR and claim, the pass is clean.
func TestLegacyRedisClusterIsFixedWhenQuiet(t *testing.T) {
	t.Parallel()
	l := newLegacy(t, "lg:stock:{template}")
	l.RDB = testenv.OwnRedisCluster(t).Client()
	var want []string
	for tpl := int64(1); tpl <= 6; tpl++ {
		l.newTemplate(tpl, 100)
	}
	l.StartCDC(l.m)
	for tpl := int64(1); tpl <= 6; tpl++ {
		for _, id := range l.claim(tpl, 8)[:3] {
			l.redeem(tpl, id)
		}
		if tpl%2 == 0 {
			require.NoError(t, l.RDB.Set(l.Ctx, l.key(tpl), 99, 0).Err()) // 92 true
			want = append(want, "redis "+l.key(tpl)+" 92 99 fixed")
		} else {
			want = append(want, "redis "+l.key(tpl)+" 92 nil fixed") // missing
		}
	}
	l.WaitCheckpoint()

	r := l.reconciler()
	rep := l.pass(r)
	require.Equal(t, "auto_fixed", rep.Status)
	require.ElementsMatch(t, want, diffs(rep.Differences))
	for tpl := int64(1); tpl <= 6; tpl++ {
		require.Equal(t, "92", str(l.redisGet(l.key(tpl))), l.key(tpl))
	}

	require.NoError(t, l.RDB.Decr(l.Ctx, l.key(2)).Err()) // the front end claims: DECR and row
	l.claim(2, 1)
	l.WaitCheckpoint()
	rep = l.pass(r)
	require.Equal(t, "clean", rep.Status, "%v", diffs(rep.Differences))
}
