// Package cdcenv is the environment the tests of sink and reconcile share:
// a fresh database with the write path, a Redis key prefix of its own, a
// cdc daemon run in process (cdc.go), and the waits and assertions on what
// the cdc wrote. It is not used by production code.
package cdcenv

import (
	"context"
	"database/sql"
	"maps"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/internal/mysqlconn"
	"github.com/couponlink/couponlink/internal/redisconn"
	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/inventory"
)

// Env is one test's database, Redis key prefix and write path.
type Env struct {
	T      *testing.T
	Ctx    context.Context
	DB     *sql.DB
	DSN    string
	DBName string
	RDB    redis.UniversalClient
	Keys   inventory.Keys
	Store  *coupon.Store
	CDC    *CDC // the last one started
	// Checkpoint is the name of the cdc's checkpoint the waits read;
	// "default" unless the test names its cdc otherwise.
	Checkpoint string
}

// New makes a migrated database of the test's own and a key prefix on the
// shared Redis, whose keys are deleted when the test ends.
func New(t *testing.T) *Env {
	t.Helper()
	db, dsn := testenv.MySQL(t)
	return On(t, db, dsn)
}

// On is New on a migrated database the test made itself (db is its pool,
// dsn its DSN).
func On(t *testing.T, db *sql.DB, dsn string) *Env {
	t.Helper()
	store, err := coupon.New(coupon.Config{DB: db, Logger: testenv.QuietLogger()})
	require.NoError(t, err)
	rdb := testenv.Redis(t)
	e := &Env{T: t, Ctx: context.Background(), DB: db, DSN: dsn, RDB: rdb,
		Keys: inventory.Keys{Prefix: testenv.KeyPrefix(t)}, Store: store, Checkpoint: "default"}
	require.NoError(t, db.QueryRow("SELECT DATABASE()").Scan(&e.DBName))
	t.Cleanup(func() {
		// the shared Redis (a test may have pointed RDB at another): this test's keys only
		if keys := prefixKeys(rdb, e.Keys.Prefix); len(keys) > 0 {
			_ = rdb.Del(context.Background(), keys...).Err()
		}
	})
	return e
}

// Template creates a template through the write path, with one bucket per
// channel; its total quota is their sum.
func (e *Env) Template(channels map[string]int64, valid time.Duration) int64 {
	e.T.Helper()
	var total int64
	for _, q := range channels {
		total += q
	}
	tpl, err := e.Store.CreateTemplate(e.Ctx, coupon.NewTemplate{Name: "t", TotalQuota: total,
		Channels: channels, ValidSeconds: int64(valid / time.Second), PerUserLimit: 1000})
	require.NoError(e.T, err)
	return tpl.ID
}

// Truth counts user_coupon (and release flows) per pair and state.
func (e *Env) Truth() map[inventory.Pair]inventory.Counts {
	e.T.Helper()
	return cdctest.Truth(e.T, e.DB)
}

// Counters reads inventory_counter without its all-zero rows: it compares
// equal to Truth.
func (e *Env) Counters() map[inventory.Pair]inventory.Counts {
	e.T.Helper()
	return cdctest.Counters(e.T, e.DB)
}

// CounterRows reads every inventory_counter row, all-zero ones included.
func (e *Env) CounterRows() map[inventory.Pair]inventory.Counts {
	e.T.Helper()
	return cdctest.CounterRows(e.T, e.DB)
}

// TemplateCaches reads coupon_template's cached counts per template:
// issued, used, expired.
func (e *Env) TemplateCaches() map[int64][3]int64 {
	e.T.Helper()
	return e.Triples(`SELECT id, issued_count, used_count, expired_count FROM coupon_template`)
}

// Triples reads the rows (id, a, b, c) of query as id -> [a, b, c].
func (e *Env) Triples(query string) map[int64][3]int64 {
	e.T.Helper()
	rows, err := e.DB.QueryContext(e.Ctx, query)
	require.NoError(e.T, err)
	defer rows.Close()
	out := map[int64][3]int64{}
	for rows.Next() {
		var id int64
		var v [3]int64
		require.NoError(e.T, rows.Scan(&id, &v[0], &v[1], &v[2]))
		out[id] = v
	}
	require.NoError(e.T, rows.Err())
	return out
}

// WaitCheckpoint waits until the saved checkpoint reaches the server's
// current binlog end: every write made before the call is applied.
//
// It waits twice: the cdc writes release rows (and claimed − 1) in a
// batch's own transaction, after the writer's last position; the second
// round applies those. A release never causes another, so two suffice.
func (e *Env) WaitCheckpoint() canal.Position {
	e.T.Helper()
	e.WaitCheckpointOnce()
	return e.WaitCheckpointOnce()
}

// WaitCheckpointOnce waits until the saved checkpoint reaches the binlog
// end as of the call.
func (e *Env) WaitCheckpointOnce() canal.Position {
	e.T.Helper()
	target, err := canal.CurrentPosition(e.Ctx, e.DB)
	require.NoError(e.T, err)
	deadline := time.Now().Add(60 * time.Second)
	for {
		cp, found, err := inventory.LoadCheckpoint(e.Ctx, e.DB, e.Checkpoint)
		require.NoError(e.T, err)
		if found && cp.Pos.File != "" && cp.Pos.Compare(target) >= 0 {
			return cp.Pos
		}
		if time.Now().After(deadline) {
			e.T.Fatalf("checkpoint %s did not reach %s within 60 s", cp.Pos, target)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition, not waiting for luck
	}
}

// OwnerKeys is what couponlink's stock keys must hold (owner mode):
// quota - claimed per bucket, and the template's sum.
func (e *Env) OwnerKeys() map[string]int64 {
	e.T.Helper()
	rows, err := e.DB.QueryContext(e.Ctx, `SELECT template_id, channel, quota - claimed FROM channel_quota`)
	require.NoError(e.T, err)
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var tpl, n int64
		var ch string
		require.NoError(e.T, rows.Scan(&tpl, &ch, &n))
		out[e.Keys.Stock(tpl, ch)] = n
		out[e.Keys.TemplateStock(tpl)] += n
	}
	require.NoError(e.T, rows.Err())
	return out
}

// AssertRedis waits until the stock keys hold OwnerKeys (the cdc writes
// Redis after its checkpoint commit), and fails with the difference when
// they do not within 30 s.
func (e *Env) AssertRedis() {
	e.T.Helper()
	want := map[string]string{}
	for k, v := range e.OwnerKeys() {
		want[k] = strconv.FormatInt(v, 10)
	}
	got := map[string]string{}
	deadline := time.Now().Add(30 * time.Second)
	for {
		clear(got)
		for k := range want {
			if v, err := e.RDB.Get(e.Ctx, k).Result(); err == nil {
				got[k] = v
			}
		}
		if maps.Equal(got, want) || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	require.Equal(e.T, want, got, "Redis stock keys differ from quota - claimed")
}

// Settle waits for the cdc to apply every write so far and for the stock
// keys it writes after its checkpoint commit (owner mode).
func (e *Env) Settle() {
	e.T.Helper()
	e.WaitCheckpoint()
	e.AssertRedis()
	// the cdc writes a release's keys as soon as the release commits, before
	// it reads the release back from the binlog (and counts it): catch up
	// to a position past the release too
	e.WaitCheckpoint()
}

// PrefixKeys lists the test's keys (SCAN: the Redis is shared).
func (e *Env) PrefixKeys() []string { return prefixKeys(e.RDB, e.Keys.Prefix) }

func prefixKeys(rdb redis.UniversalClient, prefix string) []string {
	out, _ := redisconn.ScanPrefix(context.Background(), rdb, prefix) // every master of a cluster
	return out
}

// OwnServer is an Env on a MariaDB of the test's own
// (testenv.OwnMariaDB), in a migrated database couponlink: for tests that
// stop and restart the server, or need several servers.
func OwnServer(t *testing.T) (*Env, *testenv.MariaDB) {
	t.Helper()
	server := testenv.OwnMariaDB(t)
	dsn := server.Couponlink()
	db, err := mysqlconn.Open(dsn, 16)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return On(t, db, dsn), server
}
