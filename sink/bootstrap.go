package sink

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"time"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/internal/sqltx"
	"github.com/couponlink/couponlink/inventory"
)

// bootstrap replaces the counters (and the checks' durable state: each
// check's seed) with the truth of a fresh snapshot, records the anomalies
// found in it, and sets the checkpoint to the snapshot's position, in one
// transaction, while the snapshot is open.
func (s *Sink) bootstrap(ctx context.Context) (inventory.Snapshot, error) {
	start := time.Now()
	var snap inventory.Snapshot
	var found []Anomaly
	// two connections: the snapshot stays open while the writes stream from it
	taken, err := s.src.WithSnapshotTaken(ctx, s.cfg.BinlogDB, func(stx *sql.Tx, pos canal.Position) error {
		var err error
		if snap, err = s.src.Count(ctx, stx, pos); err != nil {
			return err
		}
		var infos map[int64]inventory.TemplateInfo
		if s.followsTemplates() {
			if infos, err = s.templateRows(ctx, stx, nil); err != nil {
				return err
			}
		}
		return sqltx.Run(ctx, s.db, nil, func(tx *sql.Tx) error {
			if found, err = s.pipe.checks.seed(ctx, &seeding{stx: stx, tx: tx, snap: snap, infos: infos}); err != nil {
				return err
			}
			return s.writeBootstrap(ctx, tx, snap, found)
		})
	})
	if err != nil {
		return snap, fmt.Errorf("bootstrap: %w", err)
	}
	var rows int64
	for _, c := range snap.Counts {
		rows += c.Issued()
	}
	s.pos = snap.Pos
	s.countAnomalies(found)
	s.log.Info("bootstrapped counters from a consistent snapshot", "position", snap.Pos.String(),
		"pairs", len(snap.Counts), "coupons", rows, "anomalies", len(found), "took", time.Since(start).Round(time.Millisecond),
		"position_by", taken.Method, "lock_held", taken.Locked)
	return snap, nil
}

// writeBootstrap writes a bootstrap's counters, release schedule,
// anomalies and checkpoint in tx.
func (s *Sink) writeBootstrap(ctx context.Context, tx *sql.Tx, snap inventory.Snapshot, anomalies []Anomaly) error {
	if _, err := tx.ExecContext(ctx, "DELETE FROM inventory_counter"); err != nil {
		return fmt.Errorf("clear counters: %w", err)
	}
	pairs := make([]inventory.Pair, 0, len(snap.Counts))
	for p := range snap.Counts {
		pairs = append(pairs, p)
	}
	sortPairs(pairs)
	for start := 0; start < len(pairs); start += 500 {
		chunk := pairs[start:min(start+500, len(pairs))]
		if err := writeCounters(ctx, tx, chunk, snap.Counts, false, inventory.Stamp(snap.Pos)); err != nil {
			return err
		}
	}
	if err := s.refreshTemplates(ctx, tx, templatesOf(pairs)); err != nil {
		return err
	}
	if s.cfg.Releases {
		if err := scheduleAll(ctx, tx, s.cfg.Now().UTC()); err != nil {
			return err
		}
	}
	at := &canal.Batch{End: snap.Pos}
	if err := s.insertAnomalies(ctx, tx, anomalies, at); err != nil {
		return err
	}
	if err := s.enqueue(ctx, tx, s.batchEvents(at, nil, anomalies)); err != nil {
		return err
	}
	res, err := tx.ExecContext(ctx, `UPDATE cdc_checkpoint SET binlog_file = ?, binlog_pos = ?, gtid_set = ?,
		event_time = NULL, bootstrapped_at = ?, anomalies = anomalies + ? WHERE name = ? AND epoch = ?`,
		snap.Pos.File, snap.Pos.Pos, snap.Pos.GTID, time.Now().UTC(), len(anomalies), s.cfg.Name, s.epoch)
	if err != nil {
		return fmt.Errorf("save checkpoint: %w", err)
	}
	return fenced(res)
}

// templatesOf lists the templates of the pairs, sorted, once each.
func templatesOf(pairs []inventory.Pair) []int64 {
	seen := map[int64]bool{}
	var out []int64
	for _, p := range pairs {
		if !seen[p.Template] {
			seen[p.Template] = true
			out = append(out, p.Template)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// templatesIn lists the templates of a map keyed by pair, sorted, once each.
func templatesIn[V any](m map[inventory.Pair]V) []int64 {
	pairs := make([]inventory.Pair, 0, len(m))
	for p := range m {
		pairs = append(pairs, p)
	}
	return templatesOf(pairs)
}
