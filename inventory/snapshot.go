package inventory

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/couponlink/couponlink/canal"
)

// Snapshot is the truth at one binlog position: coupons per pair and state
// (and releases), and the channel buckets.
type Snapshot struct {
	Pos    canal.Position
	Counts map[Pair]*Counts
	Quotas map[Pair]Quota // nil when the mapping has no channel quotas
}

// TakeSnapshot counts the source tables in a consistent snapshot and reads
// the binlog position of that snapshot (MariaDB: START TRANSACTION WITH
// CONSISTENT SNAPSHOT + binlog_snapshot_file/position). The cdc bootstraps
// from it; the reconciler compares with it.
// A mapping with sets of shard tables is resolved on db first, unless it
// is already.
func TakeSnapshot(ctx context.Context, db *sql.DB, m *canal.Mapping) (Snapshot, error) {
	if m.HasSets() && !m.Resolved() {
		r, err := m.Resolve(ctx, db)
		if err != nil {
			return Snapshot{}, err
		}
		m = r
	}
	return NewSource(m).Snapshot(ctx, db)
}

// ReadQuotas reads every channel bucket now (nil when the mapping has none).
func ReadQuotas(ctx context.Context, db *sql.DB, m *canal.Mapping) (map[Pair]Quota, error) {
	return NewSource(m).Quotas(ctx, db)
}

// Snapshot counts the source tables in a consistent snapshot (TakeSnapshot).
func (s *Source) Snapshot(ctx context.Context, db *sql.DB) (Snapshot, error) {
	var snap Snapshot
	_, err := s.WithSnapshot(ctx, db, func(tx *sql.Tx, pos canal.Position) error {
		var err error
		snap, err = s.Count(ctx, tx, pos)
		return err
	})
	return snap, err
}

// Count reads the counts and the buckets in tx's snapshot, which is the
// state at pos.
func (s *Source) Count(ctx context.Context, tx *sql.Tx, pos canal.Position) (Snapshot, error) {
	snap := Snapshot{Pos: pos}
	var err error
	if snap.Counts, err = s.countCoupons(ctx, tx); err != nil {
		return snap, err
	}
	snap.Quotas, err = s.Quotas(ctx, tx)
	return snap, err
}

// WithSnapshot runs read in a consistent snapshot of the server (MariaDB:
// START TRANSACTION WITH CONSISTENT SNAPSHOT) and returns the snapshot's
// binlog position: what read reads is exactly the state at that position.
func (s *Source) WithSnapshot(ctx context.Context, db *sql.DB, read func(*sql.Tx, canal.Position) error) (canal.Position, error) {
	var pos canal.Position
	err := consistentSnapshot(ctx, db, func(tx *sql.Tx) error {
		var err error
		if pos, err = canal.SnapshotPosition(ctx, tx); err != nil {
			return err
		}
		return read(tx, pos)
	})
	return pos, err
}

// consistentSnapshot runs read in a consistent snapshot of the server.
func consistentSnapshot(ctx context.Context, db *sql.DB, read func(*sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin snapshot: %w", err)
	}
	defer tx.Rollback()
	// replaces the transaction database/sql began, on the same connection
	if _, err := tx.ExecContext(ctx, "START TRANSACTION WITH CONSISTENT SNAPSHOT"); err != nil {
		return fmt.Errorf("start consistent snapshot: %w", err)
	}
	if err := read(tx); err != nil {
		return err
	}
	return tx.Commit()
}
