package reconcile_test

import (
	"database/sql"
	"encoding/json"
	"fmt"
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
	"github.com/couponlink/couponlink/internal/cdcenv"
	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/reconcile"
)

// Settings of every test reconciler: short, so that the suite stays fast.
const (
	testQuiet   = 300 * time.Millisecond
	testCatchUp = 20 * time.Second
	testAbs     = 5 // a counter off by more than 5 and by more than 5% needs a person
)

// env is one test's database, Redis key prefix, write path and in-process
// cdc (internal/cdcenv, shared with sink's tests).
type env struct {
	*cdcenv.Env
	seq atomic.Int64
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return &env{Env: cdcenv.New(t)}
}

func (e *env) exec(q string, args ...any) sql.Result {
	e.T.Helper()
	res, err := e.DB.ExecContext(e.Ctx, q, args...)
	require.NoError(e.T, err, q)
	return res
}

func (e *env) int(q string, args ...any) int64 {
	e.T.Helper()
	var n sql.NullInt64
	require.NoError(e.T, e.DB.QueryRowContext(e.Ctx, q, args...).Scan(&n), q)
	return n.Int64
}

// reconciler makes a reconciler on the test's database and Redis prefix.
func (e *env) reconciler(mut ...func(*reconcile.Config)) (*reconcile.Reconciler, *prometheus.Registry) {
	e.T.Helper()
	reg := prometheus.NewRegistry()
	// as `couponlink reconcile` runs: with the binlog, comparing at the checkpoint
	binlog, err := canal.ConfigFromDSN(e.DSN)
	require.NoError(e.T, err)
	cfg := reconcile.Config{DB: e.DB, Redis: e.RDB, Keys: e.Keys, QuietWindow: testQuiet, CatchUpWait: testCatchUp,
		AbsThreshold: testAbs, RelThreshold: 0.05, Logger: testenv.QuietLogger(), Registerer: reg, Binlog: binlog}
	for _, m := range mut {
		m(&cfg)
	}
	r, err := reconcile.New(cfg)
	require.NoError(e.T, err)
	return r, reg
}

func (e *env) pass(r *reconcile.Reconciler) *reconcile.Report {
	e.T.Helper()
	rep, err := r.Pass(e.Ctx)
	require.NoError(e.T, err)
	e.T.Logf("task %d: %s", rep.TaskID, rep.Summary())
	// every pass is recorded: its status and differences with what was done
	task := e.task(rep.TaskID)
	require.True(e.T, task.Finished, "task %d has no finish time", rep.TaskID)
	require.Equal(e.T, rep.Status, task.Status, "task %d's recorded status", rep.TaskID)
	require.Equal(e.T, diffs(rep.Differences), diffs(task.Differences), "task %d's recorded differences", rep.TaskID)
	require.Equal(e.T, rep.Summary(), task.Summary)
	return rep
}

// claim claims n coupons of a bucket through the write path.
func (e *env) claim(tpl int64, channel string, n int) []int64 {
	e.T.Helper()
	var ids []int64
	for range n {
		k := e.seq.Add(1)
		c, err := e.Store.Claim(e.Ctx, coupon.ClaimRequest{TemplateID: tpl, UserID: fmt.Sprint("u", k%7), Channel: channel,
			RequestID: fmt.Sprint("req-", k)})
		require.NoError(e.T, err)
		ids = append(ids, c.UserCouponID)
	}
	return ids
}

func (e *env) redeem(id int64) {
	e.T.Helper()
	_, err := e.Store.Redeem(e.Ctx, coupon.RedeemRequest{UserCouponID: id, OrderID: fmt.Sprint("o-", id)})
	require.NoError(e.T, err)
}

// redisGet returns a key's integer value, or nil when it is missing.
func (e *env) redisGet(key string) *int64 {
	e.T.Helper()
	v, err := e.RDB.Get(e.Ctx, key).Int64()
	if err == redis.Nil {
		return nil
	}
	require.NoError(e.T, err)
	return &v
}

// redisDump is every key of the test's prefix with its value (strings and hashes).
func (e *env) redisDump() map[string]string {
	e.T.Helper()
	out := map[string]string{}
	for _, k := range e.PrefixKeys() {
		switch typ := e.RDB.Type(e.Ctx, k).Val(); typ {
		case "string":
			out[k] = e.RDB.Get(e.Ctx, k).Val()
		case "hash":
			out[k] = fmt.Sprint(e.RDB.HGetAll(e.Ctx, k).Val())
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
	e.T.Helper()
	rows, err := e.DB.QueryContext(e.Ctx, `SELECT COALESCE(task_id, 0), store, target, old_value, new_value, reason, mode, actor
		FROM correction_log ORDER BY id`)
	require.NoError(e.T, err)
	defer rows.Close()
	var out []correction
	for rows.Next() {
		var c correction
		var o, n sql.NullInt64
		require.NoError(e.T, rows.Scan(&c.TaskID, &c.Store, &c.Target, &o, &n, &c.Reason, &c.Mode, &c.Actor))
		if o.Valid {
			c.Old = ptr(o.Int64)
		}
		if n.Valid {
			c.New = ptr(n.Int64)
		}
		out = append(out, c)
	}
	require.NoError(e.T, rows.Err())
	return out
}

// correctionsOf returns a task's corrections as "store target old->new" (old "nil" when missing).
func (e *env) correctionsOf(task int64) []string {
	e.T.Helper()
	var out []string
	for _, c := range e.corrections() {
		if c.TaskID != task {
			continue
		}
		require.Equal(e.T, "auto", c.Mode, "correction %+v", c)
		require.Equal(e.T, "reconciler", c.Actor, "correction %+v", c)
		require.NotEmpty(e.T, c.Reason, "correction %+v", c)
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
	e.T.Helper()
	var tr taskRow
	var fin sql.NullTime
	var file sql.NullString
	var pos sql.NullInt64
	var diffs, ms, rs, summary sql.NullString
	require.NoError(e.T, e.DB.QueryRowContext(e.Ctx, `SELECT status, finished_at, binlog_file, binlog_pos, differences, mysql_snapshot,
		redis_snapshot, summary FROM reconcile_task WHERE id = ?`, id).Scan(&tr.Status, &fin, &file, &pos, &diffs, &ms, &rs, &summary))
	tr.Finished, tr.Summary = fin.Valid, summary.String
	tr.Position = file.String + ":" + strconv.FormatInt(pos.Int64, 10)
	if tr.Status == "running" {
		return tr // nothing recorded but the status
	}
	require.True(e.T, diffs.Valid, "task %d has no differences column", id)
	require.NoError(e.T, json.Unmarshal([]byte(diffs.String), &tr.Differences))
	if ms.Valid {
		require.NoError(e.T, json.Unmarshal([]byte(ms.String), &tr.MySQL))
	}
	if rs.Valid && rs.String != "null" {
		require.NoError(e.T, json.Unmarshal([]byte(rs.String), &tr.Redis))
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
