package sink

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/inventory"
)

// The two checks of redemption rows keep state beyond a batch, in
// couponlink's tables (migration 0004), written in the batch's transaction
// with the checkpoint: a replay after a crash neither loses nor repeats
// an anomaly.
//
//   - used_without_redemption: a coupon that became USED with no redemption
//     row of its order (in the batch or the table) is pending until the
//     grace has passed. Pending checks live in redemptionWait.pending and,
//     for those that outlive the batch that changed them, in
//     cdc_pending_redemption; a start reloads them. The reference schema
//     writes the row and the USED update in one transaction, so its batches
//     write nothing here. A batch changes the pending checks before its
//     transaction and marks what it changed (batch.pendingDirty); a failed
//     transaction stops the sink, and the next Start reloads the table. A
//     coupon leaving USED does not settle its check: it was USED without a
//     row all the same.
//   - duplicate_redemption (duplicates.go): cdc_redemption_key counts the
//     redemption rows per (coupon, order) as the binlog shows them, never
//     by a query on the live table, whose rows may not be visible yet (the
//     server sends a transaction's events before InnoDB makes its rows
//     visible).

// pendingUse is a coupon's move into USED (by Anomaly.Order) with no
// redemption row of that order seen yet; moves counts the moves of the
// coupon into USED by the same order that the check covers (usually 1),
// decided together at the first one's deadline.
type pendingUse struct {
	Anomaly
	deadline time.Time
	moves    int
}

// redemptionWait is the used_without_redemption check of the table
// evidence: the pending checks, by coupon, and how many there are.
type redemptionWait struct {
	noCheck
	s        *Sink
	pending  map[int64][]pendingUse // coupon -> its moves into USED awaiting a redemption row
	npending int                    // entries in pending, bounded by MaxPending
}

func newRedemptionWait(s *Sink) *redemptionWait {
	return &redemptionWait{s: s, pending: map[int64][]pendingUse{}}
}

// on is every mapping's: the checks a start reloads are decided on
// heartbeats even when the mapping's evidence is no longer a redemption
// table (only then are batches judged, judge).
func (w *redemptionWait) on() bool { return true }

func (w *redemptionWait) resume(ctx context.Context, _ bool) error { return w.loadPending(ctx) }

// judge judges the batch's uses (the table evidence), or decides on a
// heartbeat the checks whose grace ended.
func (w *redemptionWait) judge(ctx context.Context, b *batch) ([]Anomaly, error) {
	if !b.idle && w.s.cfg.Mapping.RedemptionEvidence() != canal.EvidenceTable {
		return nil, nil
	}
	return w.judgeRedemptions(ctx, b)
}

// save writes the pending checks the batch changed and, with evidence
// states, the uses its rows proved (after the write stage counted them).
func (w *redemptionWait) save(ctx context.Context, b *batch) error {
	if err := w.savePending(ctx, b); err != nil {
		return err
	}
	return w.saveProved(ctx, b)
}

func (w *redemptionWait) waiting() (int, bool) { return w.npending, len(w.pending) > 0 }

// judgeRedemptions judges the batch: its redemption rows settle pending
// checks, and its moves into USED without a redemption row of their order
// (in the batch or the table) start one; the checks whose grace ended are
// decided.
func (w *redemptionWait) judgeRedemptions(ctx context.Context, b *batch) ([]Anomaly, error) {
	s := w.s
	if s.cfg.Mapping.EvidenceStates() { // judged in binlog order, from the binlog alone (evidencestates.go)
		if err := w.judgeAtPositions(ctx, b); err != nil {
			return nil, err
		}
		return w.duePending(ctx, b)
	}
	redeemedHere := map[int64][]string{}
	for i := range b.Redemptions {
		r := &b.Redemptions[i]
		if !r.Deleted {
			redeemedHere[r.Coupon] = append(redeemedHere[r.Coupon], r.Order)
			w.settlePending(b, r.Coupon, r.Order)
		}
	}
	var check []int64
	uses := map[int64][]Anomaly{}
	for i := range b.Transitions {
		t := &b.Transitions[i]
		if !isUse(t) || hasOrder(redeemedHere[t.Coupon], t.Order) {
			continue
		}
		if _, seen := uses[t.Coupon]; !seen {
			check = append(check, t.Coupon)
		}
		a := anomalyAt(t)
		a.Kind = inventory.AnomalyUsedWithoutRedemption
		uses[t.Coupon] = append(uses[t.Coupon], a)
	}
	if len(check) > 0 {
		// a peer that cannot be asked leaves its uses pending: the due
		// check asks again
		found, _, err := s.redeemed(ctx, check)
		if err != nil {
			return nil, err
		}
		deadline := s.cfg.Now().Add(s.cfg.RedemptionGrace)
		for _, c := range check {
			for _, a := range uses[c] {
				if !hasOrder(found[c], a.Order) {
					w.addPending(b, a, deadline)
				}
			}
		}
	}
	return w.duePending(ctx, b)
}

// addPending starts the check of a move into USED.
func (w *redemptionWait) addPending(b *batch, a Anomaly, deadline time.Time) {
	c := a.Coupon
	for i := range w.pending[c] {
		if w.pending[c][i].Order == a.Order {
			w.pending[c][i].moves++
			b.pendingDirty[redemptionKey{c, a.Order}] = true
			return
		}
	}
	if w.npending >= w.s.cfg.MaxPending {
		w.s.m.pendingDropped.Inc()
		return
	}
	w.pending[c] = append(w.pending[c], pendingUse{Anomaly: a, deadline: deadline, moves: 1})
	b.pendingDirty[redemptionKey{c, a.Order}] = true
	w.npending++
}

// settlePending drops the coupon's pending moves into USED that a new
// redemption row of order answers.
func (w *redemptionWait) settlePending(b *batch, c int64, order string) {
	uses := w.pending[c]
	keep := uses[:0]
	for _, p := range uses {
		if hasOrder([]string{order}, p.Order) {
			w.npending--
			b.pendingDirty[redemptionKey{c, p.Order}] = true
			continue
		}
		keep = append(keep, p)
	}
	w.keep(c, keep)
}

// keep makes keep the coupon's pending checks.
func (w *redemptionWait) keep(c int64, keep []pendingUse) {
	if len(keep) == 0 {
		delete(w.pending, c)
	} else {
		w.pending[c] = keep
	}
}

// duePending checks the coupons whose grace period ended: still no
// redemption row is an anomaly, one per move into USED.
func (w *redemptionWait) duePending(ctx context.Context, b *batch) ([]Anomaly, error) {
	s := w.s
	now := s.cfg.Now()
	var due []int64
	for c, uses := range w.pending {
		for _, p := range uses {
			if !now.Before(p.deadline) {
				due = append(due, c)
				break
			}
		}
	}
	if len(due) == 0 {
		return nil, nil
	}
	found, complete := map[int64][]string{}, true
	if !s.cfg.Mapping.EvidenceStates() { // with states only a row in the binlog answers a use (evidencestates.go)
		var err error
		if found, complete, err = s.redeemed(ctx, due); err != nil {
			return nil, err
		}
	}
	if !complete {
		return nil, nil // decided when every peer answers: a row there may settle them
	}
	var out []Anomaly
	for _, c := range due {
		var keep []pendingUse
		for _, p := range w.pending[c] {
			if now.Before(p.deadline) {
				keep = append(keep, p)
				continue
			}
			w.npending--
			b.pendingDirty[redemptionKey{c, p.Order}] = true
			if !hasOrder(found[c], p.Order) {
				p.Detail = fmt.Sprintf("coupon %d became USED (order %q) but no redemption row appeared within %s", c, p.Order, s.cfg.RedemptionGrace)
				for range p.moves {
					out = append(out, p.Anomaly)
				}
			}
		}
		w.keep(c, keep)
	}
	return out, nil
}

// savePending writes the pending checks the batch changed, in its
// transaction: a row for each still pending, none for each settled or
// decided.
func (w *redemptionWait) savePending(ctx context.Context, b *batch) error {
	if len(b.pendingDirty) == 0 {
		return nil
	}
	s, tx := w.s, b.tx
	var del []redemptionKey
	var ins strings.Builder
	var args []any
	for k := range b.pendingDirty {
		var p *pendingUse
		for i := range w.pending[k.coupon] {
			if w.pending[k.coupon][i].Order == k.order {
				p = &w.pending[k.coupon][i]
			}
		}
		if p == nil {
			del = append(del, k)
			continue
		}
		if len(args) > 0 {
			ins.WriteString(", ")
		}
		ins.WriteString("(?, ?, ?, ?, ?, ?, ?, ?)")
		args = append(args, s.cfg.Name, k.coupon, k.order, p.Template, p.Channel, p.From, p.moves, p.deadline.UTC())
	}
	if len(args) > 0 {
		if _, err := tx.ExecContext(ctx, `INSERT INTO cdc_pending_redemption (name, user_coupon_id, order_id, template_id, channel,
			from_status, moves, deadline) VALUES `+ins.String()+` ON DUPLICATE KEY UPDATE moves = VALUES(moves), deadline = VALUES(deadline)`,
			args...); err != nil {
			return fmt.Errorf("save pending redemption checks: %w", err)
		}
	}
	return deleteKeys(ctx, tx, s.cfg.Name, "cdc_pending_redemption", redemptionCols, del)
}

// loadPending replaces the pending checks with those saved with the
// checkpoint: what a crash or a restart left undecided.
func (w *redemptionWait) loadPending(ctx context.Context) error {
	s := w.s
	rows, err := s.db.QueryContext(ctx, `SELECT user_coupon_id, order_id, template_id, channel, from_status, moves, deadline
		FROM cdc_pending_redemption WHERE name = ?`, s.cfg.Name)
	if err != nil {
		return fmt.Errorf("read pending redemption checks: %w", err)
	}
	defer rows.Close()
	w.pending, w.npending = map[int64][]pendingUse{}, 0
	for rows.Next() {
		p := pendingUse{Anomaly: Anomaly{Kind: inventory.AnomalyUsedWithoutRedemption, To: coupon.Used}}
		if err := rows.Scan(&p.Coupon, &p.Order, &p.Template, &p.Channel, &p.From, &p.moves, &p.deadline); err != nil {
			return fmt.Errorf("read pending redemption checks: %w", err)
		}
		w.pending[p.Coupon] = append(w.pending[p.Coupon], p)
		w.npending++
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read pending redemption checks: %w", err)
	}
	if w.npending > 0 {
		s.log.Info("resuming redemption checks left pending", "coupons", len(w.pending), "checks", w.npending)
	}
	return nil
}

type redemptionKey struct {
	coupon int64
	order  string
}

func (k redemptionKey) parts() (int64, string) { return k.coupon, k.order }

// redemptionCols are the key columns of the redemption check tables.
var redemptionCols = [2]string{"user_coupon_id", "order_id"}
