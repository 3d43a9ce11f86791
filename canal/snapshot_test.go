package canal

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/internal/mysqlconn"
	"github.com/couponlink/couponlink/internal/testenv"
)

// snapWriters insert channel_quota rows on their own connections until
// stopped, and remember the GTID sequence number each insert committed at
// (MariaDB's @@last_gtid; one domain, so binlog order).
type snapWriters struct {
	mu   sync.Mutex
	seq  map[int64]uint64 // template_id -> the GTID seq of its insert
	stop chan struct{}
	wg   sync.WaitGroup
}

func startSnapWriters(t *testing.T, db *sql.DB, n int) *snapWriters {
	w := &snapWriters{seq: map[int64]uint64{}, stop: make(chan struct{})}
	for i := range n {
		conn, err := db.Conn(context.Background())
		require.NoError(t, err)
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			defer conn.Close()
			for id := int64(i + 1); ; id += int64(n) {
				select {
				case <-w.stop:
					return
				default:
				}
				var g string
				_, err := conn.ExecContext(context.Background(), "INSERT INTO channel_quota (template_id, channel, quota) VALUES (?, 'a', 10)", id)
				if err == nil {
					err = conn.QueryRowContext(context.Background(), "SELECT @@last_gtid").Scan(&g)
				}
				if err != nil {
					t.Error(err)
					return
				}
				w.mu.Lock()
				w.seq[id] = gtidSeq(t, g)
				w.mu.Unlock()
			}
		}()
	}
	return w
}

func (w *snapWriters) halt() { close(w.stop); w.wg.Wait() }

// taken is what one snapshot saw: its position and the rows it read.
type taken struct {
	pos  Position
	rows map[int64]bool
}

// lockMethods are the snapshot locks the tests take: LOCK TABLES, which
// stops only the test's own tables, and FLUSH TABLES WITH READ LOCK only
// in make test-portable (COUPONLINK_SNAPSHOT_POSITION=lock), which runs
// after the other suites: a global lock waiting behind a long statement
// stalls every writer of the server, and would fail the timing of tests
// of other packages running meanwhile.
func lockMethods() []SnapshotMethod {
	if os.Getenv("COUPONLINK_SNAPSHOT_POSITION") == string(SnapshotLock) {
		return []SnapshotMethod{SnapshotLock, SnapshotTables}
	}
	return []SnapshotMethod{SnapshotTables}
}

// A position taken under a lock is exactly the position of the snapshot,
// under concurrent writers, many times over: the rows the snapshot reads
// are exactly those whose insert is at or before the position (by GTID),
// and under the global lock the position is the one MariaDB itself gives
// the same transaction (binlog_snapshot_file/position). Releasing the lock
// before the position is read fails both.
func TestLockedSnapshotUnderWrites(t *testing.T) {
	ctx := context.Background()
	db, _ := testenv.MySQL(t)
	w := startSnapWriters(t, db, 4)
	tables := []TableName{{Name: "channel_quota"}}
	var seen []taken
	held := map[SnapshotMethod][]time.Duration{}
	methods := lockMethods()
	for i := range 60 {
		method := methods[i%len(methods)]
		sn, err := BeginSnapshot(ctx, db, SnapshotConfig{Method: method, Tables: tables})
		require.NoError(t, err)
		require.Equal(t, method, sn.Method)
		require.Positive(t, sn.Locked)
		held[method] = append(held[method], sn.Locked)
		if method == SnapshotLock {
			status, err := SnapshotPosition(ctx, sn.Tx)
			require.NoError(t, err)
			require.Equal(t, status, sn.Pos, "try %d: the position read under FLUSH TABLES WITH READ LOCK is the snapshot's", i)
		}
		rows := map[int64]bool{}
		r, err := sn.Tx.QueryContext(ctx, "SELECT template_id FROM channel_quota")
		require.NoError(t, err)
		for r.Next() {
			var id int64
			require.NoError(t, r.Scan(&id))
			rows[id] = true
		}
		require.NoError(t, r.Err())
		require.NoError(t, sn.Tx.Rollback())
		seen = append(seen, taken{pos: sn.Pos, rows: rows})
	}
	w.halt()
	for m, d := range held {
		slices.Sort(d)
		t.Logf("%s: lock held p50 %s, max %s over %d snapshots under 4 writers", m, d[len(d)/2], d[len(d)-1], len(d))
	}
	require.Greater(t, len(w.seq), 60, "the writers wrote while the snapshots were taken")
	moved := 0
	for i, s := range seen {
		at := gtidSeq(t, s.pos.GTID)
		for id, seq := range w.seq {
			require.Equal(t, seq <= at, s.rows[id], "try %d (%s): row %d inserted at GTID seq %d, snapshot at %d", i, s.pos, id, seq, at)
		}
		if i > 0 && s.pos != seen[i-1].pos {
			moved++
		}
	}
	require.Greater(t, moved, 30, "the position moved between snapshots: the writers were writing")
}

// A user without RELOAD (a managed MySQL's) cannot take the global read
// lock: the lock method falls back to LOCK TABLES on the given tables,
// with a position as exact; with no tables, or without the LOCK TABLES
// privilege, the error names the privilege to grant.
func TestSnapshotLockWithoutReload(t *testing.T) {
	ctx := context.Background()
	db, dsn := testenv.MySQL(t)
	cfg, err := mysqlconn.Config(dsn)
	require.NoError(t, err)
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	user := "cl_snap_" + hex.EncodeToString(b)
	mustExec(t, db, fmt.Sprintf("CREATE USER '%s'@'%%' IDENTIFIED BY 'pw'", user))
	t.Cleanup(func() { _, _ = db.Exec(fmt.Sprintf("DROP USER '%s'@'%%'", user)) })
	mustExec(t, db, fmt.Sprintf("GRANT SELECT ON `%s`.* TO '%s'@'%%'", cfg.DBName, user))
	mustExec(t, db, fmt.Sprintf("GRANT BINLOG MONITOR ON *.* TO '%s'@'%%'", user))
	cfg.User, cfg.Passwd = user, "pw"
	udb, err := sql.Open("mysql", cfg.FormatDSN())
	require.NoError(t, err)
	defer udb.Close()
	udb.SetMaxIdleConns(0) // a database grant reaches new sessions only
	tables := []TableName{{Schema: cfg.DBName, Name: "channel_quota"}, {Name: "user_coupon"}}

	_, err = BeginSnapshot(ctx, udb, SnapshotConfig{Method: SnapshotLock})
	require.ErrorContains(t, err, "grant RELOAD, or LOCK TABLES and SELECT")
	_, err = BeginSnapshot(ctx, udb, SnapshotConfig{Method: SnapshotLock, Tables: tables})
	require.ErrorContains(t, err, "grant LOCK TABLES and SELECT on them")

	mustExec(t, db, fmt.Sprintf("GRANT LOCK TABLES ON `%s`.* TO '%s'@'%%'", cfg.DBName, user))
	mustExec(t, db, "INSERT INTO channel_quota (template_id, channel, quota) VALUES (1, 'a', 10)")
	sn, err := BeginSnapshot(ctx, udb, SnapshotConfig{Method: SnapshotLock, Tables: tables})
	require.NoError(t, err)
	defer sn.Tx.Rollback()
	require.Equal(t, SnapshotTables, sn.Method)
	mustExec(t, db, "INSERT INTO channel_quota (template_id, channel, quota) VALUES (2, 'a', 10)") // the lock is released
	status, err := SnapshotPosition(ctx, sn.Tx)
	require.NoError(t, err)
	require.LessOrEqual(t, status.Compare(sn.Pos), 0)
	var n int
	require.NoError(t, sn.Tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM channel_quota").Scan(&n))
	require.Equal(t, 1, n)
	now, err := CurrentPosition(ctx, db)
	require.NoError(t, err)
	require.Less(t, sn.Pos.Compare(now), 0)
}
