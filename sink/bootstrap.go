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

// bootstrap replaces the counters (and the checks' durable state, see
// seedChecks) with the truth of a fresh snapshot, records the anomalies
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
			if infos, err = s.src.Templates(ctx, stx, nil); err != nil {
				return err
			}
		}
		overs := s.overIssuedAt(snap, infos)
		return sqltx.Run(ctx, s.db, nil, func(tx *sql.Tx) error {
			seeded, err := s.seedChecks(ctx, stx, tx, snap, infos)
			if err != nil {
				return err
			}
			found = append(overs[:len(overs):len(overs)], seeded...)
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
	sort.Slice(pairs, func(i, j int) bool { return pairs[i].Less(pairs[j]) })
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
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrFenced
	}
	return nil
}

// seedChecks rewrites, in tx, the durable state of the checks from the
// snapshot stx (redemption keys, order keys, template rules, coupons per
// user), and
// returns the anomalies found in it that the state did not hold yet.
func (s *Sink) seedChecks(ctx context.Context, stx, tx *sql.Tx, snap inventory.Snapshot, infos map[int64]inventory.TemplateInfo) ([]Anomaly, error) {
	var found []Anomaly
	if s.checksDuplicates() {
		dups, err := s.seedRedemptionKeys(ctx, stx, tx)
		if err != nil {
			return nil, err
		}
		found = append(found, dups...)
	}
	if s.checksOrders() {
		if err := s.seedOrderKeys(ctx, stx, tx); err != nil {
			return nil, err
		}
	}
	if s.followsTemplates() {
		if err := s.seedTemplates(ctx, tx, snap, infos); err != nil {
			return nil, err
		}
	}
	if s.checksUserLimits() {
		over, err := s.seedUserClaims(ctx, stx, tx, infos)
		if err != nil {
			return nil, err
		}
		found = append(found, over...)
	}
	return found, nil
}

// overIssuedAt finds the pairs (or, without channel quotas, templates)
// over their quota at a bootstrap's snapshot (infos: its template rows):
// one over_issue anomaly each, per bootstrap. The batches flag only the
// crossings they see.
func (s *Sink) overIssuedAt(snap inventory.Snapshot, infos map[int64]inventory.TemplateInfo) []Anomaly {
	const found = "found at the snapshot of a bootstrap: "
	var out []Anomaly
	if snap.Quotas != nil {
		pairs := make([]inventory.Pair, 0, len(snap.Counts))
		for p := range snap.Counts {
			pairs = append(pairs, p)
		}
		sort.Slice(pairs, func(i, j int) bool { return pairs[i].Less(pairs[j]) })
		for _, p := range pairs {
			c := snap.Counts[p]
			if q, ok := snap.Quotas[p]; ok && c.Taken() > q.Quota {
				out = append(out, Anomaly{Kind: AnomalyOverIssue, Template: p.Template, Channel: p.Channel,
					Detail: fmt.Sprintf(found+"template %d channel %q holds %d coupons (held+used+frozen) over a quota of %d", p.Template, p.Channel, c.Taken(), q.Quota)})
			}
		}
		return out
	}
	taken := map[int64]int64{}
	for p, c := range snap.Counts {
		taken[p.Template] += c.Taken()
	}
	for _, tpl := range templatesIn(snap.Counts) {
		if v := infos[tpl]; v.HasBudget && taken[tpl] > v.Budget {
			out = append(out, Anomaly{Kind: AnomalyOverIssue, Template: tpl,
				Detail: fmt.Sprintf(found+"template %d holds %d coupons (held+used+frozen) over its quota of %d", tpl, taken[tpl], v.Budget)})
		}
	}
	return out
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
