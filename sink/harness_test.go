package sink_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/inventory"
	"github.com/couponlink/couponlink/sink"
)

// env is one test's database, Redis prefix and write path.
type env struct {
	t     *testing.T
	db    *sql.DB
	dsn   string
	rdb   *redis.Client
	keys  inventory.Keys
	store *coupon.Store
}

func newEnv(t *testing.T) *env {
	t.Helper()
	db, dsn := testenv.MySQL(t)
	store, err := coupon.New(coupon.Config{DB: db})
	require.NoError(t, err)
	return &env{t: t, db: db, dsn: dsn, rdb: testenv.Redis(t), keys: inventory.Keys{Prefix: testenv.KeyPrefix(t)}, store: store}
}

func testLogger(t *testing.T) *slog.Logger {
	if os.Getenv("COUPONLINK_TEST_VERBOSE") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// cdc is an in-process cdc daemon.
type cdc struct {
	cancel   context.CancelFunc
	done     chan error
	reg      *prometheus.Registry
	finished bool
}

func (e *env) startCDC(mapping *canal.Mapping, mut ...func(*sink.Config, *sink.Daemon)) *cdc {
	e.t.Helper()
	reg := prometheus.NewRegistry()
	cfg := sink.Config{DB: e.db, Mapping: mapping, Redis: e.rdb, Keys: e.keys, Logger: testLogger(e.t), Registerer: reg,
		RedemptionGrace: 2 * time.Second}
	tc, err := canal.ConfigFromDSN(e.dsn)
	require.NoError(e.t, err)
	tc.BatchWait = 5 * time.Millisecond
	tc.HeartbeatPeriod = 200 * time.Millisecond
	d := &sink.Daemon{Tailer: tc, RetryWait: 100 * time.Millisecond}
	for _, m := range mut {
		m(&cfg, d)
	}
	s, err := sink.New(cfg)
	require.NoError(e.t, err)
	d.Sink = s
	ctx, cancel := context.WithCancel(context.Background())
	c := &cdc{cancel: cancel, done: make(chan error, 1), reg: reg}
	go func() { c.done <- d.Run(ctx) }()
	e.t.Cleanup(func() { c.stop(e.t) })
	return c
}

func (c *cdc) stop(t *testing.T) {
	t.Helper()
	if c.finished {
		return
	}
	c.cancel()
	c.finished = true
	select {
	case err := <-c.done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("cdc did not stop within 30 s")
	}
}

// result waits for Daemon.Run to return by itself and returns its error.
func (c *cdc) result(t *testing.T, within time.Duration) error {
	t.Helper()
	select {
	case err := <-c.done:
		c.finished = true
		c.cancel()
		return err
	case <-time.After(within):
		t.Fatalf("cdc did not stop by itself within %s", within)
		return nil
	}
}

// running reports whether Daemon.Run has not returned yet.
func (c *cdc) running() bool {
	if c.finished {
		return false
	}
	select {
	case err := <-c.done:
		c.done <- err // keep it for stop or result
		return false
	default:
		return true
	}
}

// waitCheckpoint waits until the saved checkpoint reaches the server's
// current binlog end: every write made before the call is applied.
//
// It waits twice: the cdc writes release rows (and claimed − 1) in a
// batch's own transaction, after the writer's last position; the second
// round applies those. A release never causes another, so two suffice.
func (e *env) waitCheckpoint() canal.Position {
	e.t.Helper()
	e.waitCheckpointOnce()
	return e.waitCheckpointOnce()
}

func (e *env) waitCheckpointOnce() canal.Position {
	e.t.Helper()
	ctx := context.Background()
	target, err := canal.CurrentPosition(ctx, e.db)
	require.NoError(e.t, err)
	deadline := time.Now().Add(60 * time.Second)
	for {
		cp, found, err := inventory.LoadCheckpoint(ctx, e.db, "default")
		require.NoError(e.t, err)
		if found && cp.Pos.File != "" && cp.Pos.Compare(target) >= 0 {
			return cp.Pos
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("checkpoint %s did not reach %s within 60 s", cp.Pos, target)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition, not waiting for luck
	}
}

// truth counts user_coupon (and release flows) per pair and state.
func (e *env) truth() map[inventory.Pair]inventory.Counts {
	e.t.Helper()
	return cdctest.Truth(e.t, e.db)
}

// counters reads inventory_counter, without all-zero rows.
func (e *env) counters() map[inventory.Pair]inventory.Counts {
	e.t.Helper()
	return cdctest.Counters(e.t, e.db)
}

// assertTruth checks invariants 3 and 4: counters == GROUP BY at the
// checkpoint (writes quiesced), and Redis == claimable.
//
// The cdc may commit work of its own after the wait (a release round of
// due slots, counted only when it reads the round back from the binlog),
// so a difference is looked at again after the next catch-up, a few times;
// a counter that is wrong stays wrong and fails.
func (e *env) assertTruth(withRedis bool) {
	e.t.Helper()
	var truth, counters map[inventory.Pair]inventory.Counts
	for try := 0; try < 5; try++ {
		e.waitCheckpoint()
		if truth, counters = e.truth(), e.counters(); reflect.DeepEqual(truth, counters) {
			break
		}
	}
	require.Equal(e.t, truth, counters, "derived counters differ from GROUP BY over user_coupon")
	if withRedis {
		e.assertRedis()
	}
}

func (e *env) assertRedis() {
	e.t.Helper()
	ctx := context.Background()
	rows, err := e.db.Query(`SELECT template_id, channel, quota - claimed FROM channel_quota`)
	require.NoError(e.t, err)
	defer rows.Close()
	want := map[string]string{}
	total := map[int64]int64{}
	for rows.Next() {
		var tpl, claimable int64
		var ch string
		require.NoError(e.t, rows.Scan(&tpl, &ch, &claimable))
		want[e.keys.Stock(tpl, ch)] = strconv.FormatInt(claimable, 10)
		total[tpl] += claimable
	}
	for tpl, n := range total {
		want[e.keys.TemplateStock(tpl)] = strconv.FormatInt(n, 10)
	}
	// Redis is written after the checkpoint commit: wait for it to settle
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := map[string]string{}
		for k := range want {
			v, err := e.rdb.Get(ctx, k).Result()
			if err == nil {
				got[k] = v
			}
		}
		if fmt.Sprint(got) == fmt.Sprint(want) {
			return
		}
		if time.Now().After(deadline) {
			require.Equal(e.t, want, got, "Redis stock keys differ from quota - claimed")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (e *env) template(channels map[string]int64, valid time.Duration) int64 {
	e.t.Helper()
	var total int64
	for _, q := range channels {
		total += q
	}
	tpl, err := e.store.CreateTemplate(context.Background(), coupon.NewTemplate{Name: "t", TotalQuota: total,
		Channels: channels, ValidSeconds: int64(valid / time.Second), PerUserLimit: 1000})
	require.NoError(e.t, err)
	return tpl.ID
}

func (e *env) anomalies() map[string]int {
	e.t.Helper()
	out := map[string]int{}
	rows, err := e.db.Query(`SELECT kind, COUNT(*) FROM cdc_anomaly GROUP BY kind`)
	require.NoError(e.t, err)
	defer rows.Close()
	for rows.Next() {
		var k string
		var n int
		require.NoError(e.t, rows.Scan(&k, &n))
		out[k] = n
	}
	return out
}
