package sink_test

import (
	"context"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/inventory"
	"github.com/couponlink/couponlink/sink"
)

// The snapshot-position path of Oracle MySQL, forced on MariaDB: a cdc
// rebuilt from scratch while writers go on, eight times, under LOCK TABLES
// on the mapped tables and, in make test-portable, alternately under FLUSH
// TABLES WITH READ LOCK.
// The writers are a random workload (the write path and legacy SQL) and
// raw single-row claims and redemptions hammering a template of their own,
// so that commits land in every sub-millisecond window. Each time, the
// counters bootstrapped at the position read under the lock, then
// streamed from it, equal the GROUP BY truth and Redis the claimable
// stock once the cdc has caught up: every transaction is counted exactly
// once (a position read after the lock is released skips some; one read
// before the snapshot starts counts some twice).
func TestPortableBootstrapExactlyOnceUnderWrites(t *testing.T) {
	e := newEnv(t)
	hammered := e.Template(map[string]int64{"raw": 1_000_000_000}, time.Hour)
	// the global lock only in make test-portable, after the other suites
	// (it stalls every writer of the server: other packages' timing)
	methods := []canal.SnapshotMethod{canal.SnapshotTables}
	if os.Getenv("COUPONLINK_SNAPSHOT_POSITION") == string(canal.SnapshotLock) {
		methods = append(methods, canal.SnapshotLock)
	}
	for i := range 8 {
		method := methods[i%len(methods)]
		prev := inventory.SetSnapshotMethod(method)
		var bootstrapped atomic.Bool
		w := newWorkload(e, wlConfig{Workers: 2, Ops: 100, Quota: 100_000, More: func() bool { return !bootstrapped.Load() }})
		wait := w.start()
		stopHammer := hammer(e, hammered, 6)
		c := e.StartCDC(nil, func(_ *sink.Config, d *sink.Daemon) { d.Rebuild = true })
		cdctest.WaitFor(t, 60*time.Second, "bootstrapped", func() bool {
			n, _ := cdctest.Metric(t, c.Reg, "couponlink_cdc_bootstraps_total", nil)
			return n == 1
		})
		bootstrapped.Store(true)
		require.Positive(t, stopHammer(), "the hammer wrote")
		wait()
		e.assertTruth(true)
		if n, _ := cdctest.Metric(t, c.Reg, "couponlink_snapshot_lock_seconds", map[string]string{"method": string(method)}); n == 0 {
			t.Fatalf("try %d: no snapshot taken under a %s lock", i, method)
		}
		c.Stop(t)
		inventory.SetSnapshotMethod(prev)
	}
}

// hammer runs n connections that claim a coupon of template tpl by raw
// INSERT and redeem every other one by raw UPDATE, as fast as they can,
// until the returned stop, which returns how many rows they wrote.
func hammer(e *env, tpl int64, n int) (stop func() int64) {
	var done atomic.Bool
	var rows atomic.Int64
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			ctx := context.Background()
			conn, err := e.DB.Conn(ctx)
			if err != nil {
				e.T.Error(err)
				return
			}
			defer conn.Close()
			for k := 0; !done.Load(); k++ {
				res, err := conn.ExecContext(ctx, `INSERT INTO user_coupon (template_id, user_id, channel, status, claimed_at, expires_at)
					VALUES (?, 'hammer', 'raw', 1, NOW(6), NOW(6) + INTERVAL 1 HOUR)`, tpl)
				if err == nil && k%2 == 1 {
					id, _ := res.LastInsertId()
					_, err = conn.ExecContext(ctx, `UPDATE user_coupon SET status = 2 WHERE id = ?`, id)
				}
				if err != nil {
					e.T.Error(err)
					return
				}
				rows.Add(1)
			}
		})
	}
	return func() int64 {
		done.Store(true)
		wg.Wait()
		return rows.Load()
	}
}
