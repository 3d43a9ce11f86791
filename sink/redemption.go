package sink

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/internal/sqltx"
	"github.com/couponlink/couponlink/inventory"
)

// The two checks of redemption rows keep state beyond a batch, in
// couponlink's tables (migration 0004), written in the batch's transaction
// with the checkpoint: a replay after a crash neither loses nor repeats
// an anomaly.
//
//   - used_without_redemption: a coupon that became USED with no redemption
//     row of its order (in the batch or the table) is pending until the
//     grace has passed. Pending checks live in s.pending and, for those that
//     outlive the batch that changed them, in cdc_pending_redemption; a
//     start reloads them. The reference schema writes the row and the USED
//     update in one transaction, so its batches write nothing here. A batch
//     changes s.pending before its transaction and marks what it changed
//     (pendingDirty); a failed transaction stops the sink, and the next
//     Start reloads the table. A coupon leaving USED does not settle its
//     check: it was USED without a row all the same.
//   - duplicate_redemption: cdc_redemption_key counts the redemption rows
//     per (coupon, order) as the binlog shows them, never by a query on
//     the live table, whose rows may not be visible yet (the server sends a
//     transaction's events before InnoDB makes its rows visible).

// pendingUse is a coupon's move into USED (by Anomaly.Order) with no
// redemption row of that order seen yet; moves counts the moves of the
// coupon into USED by the same order that the check covers (usually 1),
// decided together at the first one's deadline.
type pendingUse struct {
	Anomaly
	deadline time.Time
	moves    int
}

// judgeRedemptions is the evidence table's part of judge: the batch's
// redemption rows settle pending checks, and its moves into USED without
// a redemption row of their order (in the batch or the table) start one;
// the checks whose grace ended are decided.
func (s *Sink) judgeRedemptions(ctx context.Context, b *canal.Batch) ([]Anomaly, error) {
	redeemedHere := map[int64][]string{}
	for i := range b.Redemptions {
		r := &b.Redemptions[i]
		if !r.Deleted {
			redeemedHere[r.Coupon] = append(redeemedHere[r.Coupon], r.Order)
			s.settlePending(r.Coupon, r.Order)
		}
	}
	var check []int64
	uses := map[int64][]Anomaly{}
	for i := range b.Transitions {
		t := &b.Transitions[i]
		if t.To != coupon.Used || t.From == coupon.Used || t.Undecodable || hasOrder(redeemedHere[t.Coupon], t.Order) {
			continue
		}
		if _, seen := uses[t.Coupon]; !seen {
			check = append(check, t.Coupon)
		}
		a := anomalyAt(t)
		a.Kind = AnomalyUsedWithoutRedemption
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
					s.addPending(a, deadline)
				}
			}
		}
	}
	return s.duePending(ctx)
}

// addPending starts the check of a move into USED.
func (s *Sink) addPending(a Anomaly, deadline time.Time) {
	c := a.Coupon
	for i := range s.pending[c] {
		if s.pending[c][i].Order == a.Order {
			s.pending[c][i].moves++
			s.pendingDirty[redemptionKey{c, a.Order}] = true
			return
		}
	}
	if s.npending >= s.cfg.MaxPending {
		s.m.pendingDropped.Inc()
		return
	}
	s.pending[c] = append(s.pending[c], pendingUse{Anomaly: a, deadline: deadline, moves: 1})
	s.pendingDirty[redemptionKey{c, a.Order}] = true
	s.npending++
}

// settlePending drops the coupon's pending moves into USED that a new
// redemption row of order answers.
func (s *Sink) settlePending(c int64, order string) {
	uses := s.pending[c]
	keep := uses[:0]
	for _, p := range uses {
		if hasOrder([]string{order}, p.Order) {
			s.npending--
			s.pendingDirty[redemptionKey{c, p.Order}] = true
			continue
		}
		keep = append(keep, p)
	}
	if len(keep) == 0 {
		delete(s.pending, c)
	} else {
		s.pending[c] = keep
	}
}

// duePending checks the coupons whose grace period ended: still no
// redemption row is an anomaly, one per move into USED.
func (s *Sink) duePending(ctx context.Context) ([]Anomaly, error) {
	now := s.cfg.Now()
	var due []int64
	for c, uses := range s.pending {
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
	found, complete, err := s.redeemed(ctx, due)
	if err != nil {
		return nil, err
	}
	if !complete {
		return nil, nil // decided when every peer answers: a row there may settle them
	}
	var out []Anomaly
	for _, c := range due {
		var keep []pendingUse
		for _, p := range s.pending[c] {
			if now.Before(p.deadline) {
				keep = append(keep, p)
				continue
			}
			s.npending--
			s.pendingDirty[redemptionKey{c, p.Order}] = true
			if !hasOrder(found[c], p.Order) {
				p.Detail = fmt.Sprintf("coupon %d became USED (order %q) but no redemption row appeared within %s", c, p.Order, s.cfg.RedemptionGrace)
				for range p.moves {
					out = append(out, p.Anomaly)
				}
			}
		}
		if len(keep) == 0 {
			delete(s.pending, c)
		} else {
			s.pending[c] = keep
		}
	}
	return out, nil
}

// savePending writes the pending checks the batch changed, in its
// transaction: a row for each still pending, none for each settled or
// decided.
func (s *Sink) savePending(ctx context.Context, tx *sql.Tx) error {
	if len(s.pendingDirty) == 0 {
		return nil
	}
	var del []redemptionKey
	var ins strings.Builder
	var args []any
	for k := range s.pendingDirty {
		var p *pendingUse
		for i := range s.pending[k.coupon] {
			if s.pending[k.coupon][i].Order == k.order {
				p = &s.pending[k.coupon][i]
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
func (s *Sink) loadPending(ctx context.Context) error {
	rows, err := s.db.QueryContext(ctx, `SELECT user_coupon_id, order_id, template_id, channel, from_status, moves, deadline
		FROM cdc_pending_redemption WHERE name = ?`, s.cfg.Name)
	if err != nil {
		return fmt.Errorf("read pending redemption checks: %w", err)
	}
	defer rows.Close()
	s.pending, s.pendingDirty, s.npending = map[int64][]pendingUse{}, map[redemptionKey]bool{}, 0
	for rows.Next() {
		p := pendingUse{Anomaly: Anomaly{Kind: AnomalyUsedWithoutRedemption, To: coupon.Used}}
		if err := rows.Scan(&p.Coupon, &p.Order, &p.Template, &p.Channel, &p.From, &p.moves, &p.deadline); err != nil {
			return fmt.Errorf("read pending redemption checks: %w", err)
		}
		s.pending[p.Coupon] = append(s.pending[p.Coupon], p)
		s.npending++
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read pending redemption checks: %w", err)
	}
	if s.npending > 0 {
		s.log.Info("resuming redemption checks left pending", "coupons", len(s.pending), "checks", s.npending)
	}
	return nil
}

type redemptionKey struct {
	coupon int64
	order  string
}

// checksDuplicates says whether duplicate redemption rows are looked for:
// the evidence is a redemption table, it has no unique key on (order,
// coupon) and the mapping names its order column.
func (s *Sink) checksDuplicates() bool {
	m := s.cfg.Mapping
	return m.RedemptionEvidence() == canal.EvidenceTable && !s.cfg.RedemptionUnique && m.RedemptionLog.Order != ""
}

// countRedemptions counts the batch's redemption rows into
// cdc_redemption_key, in tx, in binlog order, and returns a
// duplicate_redemption anomaly per row inserted while its (coupon, order)
// already had one. A deleted row counts down: a row inserted after every
// earlier row of its key was deleted is not a duplicate.
func (s *Sink) countRedemptions(ctx context.Context, tx *sql.Tx, b *canal.Batch) ([]Anomaly, error) {
	if !s.checksDuplicates() || len(b.Redemptions) == 0 {
		return nil, nil
	}
	var coupons []int64
	seen := map[int64]bool{}
	for i := range b.Redemptions {
		if c := b.Redemptions[i].Coupon; !seen[c] {
			seen[c] = true
			coupons = append(coupons, c)
		}
	}
	counts, err := s.redemptionCounts(ctx, tx, coupons)
	if err != nil {
		return nil, err
	}
	stored := map[redemptionKey]bool{}
	for k := range counts {
		stored[k] = true
	}
	var out []Anomaly
	for i := range b.Redemptions {
		r := &b.Redemptions[i]
		k := redemptionKey{r.Coupon, r.Order}
		if r.Deleted {
			counts[k] = max(counts[k]-1, 0)
			continue
		}
		if counts[k] > 0 {
			out = append(out, Anomaly{Kind: AnomalyDuplicateRedemption, Coupon: r.Coupon, Order: r.Order,
				Detail: fmt.Sprintf("redemption %d is row %d of order %q on coupon %d", r.ID, counts[k]+1, r.Order, r.Coupon)})
		}
		counts[k]++
	}
	var ins strings.Builder
	var args []any
	var del []redemptionKey
	for k, n := range counts {
		switch {
		case n > 0:
			if len(args) > 0 {
				ins.WriteString(", ")
			}
			ins.WriteString("(?, ?, ?, ?)")
			args = append(args, s.cfg.Name, k.coupon, k.order, n)
		case stored[k]:
			del = append(del, k)
		}
	}
	if len(args) > 0 {
		if _, err := tx.ExecContext(ctx, `INSERT INTO cdc_redemption_key (name, user_coupon_id, order_id, row_count) VALUES `+
			ins.String()+` ON DUPLICATE KEY UPDATE row_count = VALUES(row_count)`, args...); err != nil {
			return nil, fmt.Errorf("count redemption rows: %w", err)
		}
	}
	if err := deleteKeys(ctx, tx, s.cfg.Name, "cdc_redemption_key", redemptionCols, del); err != nil {
		return nil, err
	}
	return out, s.placeCoupons(ctx, tx, b, out)
}

func (k redemptionKey) parts() (int64, string) { return k.coupon, k.order }

// redemptionCols are the key columns of the redemption check tables.
var redemptionCols = [2]string{"user_coupon_id", "order_id"}

// redemptionCounts reads the stored counts of the coupons' keys, locked.
func (s *Sink) redemptionCounts(ctx context.Context, tx *sql.Tx, coupons []int64) (map[redemptionKey]int64, error) {
	out := map[redemptionKey]int64{}
	for start := 0; start < len(coupons); start += 1000 {
		chunk := coupons[start:min(start+1000, len(coupons))]
		rows, err := tx.QueryContext(ctx, `SELECT user_coupon_id, order_id, row_count FROM cdc_redemption_key
			WHERE name = ? AND user_coupon_id IN (`+sqltx.Placeholders(len(chunk))+`) FOR UPDATE`, append([]any{s.cfg.Name}, sqltx.Int64Args(chunk)...)...)
		if err != nil {
			return nil, fmt.Errorf("read redemption keys: %w", err)
		}
		for rows.Next() {
			var k redemptionKey
			var n int64
			if err := rows.Scan(&k.coupon, &k.order, &n); err != nil {
				rows.Close()
				return nil, err
			}
			out[k] = n
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// placeCoupons fills in the template and channel of the anomalies from
// their coupons: the batch's last image of the coupon, else its row.
func (s *Sink) placeCoupons(ctx context.Context, qr inventory.Querier, b *canal.Batch, as []Anomaly) error {
	if len(as) == 0 {
		return nil
	}
	at := map[int64]inventory.Pair{}
	if b != nil {
		for i := range b.Transitions {
			if t := &b.Transitions[i]; t.To != coupon.None {
				at[t.Coupon] = inventory.Pair{Template: t.Template, Channel: t.Channel}
			}
		}
	}
	var ask []int64
	for _, a := range as {
		if _, ok := at[a.Coupon]; !ok {
			at[a.Coupon] = inventory.Pair{}
			ask = append(ask, a.Coupon)
		}
	}
	found, err := s.pairsOf(ctx, qr, ask)
	if err != nil {
		return err
	}
	for c, p := range found {
		at[c] = p
	}
	for i := range as {
		p := at[as[i].Coupon]
		as[i].Template, as[i].Channel = p.Template, p.Channel
	}
	return nil
}

// seedRedemptionKeys is a bootstrap's part: it rewrites the checkpoint's
// redemption keys in tx from the redemption rows of the snapshot stx, and
// returns a duplicate_redemption anomaly per row of a (coupon, order)
// beyond its first that the keys did not count yet: on a first start,
// every duplicate already in the table; on a rebuild, those the skipped
// binlog held.
func (s *Sink) seedRedemptionKeys(ctx context.Context, stx, tx *sql.Tx) ([]Anomaly, error) {
	rl := s.cfg.Mapping.RedemptionLog
	type dup struct {
		k redemptionKey
		n int64
	}
	var dups []dup
	var coupons []int64
	seen := map[int64]bool{}
	err := s.src.RedemptionKeys(ctx, stx, true, func(c int64, order string, n int64) error {
		k := redemptionKey{c, order}
		dups = append(dups, dup{k, n})
		if !seen[k.coupon] {
			seen[k.coupon] = true
			coupons = append(coupons, k.coupon)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("look for duplicate redemptions in %s: %w", rl.Table, err)
	}
	old, err := s.redemptionCounts(ctx, tx, coupons)
	if err != nil {
		return nil, err
	}
	var out []Anomaly
	for _, d := range dups {
		for i := max(old[d.k], 1); i < d.n; i++ {
			out = append(out, Anomaly{Kind: AnomalyDuplicateRedemption, Coupon: d.k.coupon, Order: d.k.order,
				Detail: fmt.Sprintf("found at the snapshot of a bootstrap: order %q on coupon %d has %d redemption rows", d.k.order, d.k.coupon, d.n)})
		}
	}
	if err := s.placeCoupons(ctx, stx, nil, out); err != nil {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, "DELETE FROM cdc_redemption_key WHERE name = ?", s.cfg.Name); err != nil {
		return nil, fmt.Errorf("clear redemption keys: %w", err)
	}
	ins := &rowInserter{tx: tx, what: "write redemption keys", cols: 4,
		head: "INSERT INTO cdc_redemption_key (name, user_coupon_id, order_id, row_count) VALUES "}
	err = s.src.RedemptionKeys(ctx, stx, false, func(c int64, order string, n int64) error {
		return ins.add(ctx, s.cfg.Name, c, order, n)
	})
	if err != nil {
		return nil, fmt.Errorf("count redemption rows of %s: %w", rl.Table, err)
	}
	return out, ins.flush(ctx)
}
