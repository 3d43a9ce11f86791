package reconcile_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
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
	"github.com/couponlink/couponlink/reconcile"
	"github.com/couponlink/couponlink/sink"
)

// Settings of every test reconciler: short, so that the suite stays fast.
const (
	testQuiet   = 300 * time.Millisecond
	testCatchUp = 20 * time.Second
	testAbs     = 5 // a counter off by more than 5 and by more than 5% needs a person
)

// env is one test's database, Redis key prefix and write path.
type env struct {
	t      *testing.T
	ctx    context.Context
	db     *sql.DB
	dsn    string
	dbName string
	rdb    *redis.Client
	keys   inventory.Keys
	store  *coupon.Store
	seq    atomic.Int64
	cdc    *cdc // the last one started
}

func newEnv(t *testing.T) *env {
	t.Helper()
	db, dsn := testenv.MySQL(t)
	store, err := coupon.New(coupon.Config{DB: db, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	e := &env{t: t, ctx: context.Background(), db: db, dsn: dsn, rdb: testenv.Redis(t),
		keys: inventory.Keys{Prefix: testenv.KeyPrefix(t)}, store: store}
	require.NoError(t, db.QueryRow("SELECT DATABASE()").Scan(&e.dbName))
	t.Cleanup(func() {
		// the shared Redis: remove this test's keys only
		if keys := e.prefixKeys(); len(keys) > 0 {
			_ = e.rdb.Del(context.Background(), keys...).Err()
		}
	})
	return e
}

func testLogger() *slog.Logger {
	if os.Getenv("COUPONLINK_TEST_VERBOSE") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

func (e *env) exec(q string, args ...any) sql.Result {
	e.t.Helper()
	res, err := e.db.ExecContext(e.ctx, q, args...)
	require.NoError(e.t, err, q)
	return res
}

func (e *env) int(q string, args ...any) int64 {
	e.t.Helper()
	var n sql.NullInt64
	require.NoError(e.t, e.db.QueryRowContext(e.ctx, q, args...).Scan(&n), q)
	return n.Int64
}

// cdc is an in-process cdc daemon (sink.Daemon) on the test's database.
type cdc struct {
	cancel context.CancelFunc
	done   chan error
	closed bool
}

func (e *env) startCDC(m *canal.Mapping) *cdc {
	e.t.Helper()
	cfg := sink.Config{DB: e.db, Mapping: m, Redis: e.rdb, Keys: e.keys, Logger: testLogger(),
		Registerer: prometheus.NewRegistry(), RedemptionGrace: 2 * time.Second}
	tc, err := canal.ConfigFromDSN(e.dsn)
	require.NoError(e.t, err)
	tc.BatchWait = 5 * time.Millisecond
	tc.HeartbeatPeriod = 200 * time.Millisecond
	if m != nil && m.Schema != "" {
		tc.Schema = "" // the mapping names it
	}
	s, err := sink.New(cfg)
	require.NoError(e.t, err)
	d := &sink.Daemon{Sink: s, Tailer: tc, RetryWait: 100 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	c := &cdc{cancel: cancel, done: make(chan error, 1)}
	go func() { c.done <- d.Run(ctx) }()
	e.t.Cleanup(func() { c.stop(e.t) })
	e.cdc = c
	return c
}

func (c *cdc) stop(t *testing.T) {
	t.Helper()
	if c.closed {
		return
	}
	c.closed = true
	c.cancel()
	select {
	case err := <-c.done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("cdc did not stop within 30 s")
	}
}

// waitCheckpoint waits until the cdc's checkpoint reaches the server's
// binlog end as of the call: every write made before is applied.
func (e *env) waitCheckpoint() canal.Position {
	e.t.Helper()
	target, err := canal.CurrentPosition(e.ctx, e.db)
	require.NoError(e.t, err)
	var cp inventory.Checkpoint
	cdctest.WaitFor(e.t, 60*time.Second, "the cdc's checkpoint reaches "+target.String(), func() bool {
		var found bool
		cp, found, err = inventory.LoadCheckpoint(e.ctx, e.db, "default")
		require.NoError(e.t, err)
		return found && cp.Pos.File != "" && cp.Pos.Compare(target) >= 0
	})
	return cp.Pos
}

// settle waits for the cdc to apply every write so far, and (owner mode)
// for the stock keys it writes after its checkpoint commit.
func (e *env) settle() {
	e.t.Helper()
	e.waitCheckpoint()
	want := e.ownerKeys()
	cdctest.WaitFor(e.t, 30*time.Second, "Redis stock keys equal quota - claimed", func() bool {
		for k, v := range want {
			got, err := e.rdb.Get(e.ctx, k).Int64()
			if err != nil || got != v {
				return false
			}
		}
		return true
	})
	// the cdc writes a release's keys as soon as the release commits, before
	// it reads the release back from the binlog (and counts it): catch up
	// to a position past the release too
	e.waitCheckpoint()
}

// ownerKeys is what couponlink's stock keys must hold: quota - claimed per
// bucket, and the template's sum.
func (e *env) ownerKeys() map[string]int64 {
	e.t.Helper()
	rows, err := e.db.QueryContext(e.ctx, `SELECT template_id, channel, quota - claimed FROM channel_quota`)
	require.NoError(e.t, err)
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var tpl, n int64
		var ch string
		require.NoError(e.t, rows.Scan(&tpl, &ch, &n))
		out[e.keys.Stock(tpl, ch)] = n
		out[e.keys.TemplateStock(tpl)] += n
	}
	require.NoError(e.t, rows.Err())
	return out
}

// reconciler makes a reconciler on the test's database and Redis prefix.
func (e *env) reconciler(mut ...func(*reconcile.Config)) (*reconcile.Reconciler, *prometheus.Registry) {
	e.t.Helper()
	reg := prometheus.NewRegistry()
	// as `couponlink reconcile` runs: with the binlog, comparing at the checkpoint
	binlog, err := canal.ConfigFromDSN(e.dsn)
	require.NoError(e.t, err)
	cfg := reconcile.Config{DB: e.db, Redis: e.rdb, Keys: e.keys, QuietWindow: testQuiet, CatchUpWait: testCatchUp,
		AbsThreshold: testAbs, RelThreshold: 0.05, Logger: testLogger(), Registerer: reg, Binlog: binlog}
	for _, m := range mut {
		m(&cfg)
	}
	r, err := reconcile.New(cfg)
	require.NoError(e.t, err)
	return r, reg
}

func (e *env) pass(r *reconcile.Reconciler) *reconcile.Report {
	e.t.Helper()
	rep, err := r.Pass(e.ctx)
	require.NoError(e.t, err)
	e.t.Logf("task %d: %s", rep.TaskID, rep.Summary())
	// every pass is recorded: its status and differences with what was done
	task := e.task(rep.TaskID)
	require.True(e.t, task.Finished, "task %d has no finish time", rep.TaskID)
	require.Equal(e.t, rep.Status, task.Status, "task %d's recorded status", rep.TaskID)
	require.Equal(e.t, diffs(rep.Differences), diffs(task.Differences), "task %d's recorded differences", rep.TaskID)
	require.Equal(e.t, rep.Summary(), task.Summary)
	return rep
}

func (e *env) template(channels map[string]int64) int64 {
	e.t.Helper()
	var total int64
	for _, q := range channels {
		total += q
	}
	tpl, err := e.store.CreateTemplate(e.ctx, coupon.NewTemplate{Name: "t", TotalQuota: total, Channels: channels,
		ValidSeconds: 3600, PerUserLimit: 1000})
	require.NoError(e.t, err)
	return tpl.ID
}

// claim claims n coupons of a bucket through the write path.
func (e *env) claim(tpl int64, channel string, n int) []int64 {
	e.t.Helper()
	var ids []int64
	for range n {
		k := e.seq.Add(1)
		c, err := e.store.Claim(e.ctx, coupon.ClaimRequest{TemplateID: tpl, UserID: fmt.Sprint("u", k%7), Channel: channel,
			RequestID: fmt.Sprint("req-", k)})
		require.NoError(e.t, err)
		ids = append(ids, c.UserCouponID)
	}
	return ids
}

func (e *env) redeem(id int64) {
	e.t.Helper()
	_, err := e.store.Redeem(e.ctx, coupon.RedeemRequest{UserCouponID: id, OrderID: fmt.Sprint("o-", id)})
	require.NoError(e.t, err)
}

// counters reads inventory_counter (all-zero rows included).
func (e *env) counters() map[inventory.Pair]inventory.Counts {
	e.t.Helper()
	return cdctest.CounterRows(e.t, e.db)
}

// truth counts user_coupon by pair and state (reference schema), and releases.
func (e *env) truth() map[inventory.Pair]inventory.Counts {
	e.t.Helper()
	snap, err := inventory.TakeSnapshot(e.ctx, e.db, canal.DefaultMapping())
	require.NoError(e.t, err)
	out := map[inventory.Pair]inventory.Counts{}
	for p, c := range snap.Counts {
		out[p] = *c
	}
	return out
}

// templateCache reads coupon_template's cached counts: issued, used, expired.
func (e *env) templateCache(tpl int64) [3]int64 {
	e.t.Helper()
	var v [3]int64
	require.NoError(e.t, e.db.QueryRowContext(e.ctx, `SELECT issued_count, used_count, expired_count FROM coupon_template WHERE id = ?`, tpl).
		Scan(&v[0], &v[1], &v[2]))
	return v
}

// redisGet returns a key's integer value, or nil when it is missing.
func (e *env) redisGet(key string) *int64 {
	e.t.Helper()
	v, err := e.rdb.Get(e.ctx, key).Int64()
	if err == redis.Nil {
		return nil
	}
	require.NoError(e.t, err)
	return &v
}

// prefixKeys lists the test's keys (SCAN: the Redis is shared).
func (e *env) prefixKeys() []string {
	var out []string
	it := e.rdb.Scan(context.Background(), 0, e.keys.Prefix+"*", 1000).Iterator()
	for it.Next(context.Background()) {
		out = append(out, it.Val())
	}
	return out
}

// redisDump is every key of the test's prefix with its value (strings and hashes).
func (e *env) redisDump() map[string]string {
	e.t.Helper()
	out := map[string]string{}
	for _, k := range e.prefixKeys() {
		switch typ := e.rdb.Type(e.ctx, k).Val(); typ {
		case "string":
			out[k] = e.rdb.Get(e.ctx, k).Val()
		case "hash":
			out[k] = fmt.Sprint(e.rdb.HGetAll(e.ctx, k).Val())
		default:
			out[k] = typ
		}
	}
	return out
}

// correction is one correction_log row.
type correction struct {
	TaskID   int64
	Store    string
	Target   string
	Old, New *int64
	Reason   string
	Mode     string
	Actor    string
}

func (e *env) corrections() []correction {
	e.t.Helper()
	rows, err := e.db.QueryContext(e.ctx, `SELECT COALESCE(task_id, 0), store, target, old_value, new_value, reason, mode, actor
		FROM correction_log ORDER BY id`)
	require.NoError(e.t, err)
	defer rows.Close()
	var out []correction
	for rows.Next() {
		var c correction
		var o, n sql.NullInt64
		require.NoError(e.t, rows.Scan(&c.TaskID, &c.Store, &c.Target, &o, &n, &c.Reason, &c.Mode, &c.Actor))
		if o.Valid {
			c.Old = ptr(o.Int64)
		}
		if n.Valid {
			c.New = ptr(n.Int64)
		}
		out = append(out, c)
	}
	require.NoError(e.t, rows.Err())
	return out
}

// correctionsOf returns a task's corrections as "store target old->new" (old "nil" when missing).
func (e *env) correctionsOf(task int64) []string {
	e.t.Helper()
	var out []string
	for _, c := range e.corrections() {
		if c.TaskID != task {
			continue
		}
		require.Equal(e.t, "auto", c.Mode, "correction %+v", c)
		require.Equal(e.t, "reconciler", c.Actor, "correction %+v", c)
		require.NotEmpty(e.t, c.Reason, "correction %+v", c)
		out = append(out, fmt.Sprintf("%s %s %s->%s", c.Store, c.Target, str(c.Old), str(c.New)))
	}
	return out
}

// taskRow is one reconcile_task row.
type taskRow struct {
	Status      string
	Finished    bool
	Position    string
	Differences []reconcile.Difference
	MySQL       map[string]any
	Redis       map[string]any // an integer (float64), nil when missing, what it held when not an integer
	Summary     string
}

func (e *env) task(id int64) taskRow {
	e.t.Helper()
	var tr taskRow
	var fin sql.NullTime
	var file sql.NullString
	var pos sql.NullInt64
	var diffs, ms, rs, summary sql.NullString
	require.NoError(e.t, e.db.QueryRowContext(e.ctx, `SELECT status, finished_at, binlog_file, binlog_pos, differences, mysql_snapshot,
		redis_snapshot, summary FROM reconcile_task WHERE id = ?`, id).Scan(&tr.Status, &fin, &file, &pos, &diffs, &ms, &rs, &summary))
	tr.Finished, tr.Summary = fin.Valid, summary.String
	tr.Position = file.String + ":" + strconv.FormatInt(pos.Int64, 10)
	if tr.Status == "running" {
		return tr // nothing recorded but the status
	}
	require.True(e.t, diffs.Valid, "task %d has no differences column", id)
	require.NoError(e.t, json.Unmarshal([]byte(diffs.String), &tr.Differences))
	if ms.Valid {
		require.NoError(e.t, json.Unmarshal([]byte(ms.String), &tr.MySQL))
	}
	if rs.Valid && rs.String != "null" {
		require.NoError(e.t, json.Unmarshal([]byte(rs.String), &tr.Redis))
	}
	return tr
}

// diff is a difference in short: "store target expected found action"
// (found: the value, nil when missing, or what a key held that is not an integer).
func diff(d reconcile.Difference) string {
	found := str(d.Found)
	if d.FoundRaw != "" {
		found = d.FoundRaw
	}
	return fmt.Sprintf("%s %s %d %s %s", d.Store, d.Target, d.Expected, found, d.Action)
}

func diffs(ds []reconcile.Difference) []string {
	out := []string{}
	for _, d := range ds {
		out = append(out, diff(d))
	}
	return out
}

// find returns the difference with that store and target.
func find(t *testing.T, ds []reconcile.Difference, store, target string) reconcile.Difference {
	t.Helper()
	for _, d := range ds {
		if d.Store == store && d.Target == target {
			return d
		}
	}
	t.Fatalf("no difference %s %s in %v", store, target, diffs(ds))
	return reconcile.Difference{}
}

func str(v *int64) string {
	if v == nil {
		return "nil"
	}
	return strconv.FormatInt(*v, 10)
}

func ptr(v int64) *int64 { return &v }

func target(tpl int64, parts ...string) string {
	return strconv.FormatInt(tpl, 10) + "/" + strings.Join(parts, "/")
}

// series lists every series of a metric as "k=v,k=v value".
func series(t *testing.T, g prometheus.Gatherer, name string) []string {
	t.Helper()
	out := []string{}
	for _, s := range cdctest.AllSeries(t, g, name) {
		out = append(out, fmt.Sprintf("%s %g", s.Key(), s.Value))
	}
	return out
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
