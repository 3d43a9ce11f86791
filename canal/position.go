package canal

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Position is a point in the binlog between two transactions: a file and
// the offset just after a commit, and the GTID set (MariaDB: one
// domain-server-seq per domain, e.g. "0-1-42") of everything committed up to
// it. Either half is enough to resume; the tailer prefers the GTID.
type Position struct {
	File string
	Pos  uint32
	GTID string
}

func (p Position) String() string {
	if p.GTID == "" {
		return fmt.Sprintf("%s:%d", p.File, p.Pos)
	}
	return fmt.Sprintf("%s:%d gtid=%s", p.File, p.Pos, p.GTID)
}

// IsZero reports whether p names no position at all.
func (p Position) IsZero() bool { return p.File == "" && p.GTID == "" }

// Compare orders two positions of one server by file (numeric suffix) and
// offset: -1 if p is before q, 0 if equal, +1 if after. The GTID is ignored.
func (p Position) Compare(q Position) int {
	pb, pn := splitBinlogName(p.File)
	qb, qn := splitBinlogName(q.File)
	if c := cmp.Compare(pb, qb); c != 0 {
		return c
	}
	if c := cmp.Compare(pn, qn); c != 0 {
		return c
	}
	return cmp.Compare(p.Pos, q.Pos)
}

func splitBinlogName(name string) (string, uint64) {
	i := strings.LastIndexByte(name, '.')
	if i < 0 {
		return name, 0
	}
	n, err := strconv.ParseUint(name[i+1:], 10, 64)
	if err != nil {
		return name, 0
	}
	return name[:i], n
}

// CurrentPosition returns the server's binlog end: SHOW MASTER STATUS (SHOW
// BINARY LOG STATUS on MySQL 8.2+) with, on MariaDB, @@gtid_binlog_pos and,
// on MySQL, its Executed_Gtid_Set. On MariaDB the two are read
// consistently (GTID, file, GTID again until both GTID reads agree;
// BINLOG_GTID_POS as a fallback).
func CurrentPosition(ctx context.Context, db *sql.DB) (Position, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return Position{}, fmt.Errorf("current binlog position: %w", err)
	}
	defer conn.Close()
	srv, err := ReadServer(ctx, conn)
	if err != nil {
		return Position{}, fmt.Errorf("current binlog position: %w", err)
	}
	if !srv.MariaDB {
		return masterStatus(ctx, conn, srv)
	}
	for range 10 {
		var g1, g2 string
		if err := conn.QueryRowContext(ctx, "SELECT @@GLOBAL.gtid_binlog_pos").Scan(&g1); err != nil {
			return Position{}, fmt.Errorf("read gtid_binlog_pos: %w", err)
		}
		p, err := masterStatus(ctx, conn, srv)
		if err != nil {
			return Position{}, err
		}
		if err := conn.QueryRowContext(ctx, "SELECT @@GLOBAL.gtid_binlog_pos").Scan(&g2); err != nil {
			return Position{}, fmt.Errorf("read gtid_binlog_pos: %w", err)
		}
		if g1 == g2 {
			p.GTID = g1
			return p, nil
		}
	}
	p, err := masterStatus(ctx, conn, srv)
	if err != nil {
		return Position{}, err
	}
	p.GTID, err = binlogGTIDPos(ctx, conn, p.File, p.Pos)
	return p, err
}

// errNoSnapshotStatus: the server has no binlog_snapshot_% status
// variables (Oracle MySQL), or they are empty (the binlog is off).
var errNoSnapshotStatus = errors.New("snapshot position: the server has no binlog_snapshot_file/position (only MariaDB and Percona Server have them, inside START TRANSACTION WITH CONSISTENT SNAPSHOT with log_bin ON); take it under a lock (COUPONLINK_SNAPSHOT_POSITION=lock)")

// SnapshotPosition returns the binlog position of the consistent snapshot of
// tx, a transaction opened with START TRANSACTION WITH CONSISTENT SNAPSHOT
// on MariaDB or Percona Server: what tx reads is exactly the state at that
// position. Its GTID is BINLOG_GTID_POS of it on MariaDB, Percona's
// binlog_snapshot_gtid_executed on MySQL (empty where that is missing).
func SnapshotPosition(ctx context.Context, tx *sql.Tx) (Position, error) {
	vars, err := snapshotStatus(ctx, tx)
	if err != nil {
		return Position{}, err
	}
	p := Position{File: vars["binlog_snapshot_file"]}
	pos, havePos := vars["binlog_snapshot_position"]
	if p.File == "" || !havePos {
		return Position{}, errNoSnapshotStatus
	}
	n, err := strconv.ParseUint(pos, 10, 32)
	if err != nil {
		return Position{}, fmt.Errorf("binlog_snapshot_position %q: %w", pos, err)
	}
	p.Pos = uint32(n)
	srv, err := ReadServer(ctx, tx)
	if err != nil {
		return Position{}, err
	}
	if !srv.MariaDB {
		p.GTID = NormalizeMySQLGTID(vars["binlog_snapshot_gtid_executed"])
		return p, nil
	}
	if p.GTID, err = binlogGTIDPos(ctx, tx, p.File, p.Pos); err != nil {
		return Position{}, err
	}
	return p, nil
}

// snapshotStatus reads the binlog_snapshot_% status variables, by lower
// case name.
func snapshotStatus(ctx context.Context, tx *sql.Tx) (map[string]string, error) {
	rows, err := tx.QueryContext(ctx, "SHOW STATUS LIKE 'binlog_snapshot_%'")
	if err != nil {
		return nil, fmt.Errorf("read binlog snapshot status: %w", err)
	}
	defer rows.Close()
	vars := map[string]string{}
	for rows.Next() {
		var name, value string
		if err := rows.Scan(&name, &value); err != nil {
			return nil, fmt.Errorf("read binlog snapshot status: %w", err)
		}
		vars[strings.ToLower(name)] = value
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read binlog snapshot status: %w", err)
	}
	return vars, nil
}

type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// masterStatus reads File, Position and (MySQL) Executed_Gtid_Set of SHOW
// MASTER STATUS or SHOW BINARY LOG STATUS, whichever the server has,
// whatever the other columns are.
func masterStatus(ctx context.Context, q queryer, srv Server) (Position, error) {
	stmt := srv.BinlogStatusStatement()
	rows, err := q.QueryContext(ctx, stmt)
	if err != nil {
		return Position{}, fmt.Errorf("%s: %w", strings.ToLower(stmt), err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return Position{}, fmt.Errorf("%s: %w", strings.ToLower(stmt), err)
	}
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return Position{}, fmt.Errorf("%s: %w", strings.ToLower(stmt), err)
		}
		return Position{}, fmt.Errorf("%s returned no row: the server's binlog is off (log_bin=OFF): start it with --log-bin", stmt)
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return Position{}, fmt.Errorf("%s: %w", strings.ToLower(stmt), err)
	}
	var p Position
	for i, c := range cols {
		switch strings.ToLower(c) {
		case "file":
			p.File = vals[i].String
		case "position":
			n, err := strconv.ParseUint(vals[i].String, 10, 32)
			if err != nil {
				return Position{}, fmt.Errorf("%s: position %q: %w", strings.ToLower(stmt), vals[i].String, err)
			}
			p.Pos = uint32(n)
		case "executed_gtid_set":
			p.GTID = NormalizeMySQLGTID(vals[i].String)
		}
	}
	return p, rows.Err()
}

// binlogGTIDPos converts a MariaDB file/offset into the GTID position there.
func binlogGTIDPos(ctx context.Context, q queryer, file string, pos uint32) (string, error) {
	var g sql.NullString
	if err := q.QueryRowContext(ctx, "SELECT BINLOG_GTID_POS(?, ?)", file, pos).Scan(&g); err != nil {
		return "", fmt.Errorf("BINLOG_GTID_POS(%s, %d): %w", file, pos, err)
	}
	if !g.Valid {
		return "", fmt.Errorf("BINLOG_GTID_POS(%s, %d) is NULL: %w", file, pos, ErrBinlogPurged)
	}
	return g.String, nil
}
