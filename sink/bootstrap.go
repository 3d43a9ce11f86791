package sink

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/internal/sqltx"
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
func TakeSnapshot(ctx context.Context, db *sql.DB, m *canal.Mapping) (Snapshot, error) {
	return newSource(m).snapshot(ctx, db)
}

// ReadQuotas reads every channel bucket now (nil when the mapping has none).
func ReadQuotas(ctx context.Context, db *sql.DB, m *canal.Mapping) (map[Pair]Quota, error) {
	return newSource(m).quotas(ctx, db)
}

func (src *source) snapshot(ctx context.Context, db *sql.DB) (Snapshot, error) {
	var snap Snapshot
	_, err := src.withSnapshot(ctx, db, func(tx *sql.Tx, pos canal.Position) error {
		return src.count(ctx, tx, pos, &snap)
	})
	return snap, err
}

// count reads the counts and the buckets in tx's snapshot, at pos.
func (src *source) count(ctx context.Context, tx *sql.Tx, pos canal.Position, snap *Snapshot) error {
	snap.Pos = pos
	var err error
	if snap.Counts, err = src.countCoupons(ctx, tx); err != nil {
		return err
	}
	snap.Quotas, err = src.quotas(ctx, tx)
	return err
}

// withSnapshot runs read in a consistent snapshot of the server (MariaDB:
// START TRANSACTION WITH CONSISTENT SNAPSHOT) and returns the snapshot's
// binlog position: what read reads is exactly the state at that position.
func (src *source) withSnapshot(ctx context.Context, db *sql.DB, read func(*sql.Tx, canal.Position) error) (canal.Position, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return canal.Position{}, fmt.Errorf("begin snapshot: %w", err)
	}
	defer tx.Rollback()
	// replaces the transaction database/sql began, on the same connection
	if _, err := tx.ExecContext(ctx, "START TRANSACTION WITH CONSISTENT SNAPSHOT"); err != nil {
		return canal.Position{}, fmt.Errorf("start consistent snapshot: %w", err)
	}
	pos, err := canal.SnapshotPosition(ctx, tx)
	if err != nil {
		return pos, err
	}
	if err := read(tx, pos); err != nil {
		return pos, err
	}
	return pos, tx.Commit()
}

// bootstrap replaces the counters (and the duplicate check's redemption
// keys) with the truth of a fresh snapshot, records the anomalies found in
// it, and sets the checkpoint to the snapshot's position, in one
// transaction, while the snapshot is open.
func (s *Sink) bootstrap(ctx context.Context) (Snapshot, error) {
	start := time.Now()
	var snap Snapshot
	var found []Anomaly
	// two connections: the snapshot stays open while the writes stream from it
	_, err := s.src.withSnapshot(ctx, s.db, func(stx *sql.Tx, pos canal.Position) error {
		if err := s.src.count(ctx, stx, pos, &snap); err != nil {
			return err
		}
		overs, err := s.overIssuedAt(ctx, snap)
		if err != nil {
			return err
		}
		return sqltx.Run(ctx, s.db, nil, func(tx *sql.Tx) error {
			found = overs
			if s.checksDuplicates() {
				dups, err := s.seedRedemptionKeys(ctx, stx, tx)
				if err != nil {
					return err
				}
				found = append(overs[:len(overs):len(overs)], dups...)
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
		"pairs", len(snap.Counts), "coupons", rows, "anomalies", len(found), "took", time.Since(start).Round(time.Millisecond))
	return snap, nil
}

// writeBootstrap writes a bootstrap's counters, release schedule,
// anomalies and checkpoint in tx.
func (s *Sink) writeBootstrap(ctx context.Context, tx *sql.Tx, snap Snapshot, anomalies []Anomaly) error {
	if _, err := tx.ExecContext(ctx, "DELETE FROM inventory_counter"); err != nil {
		return fmt.Errorf("clear counters: %w", err)
	}
	pairs := make([]Pair, 0, len(snap.Counts))
	for p := range snap.Counts {
		pairs = append(pairs, p)
	}
	sort.Slice(pairs, func(i, j int) bool { return pairs[i].less(pairs[j]) })
	for start := 0; start < len(pairs); start += 500 {
		chunk := pairs[start:min(start+500, len(pairs))]
		if err := writeCounters(ctx, tx, chunk, snap.Counts, false, Stamp(snap.Pos)); err != nil {
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
	if err := insertAnomalies(ctx, tx, anomalies, at); err != nil {
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
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrFenced
	}
	return nil
}

// overIssuedAt finds the pairs (or, without channel quotas, templates)
// over their quota at a bootstrap's snapshot: one over_issue anomaly each,
// per bootstrap. The batches flag only the crossings they see.
func (s *Sink) overIssuedAt(ctx context.Context, snap Snapshot) ([]Anomaly, error) {
	const found = "found at the snapshot of a bootstrap: "
	var out []Anomaly
	if snap.Quotas != nil {
		pairs := make([]Pair, 0, len(snap.Counts))
		for p := range snap.Counts {
			pairs = append(pairs, p)
		}
		sort.Slice(pairs, func(i, j int) bool { return pairs[i].less(pairs[j]) })
		for _, p := range pairs {
			c := snap.Counts[p]
			if q, ok := snap.Quotas[p]; ok && c.Taken() > q.Quota {
				out = append(out, Anomaly{Kind: AnomalyOverIssue, Template: p.Template, Channel: p.Channel,
					Detail: fmt.Sprintf(found+"template %d channel %q holds %d coupons (held+used+frozen) over a quota of %d", p.Template, p.Channel, c.Taken(), q.Quota)})
			}
		}
		return out, nil
	}
	taken := map[int64]int64{}
	for p, c := range snap.Counts {
		taken[p.Template] += c.Taken()
	}
	templates := templatesIn(snap.Counts)
	quotas, err := s.cfg.Mapping.TemplateQuotas(ctx, s.db, templates)
	if err != nil {
		return nil, fmt.Errorf("read template quotas: %w", err)
	}
	for _, tpl := range templates {
		if q, ok := quotas[tpl]; ok && taken[tpl] > q {
			out = append(out, Anomaly{Kind: AnomalyOverIssue, Template: tpl,
				Detail: fmt.Sprintf(found+"template %d holds %d coupons (held+used+frozen) over its quota of %d", tpl, taken[tpl], q)})
		}
	}
	return out, nil
}

func (p Pair) less(o Pair) bool {
	if p.Template != o.Template {
		return p.Template < o.Template
	}
	return p.Channel < o.Channel
}

// templatesOf lists the templates of the pairs, sorted, once each.
func templatesOf(pairs []Pair) []int64 {
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
func templatesIn[V any](m map[Pair]V) []int64 {
	pairs := make([]Pair, 0, len(m))
	for p := range m {
		pairs = append(pairs, p)
	}
	return templatesOf(pairs)
}

// writeCounters upserts the pairs' counters: added to the stored values
// (delta) or replacing them; stamp is the binlog stamp of the change.
func writeCounters(ctx context.Context, tx *sql.Tx, pairs []Pair, counts map[Pair]*Counts, delta bool, stamp int64) error {
	if len(pairs) == 0 {
		return nil
	}
	var b strings.Builder
	args := make([]any, 0, 8*len(pairs))
	b.WriteString("INSERT INTO inventory_counter (template_id, channel, held, used, expired, returned, released, stamp) VALUES ")
	for i, p := range pairs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(?, ?, ?, ?, ?, ?, ?, ?)")
		c := counts[p]
		args = append(args, p.Template, p.Channel, c.Held, c.Used, c.Expired, c.Returned, c.Released, stamp)
	}
	if delta {
		b.WriteString(` ON DUPLICATE KEY UPDATE held = held + VALUES(held), used = used + VALUES(used),
			expired = expired + VALUES(expired), returned = returned + VALUES(returned), released = released + VALUES(released),
			stamp = VALUES(stamp)`)
	} else {
		b.WriteString(` ON DUPLICATE KEY UPDATE held = VALUES(held), used = VALUES(used),
			expired = VALUES(expired), returned = VALUES(returned), released = VALUES(released), stamp = VALUES(stamp)`)
	}
	if _, err := tx.ExecContext(ctx, b.String(), args...); err != nil {
		return fmt.Errorf("write counters: %w", err)
	}
	return nil
}

// refreshTemplates writes the cached counts of coupon_template (reference
// schema only: a legacy template table belongs to its application) from
// inventory_counter, in the counters' transaction: the cache always equals
// the counters, whoever corrected them.
func (s *Sink) refreshTemplates(ctx context.Context, tx *sql.Tx, templates []int64) error {
	if !s.cfg.CacheTemplateCounts || len(templates) == 0 {
		return nil
	}
	args := make([]any, len(templates))
	for i, id := range templates {
		args[i] = id
	}
	q := `UPDATE coupon_template t JOIN (
		SELECT template_id, SUM(held + used + expired + returned) AS issued, SUM(used) AS used, SUM(expired) AS expired
		FROM inventory_counter WHERE template_id IN (` + placeholders(len(templates)) + `) GROUP BY template_id) v
		ON v.template_id = t.id
		SET t.issued_count = v.issued, t.used_count = v.used, t.expired_count = v.expired`
	if _, err := tx.ExecContext(ctx, q, args...); err != nil {
		return fmt.Errorf("refresh template counts: %w", err)
	}
	return nil
}
