package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/internal/mysqlconn"
	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/inventory"
	"github.com/couponlink/couponlink/sink"
)

// spreadMappingYAML maps a shop sharded by user id over eight tables in
// four schemas, split over two servers: east holds shard_0 and shard_1,
// west shard_2 and shard_3, each with a copy of the template table. WEST
// is west's couponlink DSN, given through the environment.
const spreadMappingYAML = `
user_coupon: {table: "shard_{0..3}.user_coupon_{0..1}", id: id, template: tpl_id, channel: source, status: state, order: order_no, user: uid}
status: {AVAILABLE: [0], USED: [1], EXPIRED: [2], RETURNED: [3]}
redemption_log: {table: "shard_*.redemption_log_*", id: id, coupon: coupon_id, order: order_no}
template: {table: shard_0.coupon_tpl, id: id, total_quota: budget, name: name}
default_channel: legacy
sources:
  - {name: east, dsn: "EAST", user_coupon: "shard_{0..1}.user_coupon_{0..1}"}
  - {name: west, dsn_env: COUPONLINK_TEST_WEST_DSN, user_coupon: "shard_{2..3}.user_coupon_{0..1}", template: shard_2.coupon_tpl}
`

// spreadServer is one server of the spread shop: its MariaDB, a pool on
// the shop's schemas and couponlink's DSN there.
type spreadServer struct {
	t      *testing.T
	name   string
	maria  *testenv.MariaDB
	db     *sql.DB // root, no default database
	dsn    string  // couponlink's database on it
	shards [2]int  // the schemas it holds
}

// spreadShop is the shop over its two servers.
type spreadShop struct {
	t          *testing.T
	east, west *spreadServer
	ids        atomic.Int64
	mapping    string // the mapping file
}

func newSpreadShop(t *testing.T) *spreadShop {
	s := &spreadShop{t: t}
	s.ids.Store(1000)
	s.east = s.server("east", 0, 1)
	s.west = s.server("west", 2, 3)
	t.Setenv("COUPONLINK_TEST_WEST_DSN", s.west.dsn)
	yaml := strings.Replace(spreadMappingYAML, "EAST", s.east.dsn, 1)
	s.mapping = filepath.Join(t.TempDir(), "spread.yaml")
	require.NoError(t, os.WriteFile(s.mapping, []byte(yaml), 0o600))
	return s
}

// server starts a MariaDB holding the schemas shard_a and shard_b, each
// with two user_coupon_N and redemption_log_N tables, and a copy of the
// template table in shard_a.
func (s *spreadShop) server(name string, a, b int) *spreadServer {
	m := testenv.OwnMariaDB(s.t)
	db, err := mysqlconn.Open(m.ServerDSN, 4)
	require.NoError(s.t, err)
	s.t.Cleanup(func() { _ = db.Close() })
	srv := &spreadServer{t: s.t, name: name, maria: m, db: db, dsn: m.DatabaseDSN("couponlink"), shards: [2]int{a, b}}
	for _, n := range srv.shards {
		srv.exec(fmt.Sprintf("CREATE DATABASE shard_%d", n))
		for i := range 2 {
			srv.exec(fmt.Sprintf("CREATE TABLE shard_%d.user_coupon_%d (id BIGINT NOT NULL PRIMARY KEY, tpl_id BIGINT NOT NULL, "+
				"source VARCHAR(32) NULL, state TINYINT NOT NULL, order_no VARCHAR(64) NULL, uid BIGINT NOT NULL, KEY (tpl_id, source, state))", n, i))
			srv.exec(fmt.Sprintf("CREATE TABLE shard_%d.redemption_log_%d (id BIGINT NOT NULL PRIMARY KEY, coupon_id BIGINT NOT NULL, "+
				"order_no VARCHAR(64) NOT NULL, KEY (coupon_id))", n, i))
		}
	}
	srv.exec(fmt.Sprintf("CREATE TABLE shard_%d.coupon_tpl (id BIGINT NOT NULL PRIMARY KEY, name VARCHAR(64) NOT NULL, budget BIGINT NOT NULL)", a))
	srv.exec(fmt.Sprintf("INSERT INTO shard_%d.coupon_tpl VALUES (1, 'spring', 100), (2, 'summer', 50)", a))
	return srv
}

func (srv *spreadServer) exec(q string, args ...any) {
	srv.t.Helper()
	_, err := srv.db.Exec(q, args...)
	require.NoError(srv.t, err, q)
}

// shard is a user's table: user % 8 names one of the eight, and the
// server holding it.
func (s *spreadShop) shard(base string, user int64) (*spreadServer, string) {
	n := user % 8
	srv := s.east
	if n/2 >= 2 {
		srv = s.west
	}
	return srv, fmt.Sprintf("shard_%d.%s_%d", n/2, base, n%2)
}

// claim inserts a coupon of the user's in its shard, and returns its id.
func (s *spreadShop) claim(tpl int64, channel any, user int64) int64 {
	s.t.Helper()
	srv, table := s.shard("user_coupon", user)
	id := s.ids.Add(1)
	_, err := srv.db.Exec("INSERT INTO "+table+" (id, tpl_id, source, state, uid) VALUES (?, ?, ?, 0, ?)", id, tpl, channel, user)
	require.NoError(s.t, err)
	return id
}

// use marks a coupon used and writes its redemption row, in one transaction.
func (s *spreadShop) use(id, user int64) {
	s.t.Helper()
	srv, coupons := s.shard("user_coupon", user)
	_, log := s.shard("redemption_log", user)
	tx, err := srv.db.Begin()
	require.NoError(s.t, err)
	order := fmt.Sprint("o", id)
	_, err = tx.Exec("UPDATE "+coupons+" SET state = 1, order_no = ? WHERE id = ?", order, id)
	require.NoError(s.t, err)
	_, err = tx.Exec("INSERT INTO "+log+" (id, coupon_id, order_no) VALUES (?, ?, ?)", s.ids.Add(1), id, order)
	require.NoError(s.t, err)
	require.NoError(s.t, tx.Commit())
}

// expire marks a coupon expired.
func (s *spreadShop) expire(id, user int64) {
	s.t.Helper()
	srv, table := s.shard("user_coupon", user)
	_, err := srv.db.Exec("UPDATE "+table+" SET state = 2 WHERE id = ?", id)
	require.NoError(s.t, err)
}

// truth counts a server's four coupon tables by hand, per pair and state.
func (srv *spreadServer) truth(t *testing.T, into map[inventory.Pair]inventory.Counts) {
	t.Helper()
	var parts []string
	for _, n := range srv.shards {
		for i := range 2 {
			parts = append(parts, fmt.Sprintf("SELECT tpl_id, source, state FROM shard_%d.user_coupon_%d", n, i))
		}
	}
	rows, err := srv.db.Query("SELECT tpl_id, COALESCE(source, 'legacy'), state, COUNT(*) FROM (" + strings.Join(parts, " UNION ALL ") + ") u GROUP BY 1, 2, 3")
	require.NoError(t, err)
	defer rows.Close()
	state := map[int]coupon.Status{0: coupon.Available, 1: coupon.Used, 2: coupon.Expired, 3: coupon.Returned}
	for rows.Next() {
		var p inventory.Pair
		var code int
		var n int64
		require.NoError(t, rows.Scan(&p.Template, &p.Channel, &code, &n))
		c := into[p]
		require.True(t, cdctest.Add(&c, state[code], n))
		into[p] = c
	}
	require.NoError(t, rows.Err())
}

// truth is the coupons of the given servers, counted by hand.
func (s *spreadShop) truth(srvs ...*spreadServer) map[inventory.Pair]inventory.Counts {
	out := map[inventory.Pair]inventory.Counts{}
	for _, srv := range srvs {
		srv.truth(s.t, out)
	}
	return out
}

// startCDC runs the cdc of one source in this process, as `couponlink
// cdc -source NAME` does: the source's mapping, its server, its name as
// the checkpoint's; opts change its configuration. It returns stop.
func (s *spreadShop) startCDC(srv *spreadServer, opts ...func(*sink.Config)) func() {
	t := s.t
	m, err := canal.ReadMappingFile(s.mapping)
	require.NoError(t, err)
	sm, dsn, err := m.OneSource(srv.name)
	require.NoError(t, err)
	require.Equal(t, srv.dsn, dsn)
	db, err := mysqlconn.Open(dsn, 8)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	cfg := sink.Config{DB: db, Mode: sink.ModeLegacy, Mapping: sm, Name: srv.name, RedisMode: inventory.RedisOff,
		Logger: testenv.QuietLogger(), Registerer: prometheus.NewRegistry(), RedemptionGrace: 2 * time.Second}
	for _, o := range opts {
		o(&cfg)
	}
	sk, err := sink.New(cfg)
	require.NoError(t, err)
	tc, err := canal.ConfigFromDSN(dsn)
	require.NoError(t, err)
	tc.BatchWait, tc.HeartbeatPeriod = 5*time.Millisecond, 200*time.Millisecond
	d := &sink.Daemon{Sink: sk, Tailer: tc, RetryWait: 100 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		require.NoError(t, <-done)
	}
	t.Cleanup(stop)
	return stop
}

// caughtUp waits until the source's checkpoint reaches its server's
// binlog end as of the call.
func (srv *spreadServer) caughtUp(t *testing.T) {
	t.Helper()
	db, err := mysqlconn.Open(srv.dsn, 2)
	require.NoError(t, err)
	defer db.Close()
	ctx := context.Background()
	target, err := canal.CurrentPosition(ctx, db)
	require.NoError(t, err)
	cdctest.WaitFor(t, 60*time.Second, "source "+srv.name+" catches up", func() bool {
		cp, found, err := inventory.LoadCheckpoint(ctx, db, srv.name)
		require.NoError(t, err)
		return found && cp.Pos.File != "" && cp.Pos.Compare(target) >= 0
	})
}

// bootstrapped waits until the source's cdc has its checkpoint: what is
// written from now on is streamed.
func (srv *spreadServer) bootstrapped(t *testing.T) {
	t.Helper()
	db, err := mysqlconn.Open(srv.dsn, 2)
	require.NoError(t, err)
	defer db.Close()
	cdctest.WaitFor(t, 60*time.Second, "source "+srv.name+" bootstrapped", func() bool {
		_, found, err := inventory.LoadCheckpoint(context.Background(), db, srv.name)
		require.NoError(t, err)
		return found
	})
}
