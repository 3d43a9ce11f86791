package inventory

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/couponlink/couponlink/canal"
)

// Snapshot is the truth at one binlog position: coupons per pair and state
// (and releases), and the channel buckets.
type Snapshot struct {
	Pos    canal.Position
	Taken  SnapshotTaken // how Pos was taken
	Counts map[Pair]*Counts
	Quotas map[Pair]Quota // nil when the mapping has no channel quotas
}

// TakeSnapshot counts the source tables in a consistent snapshot and reads
// the binlog position of that snapshot (canal.BeginSnapshot: MariaDB's
// binlog_snapshot_file/position, or a short lock on Oracle MySQL). The cdc
// bootstraps from it; the reconciler compares with it.
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
	return NewQueries(m).Snapshot(ctx, db)
}

// ReadQuotas reads every channel bucket now (nil when the mapping has none).
func ReadQuotas(ctx context.Context, db *sql.DB, m *canal.Mapping) (map[Pair]Quota, error) {
	return NewQueries(m).Quotas(ctx, db)
}

// Snapshot counts the source tables in a consistent snapshot (TakeSnapshot).
func (s *Queries) Snapshot(ctx context.Context, db *sql.DB) (Snapshot, error) {
	var snap Snapshot
	readers := 1
	taken, err := s.WithSnapshotTaken(ctx, db, func(tx *sql.Tx, pos canal.Position) error {
		var err error
		snap, readers, err = s.countJoined(ctx, db, tx, pos)
		return err
	})
	snap.Taken = taken
	snap.Taken.Readers = readers
	return snap, err
}

// countJoined is Count, the coupons counted by tx together with the
// transactions that join its snapshot (snapshotsplit.go); readers says
// how many counted.
func (s *Queries) countJoined(ctx context.Context, db *sql.DB, tx *sql.Tx, pos canal.Position) (Snapshot, int, error) {
	n := int(snapshotReaders.Load())
	if n < 2 {
		snap, err := s.Count(ctx, tx, pos)
		return snap, 1, err
	}
	lo, hi, ok := s.templateBounds(ctx, tx)
	if !ok {
		snap, err := s.Count(ctx, tx, pos)
		return snap, 1, err
	}
	helpers, end := joinReaders(ctx, db, pos, n)
	defer end()
	if len(helpers) == 0 {
		snap, err := s.Count(ctx, tx, pos)
		return snap, 1, err
	}
	snap := Snapshot{Pos: pos}
	var err error
	if snap.Counts, err = s.countSplit(ctx, append([]*sql.Tx{tx}, helpers...), lo, hi); err != nil {
		return snap, 0, err
	}
	if err := s.countReleases(ctx, tx, nil, snap.Counts); err != nil {
		return snap, 0, err
	}
	snap.Quotas, err = s.Quotas(ctx, tx)
	return snap, 1 + len(helpers), err
}

// Count reads the counts and the buckets in tx's snapshot, which is the
// state at pos.
func (s *Queries) Count(ctx context.Context, tx *sql.Tx, pos canal.Position) (Snapshot, error) {
	snap := Snapshot{Pos: pos}
	var err error
	if snap.Counts, err = s.countCoupons(ctx, tx, nil); err != nil {
		return snap, err
	}
	snap.Quotas, err = s.Quotas(ctx, tx)
	return snap, err
}

// WithSnapshot runs read in a consistent snapshot of the server and
// returns the snapshot's binlog position: what read reads is exactly the
// state at that position (how the position is taken: SetSnapshotMethod).
func (s *Queries) WithSnapshot(ctx context.Context, db *sql.DB, read func(*sql.Tx, canal.Position) error) (canal.Position, error) {
	taken, err := s.WithSnapshotTaken(ctx, db, read)
	return taken.Pos, err
}

// SnapshotTaken is how a snapshot's position was taken.
type SnapshotTaken struct {
	Pos    canal.Position
	Method canal.SnapshotMethod // status, lock or tables
	Locked time.Duration        // how long a lock was held (0: none)
	// Readers is how many transactions of that one snapshot counted the
	// coupons (Snapshot: SetSnapshotReaders); 0 for WithSnapshotTaken
	Readers int
}

// WithSnapshotTaken is WithSnapshot, also saying how the position was
// taken and how long a lock was held for it, for the caller's log (also
// observed in couponlink_snapshot_lock_seconds).
func (s *Queries) WithSnapshotTaken(ctx context.Context, db *sql.DB, read func(*sql.Tx, canal.Position) error) (SnapshotTaken, error) {
	snapMu.RLock()
	method := snapMethod
	snapMu.RUnlock()
	sn, err := canal.BeginSnapshot(ctx, db, canal.SnapshotConfig{Method: method, Tables: s.m.LockTables()})
	if err != nil {
		return SnapshotTaken{}, err
	}
	defer sn.Tx.Rollback()
	taken := SnapshotTaken{Pos: sn.Pos, Method: sn.Method, Locked: sn.Locked}
	if sn.Method != canal.SnapshotStatus {
		lockSeconds.WithLabelValues(string(sn.Method)).Observe(sn.Locked.Seconds())
	}
	if err := read(sn.Tx, sn.Pos); err != nil {
		return taken, err
	}
	return taken, sn.Tx.Commit()
}

// The process's way of taking a snapshot's position (cmd/couponlink sets
// it from COUPONLINK_SNAPSHOT_POSITION) and the lock times of it.
var (
	snapMu      sync.RWMutex
	snapMethod  = canal.SnapshotAuto
	lockSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "couponlink_snapshot_lock_seconds",
		Help:    "How long a lock (method lock: FLUSH TABLES WITH READ LOCK; tables: LOCK TABLES ... READ) was held to take a consistent snapshot's binlog position. No observation for method status (no lock).",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
	}, []string{"method"})
)

// SetSnapshotMethod sets how every Queries of the process takes a
// snapshot's position (default canal.SnapshotAuto; "lock" forces the
// portable path of Oracle MySQL on MariaDB too), and returns the previous
// setting.
func SetSnapshotMethod(m canal.SnapshotMethod) (previous canal.SnapshotMethod) {
	if m == "" {
		m = canal.SnapshotAuto
	}
	snapMu.Lock()
	defer snapMu.Unlock()
	previous, snapMethod = snapMethod, m
	return previous
}

// RegisterSnapshotMetrics registers couponlink_snapshot_lock_seconds (one
// histogram per process) on r; registering it again is a no-op.
func RegisterSnapshotMetrics(r prometheus.Registerer) error {
	if err := r.Register(lockSeconds); err != nil {
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			return fmt.Errorf("register couponlink_snapshot_lock_seconds: %w", err)
		}
	}
	return nil
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
