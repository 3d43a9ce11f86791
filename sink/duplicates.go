package sink

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/internal/sqltx"
	"github.com/couponlink/couponlink/inventory"
)

// The duplicate_redemption check: cdc_redemption_key counts the
// redemption rows per (coupon, order) as the binlog shows them, in the
// batch's transaction with the checkpoint (see redemption.go). With
// evidence states (canal/evidencestates.go) it counts the live rows only
// (a row closed is counted down like a deleted one), and a live row of
// a coupon that already has a live row of another order is a double_spend.

// duplicateRedemptions is the duplicate_redemption check.
type duplicateRedemptions struct {
	noCheck
	s *Sink
}

// on says whether duplicate redemption rows are looked for: the evidence
// is a redemption table, it has no unique key on (order, coupon) and the
// mapping names its order column.
func (c duplicateRedemptions) on() bool {
	m := c.s.cfg.Mapping
	return m.RedemptionEvidence() == canal.EvidenceTable && !c.s.cfg.RedemptionUnique && m.RedemptionLog.Order != ""
}

func (c duplicateRedemptions) seed(ctx context.Context, sd *seeding) ([]Anomaly, error) {
	return c.s.seedRedemptionKeys(ctx, sd.stx, sd.tx)
}

func (c duplicateRedemptions) write(ctx context.Context, b *batch) ([]Anomaly, error) {
	return c.s.countRedemptions(ctx, b.tx, b.Batch)
}

// countRedemptions counts the batch's redemption rows into
// cdc_redemption_key, in tx, in binlog order, and returns a
// duplicate_redemption anomaly per row inserted while its (coupon, order)
// already had one. A deleted row counts down: a row inserted after every
// earlier row of its key was deleted is not a duplicate.
func (s *Sink) countRedemptions(ctx context.Context, tx *sql.Tx, b *canal.Batch) ([]Anomaly, error) {
	if len(b.Redemptions) == 0 {
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
	states := s.cfg.Mapping.EvidenceStates()
	for i := range b.Redemptions {
		r := &b.Redemptions[i]
		k := redemptionKey{r.Coupon, r.Order}
		if r.Deleted {
			counts[k] = max(counts[k]-1, 0)
			continue
		}
		if counts[k] > 0 {
			out = append(out, Anomaly{Kind: inventory.AnomalyDuplicateRedemption, Coupon: r.Coupon, Order: r.Order,
				Detail: fmt.Sprintf("redemption %d is row %d of order %q on coupon %d", r.ID, counts[k]+1, r.Order, r.Coupon)})
		} else if other, ok := liveOrderBesides(counts, k); ok && states {
			out = append(out, Anomaly{Kind: inventory.AnomalyDoubleSpend, Coupon: r.Coupon, Order: r.Order,
				Detail: fmt.Sprintf("order %q (row %d) uses coupon %d while order %q still holds it: two live evidence rows", r.Order, r.ID, r.Coupon, other)})
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

// liveOrderBesides returns another order than k's that has a row of k's
// coupon in counts: with evidence states, only live rows are counted, so
// the coupon is behind two orders at once. An empty order (NULL) is none.
func liveOrderBesides(counts map[redemptionKey]int64, k redemptionKey) (string, bool) {
	if k.order == "" {
		return "", false
	}
	for o, n := range counts {
		if o.coupon == k.coupon && o.order != k.order && o.order != "" && n > 0 {
			return o.order, true
		}
	}
	return "", false
}

// redemptionCounts reads the stored counts of the coupons' keys, locked.
func (s *Sink) redemptionCounts(ctx context.Context, tx *sql.Tx, coupons []int64) (map[redemptionKey]int64, error) {
	out := map[redemptionKey]int64{}
	for start := 0; start < len(coupons); start += 1000 {
		chunk := coupons[start:min(start+1000, len(coupons))]
		err := addCounts(ctx, tx, "read redemption keys", `SELECT user_coupon_id, order_id, row_count FROM cdc_redemption_key
			WHERE name = ? AND user_coupon_id IN (`+sqltx.Placeholders(len(chunk))+`) FOR UPDATE`, append([]any{s.cfg.Name}, sqltx.Int64Args(chunk)...),
			func(c int64, order string) redemptionKey { return redemptionKey{c, order} }, out)
		if err != nil {
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
			out = append(out, Anomaly{Kind: inventory.AnomalyDuplicateRedemption, Coupon: d.k.coupon, Order: d.k.order,
				Detail: fmt.Sprintf("found at the snapshot of a bootstrap: order %q on coupon %d has %d redemption rows", d.k.order, d.k.coupon, d.n)})
		}
	}
	if err := s.placeCoupons(ctx, stx, nil, out); err != nil {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, "DELETE FROM cdc_redemption_key WHERE name = ?", s.cfg.Name); err != nil {
		return nil, fmt.Errorf("clear redemption keys: %w", err)
	}
	ins := &rowInserter{tx: tx, what: "write redemption keys", cols: 5,
		head: "INSERT INTO cdc_redemption_key (name, user_coupon_id, order_id, row_count, proved) VALUES "}
	var chunk []seededKey
	write := func() error {
		err := s.seedProved(ctx, stx, chunk)
		for _, k := range chunk {
			if err == nil {
				err = ins.add(ctx, s.cfg.Name, k.coupon, k.order, k.live, k.proved)
			}
		}
		chunk = chunk[:0]
		return err
	}
	err = s.src.RedemptionKeys(ctx, stx, false, func(c int64, order string, n int64) error {
		if chunk = append(chunk, seededKey{redemptionKey{c, order}, evidenceKey{live: n}}); len(chunk) == 1000 {
			return write()
		}
		return nil
	})
	if err == nil {
		err = write()
	}
	if err != nil {
		return nil, fmt.Errorf("count redemption rows of %s: %w", rl.Table, err)
	}
	return out, ins.flush(ctx)
}

// seededKey is a (coupon, order) a bootstrap counts.
type seededKey struct {
	redemptionKey
	evidenceKey
}

// seedProved gives, with evidence states, one live row of each coupon
// USED at the snapshot (stx) the use it proved: its use happened before
// the snapshot, by one of its live rows (evidencestates.go). A coupon
// not USED there proves nothing yet: its next use may be the one its row
// was written for.
func (s *Sink) seedProved(ctx context.Context, stx *sql.Tx, keys []seededKey) error {
	if !s.cfg.Mapping.EvidenceStates() || len(keys) == 0 {
		return nil
	}
	coupons := make([]int64, len(keys))
	for i, k := range keys {
		coupons[i] = k.coupon
	}
	used, err := s.src.UsedAmong(ctx, stx, coupons)
	if err != nil {
		return err
	}
	for i := range keys {
		if c := keys[i].coupon; used[c] {
			keys[i].proved, used[c] = 1, false
		}
	}
	return nil
}
