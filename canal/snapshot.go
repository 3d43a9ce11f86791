package canal

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	drv "github.com/go-sql-driver/mysql"
)

// SnapshotMethod is how BeginSnapshot learns the binlog position of its
// consistent snapshot.
type SnapshotMethod string

const (
	// SnapshotAuto: SnapshotStatus where the server has the
	// binlog_snapshot_% status variables (MariaDB, Percona Server), else
	// SnapshotLock.
	SnapshotAuto SnapshotMethod = "auto"
	// SnapshotStatus: the server's binlog_snapshot_file/position of the
	// transaction, no lock at all. MariaDB and Percona Server only.
	SnapshotStatus SnapshotMethod = "status"
	// SnapshotLock: FLUSH TABLES WITH READ LOCK held while the snapshot
	// starts and the position is read on a second connection; where the
	// global lock is refused (no RELOAD privilege: managed MySQL),
	// SnapshotTables. Any server.
	SnapshotLock SnapshotMethod = "lock"
	// SnapshotTables: LOCK TABLES ... READ on the mapped tables only, held
	// the same way. Needs LOCK TABLES and SELECT on them.
	SnapshotTables SnapshotMethod = "tables"
)

// ParseSnapshotMethod reads a method's name; "" is SnapshotAuto.
func ParseSnapshotMethod(s string) (SnapshotMethod, error) {
	switch m := SnapshotMethod(strings.ToLower(strings.TrimSpace(s))); m {
	case "":
		return SnapshotAuto, nil
	case SnapshotAuto, SnapshotStatus, SnapshotLock, SnapshotTables:
		return m, nil
	}
	return "", fmt.Errorf("snapshot position method %q: want auto, status, lock or tables", s)
}

// SnapshotConfig says how to take a consistent snapshot's position.
type SnapshotConfig struct {
	Method SnapshotMethod // "" is SnapshotAuto
	// Tables are locked by SnapshotTables (and by SnapshotLock when the
	// global read lock is refused): every table the snapshot reads.
	Tables []TableName
	// LockWait bounds each wait for the lock (the session's
	// lock_wait_timeout: writers queue behind a waiting FLUSH TABLES WITH
	// READ LOCK), asked for up to lockAttempts times. Default 3s.
	LockWait time.Duration
}

// Snapshot is an open consistent-snapshot transaction and the binlog
// position of what it reads.
type Snapshot struct {
	Tx     *sql.Tx
	Pos    Position
	Method SnapshotMethod // status, lock or tables: how Pos was taken
	Locked time.Duration  // how long a lock was held (0 for status)
	Waited time.Duration  // how long the lock statement waited for it
}

// BeginSnapshot opens a transaction WITH CONSISTENT SNAPSHOT on db and
// returns it with the binlog position of its snapshot: what it reads is
// exactly the state at Pos. The caller ends Tx.
//
// SnapshotLock and SnapshotTables (the way of the established CDC tools on
// Oracle MySQL): on a second connection, take the lock (no commit can
// happen while it is held), start the snapshot, read the position
// (SHOW MASTER STATUS or SHOW BINARY LOG STATUS by version) and the GTID
// set (gtid_executed on MySQL, gtid_binlog_pos on MariaDB), UNLOCK TABLES.
func BeginSnapshot(ctx context.Context, db *sql.DB, cfg SnapshotConfig) (*Snapshot, error) {
	method := cfg.Method
	if method == "" {
		method = SnapshotAuto
	}
	if method == SnapshotAuto || method == SnapshotStatus {
		tx, err := startSnapshotTx(ctx, db)
		if err != nil {
			return nil, err
		}
		pos, err := SnapshotPosition(ctx, tx)
		if err == nil {
			return &Snapshot{Tx: tx, Pos: pos, Method: SnapshotStatus}, nil
		}
		_ = tx.Rollback()
		if method == SnapshotStatus || !errors.Is(err, errNoSnapshotStatus) {
			return nil, err
		}
	}
	return lockedSnapshot(ctx, db, method, cfg)
}

// txBeginner is a *sql.DB or a *sql.Conn.
type txBeginner interface {
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}

// startSnapshotTx opens a transaction WITH CONSISTENT SNAPSHOT.
func startSnapshotTx(ctx context.Context, db txBeginner) (*sql.Tx, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("begin snapshot: %w", err)
	}
	// replaces the transaction database/sql began, on the same connection
	if _, err := tx.ExecContext(ctx, "START TRANSACTION WITH CONSISTENT SNAPSHOT"); err != nil {
		_ = tx.Rollback()
		return nil, fmt.Errorf("start consistent snapshot: %w", err)
	}
	return tx, nil
}

// JoinSnapshot opens another transaction WITH CONSISTENT SNAPSHOT, on
// conn, and keeps it only when its snapshot is at pos by the server's own
// binlog_snapshot_file/position (MariaDB, Percona Server): no binlogged
// transaction committed between the two, so it reads exactly what the
// snapshot at pos reads, and a long read can be split over both. ok is
// false, and the transaction ended, when a commit came in between or the
// server has no such status (Oracle MySQL): the caller reads alone.
// Writes made with sql_log_bin=0 move no position: they are invisible to
// the binlog, the cdc and this check alike.
func JoinSnapshot(ctx context.Context, conn *sql.Conn, pos Position) (tx *sql.Tx, ok bool, err error) {
	tx, err = startSnapshotTx(ctx, conn)
	if err != nil {
		return nil, false, err
	}
	vars, err := snapshotStatus(ctx, tx)
	if err == nil && vars["binlog_snapshot_file"] == pos.File && vars["binlog_snapshot_position"] == fmt.Sprint(pos.Pos) {
		return tx, true, nil
	}
	_ = tx.Rollback()
	return nil, false, err
}

// lockedSnapshot takes the position under FLUSH TABLES WITH READ LOCK or
// LOCK TABLES ... READ, held on its own connection for as short as
// possible.
func lockedSnapshot(ctx context.Context, db *sql.DB, method SnapshotMethod, cfg SnapshotConfig) (*Snapshot, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("snapshot lock: %w", err)
	}
	defer conn.Close()
	srv, err := ReadServer(ctx, conn)
	if err != nil {
		return nil, fmt.Errorf("snapshot lock: %w", err)
	}
	wait := cfg.LockWait
	if wait <= 0 {
		wait = 3 * time.Second
	}
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("SET SESSION lock_wait_timeout = %d", max(1, int(wait.Seconds())))); err != nil {
		return nil, fmt.Errorf("snapshot lock: %w", err)
	}
	// the connection goes back to the pool: with the server's timeout
	defer conn.ExecContext(context.WithoutCancel(ctx), "SET SESSION lock_wait_timeout = DEFAULT") //nolint:errcheck
	asked := time.Now()
	var used SnapshotMethod
	for attempt := 1; ; attempt++ {
		if used, err = takeLock(ctx, conn, method, cfg.Tables); err == nil || !isLockWaitTimeout(err) || attempt == lockAttempts {
			break
		}
		select { // a long statement or DDL held it up; writers queued behind the wait: let them through first
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Duration(attempt) * 200 * time.Millisecond):
		}
	}
	if err != nil {
		return nil, err
	}
	s := &Snapshot{Method: used}
	locked := time.Now()
	s.Waited = locked.Sub(asked)
	defer func() {
		if s.Locked == 0 { // a failure: release it all the same
			_ = unlock(ctx, conn)
		}
	}()
	if s.Tx, err = startSnapshotTx(ctx, db); err != nil {
		return nil, err
	}
	if s.Pos, err = lockedPosition(ctx, conn, srv); err != nil {
		_ = s.Tx.Rollback()
		return nil, err
	}
	err = unlock(ctx, conn)
	s.Locked = max(time.Since(locked), time.Nanosecond)
	if err != nil {
		_ = s.Tx.Rollback()
		return nil, err
	}
	return s, nil
}

// unlock releases the lock; when UNLOCK TABLES fails, the connection is
// dropped from the pool (its close releases the lock on the server), never
// handed to another user with the lock held.
func unlock(ctx context.Context, conn *sql.Conn) error {
	_, err := conn.ExecContext(context.WithoutCancel(ctx), "UNLOCK TABLES")
	if err != nil {
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		return fmt.Errorf("snapshot lock: UNLOCK TABLES: %w", err)
	}
	return nil
}

// lockAttempts is how many times a lock that timed out is asked for again.
const lockAttempts = 4

// takeLock takes FLUSH TABLES WITH READ LOCK (SnapshotLock) or LOCK
// TABLES ... READ (SnapshotTables, or SnapshotLock refused for want of
// RELOAD), and returns which.
func takeLock(ctx context.Context, conn *sql.Conn, method SnapshotMethod, tables []TableName) (SnapshotMethod, error) {
	if method != SnapshotTables {
		_, err := conn.ExecContext(ctx, "FLUSH TABLES WITH READ LOCK")
		switch {
		case err == nil:
			return SnapshotLock, nil
		case !isAccessDenied(err) || len(tables) == 0:
			return "", fmt.Errorf("snapshot lock: FLUSH TABLES WITH READ LOCK: %w (grant RELOAD, or LOCK TABLES and SELECT on the mapped tables: deploy/mysql/grants.sql)", err)
		}
		// no RELOAD: the tables the snapshot reads only
	}
	return SnapshotTables, lockTables(ctx, conn, tables)
}

// isLockWaitTimeout reports error 1205: lock_wait_timeout passed.
func isLockWaitTimeout(err error) bool {
	var me *drv.MySQLError
	return errors.As(err, &me) && me.Number == 1205
}

// lockedPosition reads the binlog position and its GTID set while no
// commit can happen.
func lockedPosition(ctx context.Context, conn *sql.Conn, srv Server) (Position, error) {
	p, err := masterStatus(ctx, conn, srv)
	if err != nil {
		return Position{}, fmt.Errorf("snapshot position: %w", err)
	}
	var g sql.NullString
	if err := conn.QueryRowContext(ctx, "SELECT @@GLOBAL."+srv.GTIDVariable()).Scan(&g); err != nil {
		return Position{}, fmt.Errorf("snapshot position: read %s: %w", srv.GTIDVariable(), err)
	}
	if srv.MariaDB {
		p.GTID = g.String
	} else {
		p.GTID = NormalizeMySQLGTID(g.String)
	}
	return p, nil
}

// lockTables takes LOCK TABLES ... READ on the tables, each once.
func lockTables(ctx context.Context, conn *sql.Conn, tables []TableName) error {
	if len(tables) == 0 {
		return errors.New("snapshot lock: LOCK TABLES needs the mapped tables, and none were given")
	}
	var names []string
	for _, t := range tables {
		q := quoteName(t.Name)
		if t.Schema != "" {
			q = quoteName(t.Schema) + "." + q
		}
		if !slices.Contains(names, q) {
			names = append(names, q)
		}
	}
	stmt := "LOCK TABLES " + strings.Join(names, " READ, ") + " READ"
	if _, err := conn.ExecContext(ctx, stmt); err != nil {
		return fmt.Errorf("snapshot lock: LOCK TABLES on %d tables: %w (grant LOCK TABLES and SELECT on them: deploy/mysql/grants.sql)", len(names), err)
	}
	return nil
}

func quoteName(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

// isAccessDenied reports a refused privilege: 1227 (you need RELOAD) or,
// as some managed services answer FLUSH TABLES WITH READ LOCK, 1045.
func isAccessDenied(err error) bool {
	var me *drv.MySQLError
	return errors.As(err, &me) && (me.Number == 1227 || me.Number == 1045)
}

// LockTables lists every table of every role of the mapping, each once:
// what a snapshot of its tables reads, so what SnapshotTables locks.
func (m *Mapping) LockTables() []TableName {
	var out []TableName
	for _, s := range m.specs() {
		tables, err := m.tablesOf(s)
		if err != nil {
			sch, name := m.split(s.table)
			tables = []TableName{{Schema: sch, Name: name}}
		}
		for _, t := range tables {
			if !slices.Contains(out, t) {
				out = append(out, t)
			}
		}
	}
	return out
}
