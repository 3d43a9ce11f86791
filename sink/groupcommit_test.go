package sink_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/internal/mysqlconn"
	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/inventory"
	"github.com/couponlink/couponlink/sink"
)

// One sink transaction of a batch of coupon rows costs three round trips
// to MySQL on a pool that takes several statements in one query (BEGIN;
// counters, template counts and checkpoint; COMMIT), five on one that
// does not; either way the counters, the template counts and the
// checkpoint are the batch's, and a batch of coupon rows alone writes no
// Redis key (the stock is quota − claimed) while a quota change does.
func TestGroupCommitRoundTrips(t *testing.T) {
	for _, multi := range []bool{true, false} {
		t.Run(fmt.Sprintf("multiStatements=%v", multi), func(t *testing.T) {
			g := newGroupCommit(t, multi)
			before := g.trips.Load()
			g.apply(t, 3, false)
			want := int64(5)
			if multi {
				want = 3
			}
			require.Equal(t, want, g.trips.Load()-before, "round trips to MySQL of one batch")
			var issued, events, batches int64
			require.NoError(t, g.db.QueryRow(`SELECT issued_count FROM coupon_template WHERE id = ?`, g.tpl).Scan(&issued))
			require.NoError(t, g.db.QueryRow(`SELECT events_applied, batches FROM cdc_checkpoint WHERE name = 'default'`).Scan(&events, &batches))
			require.EqualValues(t, 3, issued, "the template's cached count")
			require.EqualValues(t, 3, events, "the checkpoint's events")
			require.EqualValues(t, 1, batches)
			var held int64
			require.NoError(t, g.db.QueryRow(`SELECT SUM(held) FROM inventory_counter WHERE template_id = ?`, g.tpl).Scan(&held))
			require.EqualValues(t, 3, held, "the counters")
			require.Zero(t, g.redisWrites.Load(), "a batch of coupon rows alone wrote Redis stock keys")

			g.apply(t, 1, true)
			require.EqualValues(t, 1, g.redisWrites.Load(), "a batch with a quota change writes its template's stock keys")
			stock, err := g.rdb.Get(context.Background(), g.keys.Stock(g.tpl, "app")).Int64()
			require.NoError(t, err)
			require.EqualValues(t, 99, stock, "the bucket's stock key after the quota change")
		})
	}
}

// A fenced leader's batch (another cdc took the checkpoint) fails with
// ErrFenced and leaves the counters as they were, also when its counters
// went in the same query as the checkpoint.
func TestGroupCommitFenced(t *testing.T) {
	g := newGroupCommit(t, true)
	_, err := g.db.Exec(`UPDATE cdc_checkpoint SET epoch = epoch + 1 WHERE name = 'default'`)
	require.NoError(t, err)
	require.ErrorIs(t, g.applyErr(2, false), sink.ErrFenced)
	var n int64
	require.NoError(t, g.db.QueryRow(`SELECT COUNT(*) FROM inventory_counter WHERE template_id = ? AND held > 0`, g.tpl).Scan(&n))
	require.Zero(t, n, "the fenced batch's counters were committed")
}

// BenchmarkApplyOneRowBatch is the sink's cost of one 1-row batch (a
// coupon inserted), CPU of this process per batch beside the wall time:
// the steady state of a cdc following 1-row transactions one by one.
func BenchmarkApplyOneRowBatch(b *testing.B) {
	for _, multi := range []bool{true, false} {
		b.Run(fmt.Sprintf("multiStatements=%v", multi), func(b *testing.B) {
			g := newGroupCommit(b, multi)
			cpu0 := processCPU()
			b.ResetTimer()
			for range b.N {
				if err := g.applyErr(1, false); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
			b.ReportMetric(float64(g.trips.Load())/float64(b.N), "mysql-trips/op")
		})
	}
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// groupCommit is a started sink on a database of the test's own, its
// pool's round trips to MySQL and its Redis stock writes counted.
type groupCommit struct {
	s           *sink.Sink
	db          *sql.DB
	rdb         *redis.Client
	keys        inventory.Keys
	tpl         int64
	trips       atomic.Int64
	redisWrites atomic.Int64
	next        int            // batches applied, for their coupon ids and positions
	at          canal.Position // the server's binlog position at the start: the batches end after it
}

func newGroupCommit(t testing.TB, multi bool) *groupCommit {
	ctx := context.Background()
	db, dsn := testenv.MySQL(t)
	store, err := coupon.New(coupon.Config{DB: db, Logger: testenv.QuietLogger()})
	require.NoError(t, err)
	tpl, err := store.CreateTemplate(ctx, coupon.NewTemplate{Name: "t", TotalQuota: 200, Channels: map[string]int64{"app": 100, "web": 100},
		ValidSeconds: 3600, PerUserLimit: 1000})
	require.NoError(t, err)
	g := &groupCommit{db: db, rdb: testenv.Redis(t), keys: inventory.Keys{Prefix: testenv.KeyPrefix(t)}, tpl: tpl.ID}
	cfg, err := mysqlconn.Config(dsn)
	require.NoError(t, err)
	cfg.MultiStatements = multi
	inner, err := mysql.NewConnector(cfg)
	require.NoError(t, err)
	pool := sql.OpenDB(countingConnector{inner, &g.trips})
	t.Cleanup(func() { _ = pool.Close() })
	g.rdb.AddHook(evalCounter{&g.redisWrites})
	g.s, err = sink.New(sink.Config{DB: pool, Redis: g.rdb, Keys: g.keys, Logger: testenv.QuietLogger(), Registerer: prometheus.NewRegistry()})
	require.NoError(t, err)
	g.at, err = g.s.Start(ctx, false)
	require.NoError(t, err)
	g.trips.Store(0)
	g.redisWrites.Store(0)
	return g
}

func (g *groupCommit) apply(t testing.TB, rows int, quota bool) {
	t.Helper()
	require.NoError(t, g.applyErr(rows, quota))
}

// applyErr applies a batch of rows new coupons of the app bucket (made up:
// the sink reads only the batch), with the bucket's quota change when
// quota.
func (g *groupCommit) applyErr(rows int, quota bool) error {
	g.next++
	b := &canal.Batch{Rows: rows, Txns: rows, End: canal.Position{File: g.at.File, Pos: g.at.Pos + uint32(g.next)}, EventTime: time.Now()}
	for i := range rows {
		b.Transitions = append(b.Transitions, canal.Transition{Coupon: int64(g.next*1000 + i), Template: g.tpl, Channel: "app",
			From: coupon.None, To: coupon.Available})
	}
	if quota {
		b.Rows++
		b.Quotas = append(b.Quotas, canal.QuotaChange{Template: g.tpl, Channel: "app", Quota: 100, Claimed: 1, Updated: true})
	}
	return g.s.ApplyBatch(context.Background(), b)
}

// countingConnector counts the round trips of its connections: each
// query, BEGIN and COMMIT (the pool interpolates its arguments: no
// prepare).
type countingConnector struct {
	driver.Connector
	n *atomic.Int64
}

func (c countingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	dc, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &countingConn{dc.(mysqlDriverConn), c.n}, nil
}

type mysqlDriverConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ExecerContext
	driver.QueryerContext
}

type countingConn struct {
	mysqlDriverConn
	n *atomic.Int64
}

func (c *countingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	c.n.Add(1)
	tx, err := c.mysqlDriverConn.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return countingTx{tx, c.n}, nil
}

func (c *countingConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	c.n.Add(1)
	return c.mysqlDriverConn.ExecContext(ctx, q, args)
}

func (c *countingConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	c.n.Add(1)
	return c.mysqlDriverConn.QueryContext(ctx, q, args)
}

type countingTx struct {
	driver.Tx
	n *atomic.Int64
}

func (tx countingTx) Commit() error {
	tx.n.Add(1)
	return tx.Tx.Commit()
}

// evalCounter counts the pipelines that write stock keys (an EVAL of the
// stamped write), not the probes of the epoch markers.
type evalCounter struct{ n *atomic.Int64 }

func (evalCounter) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (evalCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h evalCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if c.Name() == "eval" {
				h.n.Add(1)
				break
			}
		}
		return next(ctx, cmds)
	}
}
