package sink_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"regexp"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/internal/cdcenv"
	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/internal/mysqlconn"
	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/migrations"
)

// topology is a private MariaDB primary and its GTID replica (server ids
// 1 and 2, domain 0, log_slave_updates), with couponlink's database
// migrated on the primary and replicated.
type topology struct {
	primary, replica *testenv.MariaDB
}

func startTopology(t *testing.T) *topology {
	t.Helper()
	tp := &topology{primary: testenv.OwnMariaDBWithID(t, 1), replica: testenv.OwnMariaDBWithID(t, 2)}
	tp.replica.Replicate(tp.primary)
	_, err := migrations.Up(dbDSN(t, tp.primary.ServerDSN, "couponlink"))
	require.NoError(t, err)
	tp.replica.WaitReplicated(tp.primary, 30*time.Second)

	return tp
}

// dbDSN is serverDSN with the database name db (and the user and
// password of user, when not empty).
func dbDSN(t *testing.T, serverDSN, db string) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(serverDSN)
	require.NoError(t, err)
	cfg.DBName = db
	return cfg.FormatDSN()
}

// envOn is a test env on dsn's database, with prefix as its Redis key
// prefix when not empty (the env of the same data on another server).
func envOn(t *testing.T, dsn, prefix string) *env {
	t.Helper()
	db, err := mysqlconn.Open(dsn, 16)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	e := &env{cdcenv.On(t, db, dsn)}
	if prefix != "" {
		e.Keys.Prefix = prefix
	}
	return e
}

// steadyLoad claims, redeems and refunds through the write path on
// workers goroutines until stop is called or the server fails; it counts
// the operations the server acknowledged.
type steadyLoad struct {
	acked atomic.Int64
	stop  atomic.Bool
	wg    sync.WaitGroup
}

func startSteadyLoad(e *env, tpl int64, workers int) *steadyLoad {
	l := &steadyLoad{}
	for k := range workers {
		l.wg.Go(func() {
			ctx := context.Background()
			for n := 0; !l.stop.Load(); n++ {
				id := fmt.Sprintf("w%d-%d-%d", k, n, time.Now().UnixNano())
				cp, err := e.Store.Claim(ctx, coupon.ClaimRequest{TemplateID: tpl, UserID: "u" + id, Channel: []string{"app", "web"}[n%2], RequestID: "r" + id})
				if err != nil {
					return // the primary is gone (or the bucket is empty)
				}
				l.acked.Add(1)
				if n%3 == 0 {
					if _, err := e.Store.Redeem(ctx, coupon.RedeemRequest{UserCouponID: cp.UserCouponID, OrderID: "o" + id}); err != nil {
						return
					}
					l.acked.Add(1)
					if n%9 == 0 {
						if _, err := e.Store.Refund(ctx, coupon.RefundRequest{UserCouponID: cp.UserCouponID, OrderID: "o" + id, Mode: coupon.RefundRecycle}); err != nil {
							return
						}
						l.acked.Add(1)
					}
				}
			}
		})
	}
	return l
}

func (l *steadyLoad) end() int64 {
	l.stop.Store(true)
	l.wg.Wait()
	return l.acked.Load()
}

// Primary failover: the cdc follows a primary under load; the replica's
// replication is cut for a while (async replication loses the tail), then
// the primary is killed (-9). The replica is promoted and the cdc started
// again on it: it resumes from the checkpoint the replica holds — older
// than the one the dead primary had, but written in the transaction of the
// counters it holds — from the replica's own binlog, where
// log_slave_updates logged the replicated transactions under their
// original GTIDs. The counters equal the truth on the new primary.
func TestPrimaryFailoverResumesFromReplicatedCheckpoint(t *testing.T) {
	tp := startTopology(t)
	e := envOn(t, dbDSN(t, tp.primary.ServerDSN, "couponlink"), "")
	tpl := e.Template(map[string]int64{"app": 1_000_000, "web": 1_000_000, "sms": 1_000}, time.Hour)
	r := newCDCRunner(t, e, testenv.RedisAddr(t))
	p := r.start()
	e.WaitCheckpoint()
	t0 := time.Now()
	defer func() { t.Logf("test phases took %s", time.Since(t0)) }()
	load := startSteadyLoad(e, tpl, 4)
	start := e.checkpoint()
	cdctest.WaitFor(t, 60*time.Second, "the cdc applies batches of the load", func() bool { return e.checkpoint().Batches > start.Batches+10 })

	// the replica falls behind: the checkpoint on the primary moves on
	// past what the replica will ever receive
	tp.replica.StopReplicationIO()
	cut := e.checkpoint()
	cdctest.WaitFor(t, 60*time.Second, "the cdc applies batches the replica misses", func() bool { return e.checkpoint().Batches > cut.Batches+10 })
	lost := e.checkpoint()
	tp.primary.Stop(syscall.SIGKILL)
	acked := load.end()
	_ = p.signal(syscall.SIGTERM) // repointing: the cdc restarts with the new DSN

	applied := tp.replica.WaitRelayApplied(30 * time.Second)
	tp.replica.Promote()
	e2 := envOn(t, dbDSN(t, tp.replica.ServerDSN, "couponlink"), e.Keys.Prefix)
	held := e2.checkpoint()
	t.Logf("%d operations acknowledged by the primary; the replica applied up to %s; checkpoint on the replica %s (batch %d), on the dead primary %s (batch %d)",
		acked, applied, held.Pos, held.Batches, lost.Pos, lost.Batches)
	require.Less(t, held.Batches, lost.Batches, "the replica holds the primary's last checkpoint: the test lost no tail")

	// a few writes only: the new primary's binlog stays below the
	// positions the old one stamped the Redis keys with
	p = r.start("-dsn", e2.DSN)
	cdctest.WaitFor(t, 60*time.Second, "the cdc leads on the promoted replica and saves a heartbeat", func() bool {
		require.False(t, p.exited(), "couponlink cdc exited: %v", p.err)
		cp := e2.checkpoint()
		return cp.Epoch > held.Epoch && cp.Batches > held.Batches
	})
	c := &claimer{e: e2, tpl: tpl, n: 1 << 20}
	c.claim(30)
	cdctest.WaitFor(t, 60*time.Second, "the cdc resumes on the promoted replica", func() bool {
		require.False(t, p.exited(), "couponlink cdc exited: %v", p.err)
		return e2.checkpoint().Batches > held.Batches+2
	})
	e2.WaitCheckpoint()
	cp := e2.checkpoint()
	require.Equal(t, e2.Truth(), e2.Counters(), "derived counters differ from GROUP BY over user_coupon on the new primary")
	e2.AssertRedis()
	require.Greater(t, cp.Epoch, held.Epoch)
	require.Equal(t, held.BootstrappedAt, cp.BootstrappedAt, "the cdc bootstrapped again instead of resuming from its checkpoint")
	require.NoError(t, p.signal(syscall.SIGTERM))
	logs, err := os.ReadFile(r.stderr.Name())
	require.NoError(t, err)
	restart := string(logs[bytes.LastIndex(logs, []byte("=== couponlink")):])
	// By GTID, or by file/offset when BINLOG_GTID_POS proves the replica's
	// binlog holds the checkpoint's GTID at that very offset (with
	// log_slave_updates its binlog often has the primary's offsets up to
	// there): either way the stock keys, stamped past the checkpoint by the
	// dead primary's batches, are rebuilt before the first write.
	require.Regexp(t, `mode=(gtid|"file/offset \(verified against the GTID\)")`, restart)
	require.Regexp(t, `Redis stock keys rebuilt" component=cdc templates=\d+ position="`+regexp.QuoteMeta(held.Pos.String())+`"`, restart,
		"the keys the dead primary stamped past the checkpoint were not rebuilt at the resume")
}
