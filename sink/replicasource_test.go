package sink_test

import (
	"database/sql"
	"os/exec"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/internal/mysqlconn"
	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/inventory"
)

// userDSN is dsn with the user and password given.
func userDSN(t *testing.T, dsn, user, pw string) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	require.NoError(t, err)
	cfg.User, cfg.Passwd = user, pw
	return cfg.FormatDSN()
}

// waitCheckpointOnReplica waits until the checkpoint covers everything
// the primary committed before the call: the replica applied it, and the
// checkpoint (a position of the replica's binlog) reached the replica's
// binlog end; twice, for the cdc's own release rounds.
func waitCheckpointOnReplica(t *testing.T, e *env, tp *topology, replica *sql.DB) {
	t.Helper()
	for range 2 {
		tp.replica.WaitReplicated(tp.primary, 30*time.Second)
		target, err := canal.CurrentPosition(e.Ctx, replica)
		require.NoError(t, err)
		cdctest.WaitFor(t, 60*time.Second, "the checkpoint reaches the replica's binlog end", func() bool {
			cp, found, err := inventory.LoadCheckpoint(e.Ctx, e.DB, "default")
			require.NoError(t, err)
			return found && cp.Pos.File != "" && cp.Pos.Compare(target) >= 0
		})
	}
}

// binlogDumps counts the binlog dump threads of user on a server.
func binlogDumps(t *testing.T, db *sql.DB, user string) int {
	t.Helper()
	var n int
	require.NoError(t, db.QueryRow(`SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = ? AND COMMAND LIKE 'Binlog Dump%'`, user).Scan(&n))
	return n
}

// A cdc reading a replica's binlog (-binlog-dsn) while it writes the
// counters, checkpoint and lock on the primary (-dsn), as a user without
// the privilege to write on a read_only server: under the random workload
// (API and raw SQL) the counters on the primary equal the truth, anomalies
// are counted exactly, and the binlog stream is the replica's, not the
// primary's.
func TestCDCReadsTheBinlogOfAReplica(t *testing.T) {
	tp := startTopology(t)
	e := envOn(t, dbDSN(t, tp.primary.ServerDSN, "couponlink"), "")
	for _, q := range []string{`CREATE USER 'cl_cdc'@'127.0.0.1' IDENTIFIED BY 'pw'`, `GRANT ALL ON couponlink.* TO 'cl_cdc'@'127.0.0.1'`,
		`GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO 'cl_cdc'@'127.0.0.1'`} {
		_, err := e.DB.Exec(q)
		require.NoError(t, err, q)
	}
	replicaDSN := dbDSN(t, tp.replica.ServerDSN, "couponlink")
	replica, err := mysqlconn.Open(replicaDSN, 2)
	require.NoError(t, err)
	t.Cleanup(func() { _ = replica.Close() })

	r := newCDCRunner(t, e, testenv.RedisAddr(t))
	r.args = append(r.args, "-dsn", userDSN(t, e.DSN, "cl_cdc", "pw"), "-binlog-dsn", userDSN(t, replicaDSN, "cl_cdc", "pw"))
	var stop atomic.Bool
	w := newWorkload(e, wlConfig{Workers: 4, Ops: 800, Quota: 400, OverIssue: true, More: func() bool { return !stop.Load() }})
	p := r.start()
	waitCheckpointOnReplica(t, e, tp, replica)
	wait := w.start()
	cdctest.WaitFor(t, 60*time.Second, "the cdc streams the replica's binlog", func() bool {
		require.False(t, p.exited(), "couponlink cdc exited: %v", p.err)
		return binlogDumps(t, replica, "cl_cdc") == 1
	})
	require.Zero(t, binlogDumps(t, e.DB, "cl_cdc"), "the cdc reads the primary's binlog")
	stop.Store(true)
	wait()

	waitCheckpointOnReplica(t, e, tp, replica)
	require.Equal(t, e.Truth(), e.Counters(), "derived counters on the primary differ from GROUP BY over user_coupon")
	e.AssertRedis()
	cdctest.WaitFor(t, 60*time.Second, "no pending redemption checks", func() bool { return e.pendingChecks() == 0 })
	want, got := w.expected(), e.anomalies()
	for _, k := range []string{inventory.AnomalyIllegalTransition, inventory.AnomalyDeletedCoupon, inventory.AnomalyOverIssue, inventory.AnomalyUsedWithoutRedemption} {
		require.Equal(t, want[k], got[k], "%s anomalies", k)
	}
	require.NoError(t, p.signal(syscall.SIGTERM), "couponlink cdc did not exit cleanly on SIGTERM")

	// the DSNs the wrong way round: the counters' server is read_only
	out, err := exec.Command(r.bin, "cdc", "-dsn", userDSN(t, replicaDSN, "cl_cdc", "pw"), "-binlog-dsn", userDSN(t, e.DSN, "cl_cdc", "pw"),
		"-redis", "", "-metrics-addr", "").CombinedOutput()
	require.Error(t, err, "a cdc writing its counters on the read_only replica started: %s", out)
	require.Contains(t, string(out), "is read_only: the DSN must name the primary")
}
