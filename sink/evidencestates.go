package sink

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/internal/sqltx"
	"github.com/couponlink/couponlink/inventory"
)

// With evidence states (canal/evidencestates.go) a write-off row may end
// (an order cancelled or refunded and its coupon given back) and the
// coupon be used again, often within one batch, and a read of the live
// table may already show closed a row that proved a use at its binlog
// position. So a use is judged at its position, from the binlog alone:
// cdc_redemption_key holds per (coupon, order) the live rows and how many
// of them proved a use already (proved), as the last batch left them; the
// batch's rows and uses move them in binlog order. A use takes a live row
// of its coupon (and order) that proved nothing yet; without one it waits,
// and the next live row of its coupon inserted within the grace answers
// it (a shop that writes the order after the use). A row that ends drops
// what it proved. So a row proves one use: a coupon given back from its
// order and used again needs another, and a closed row proves nothing.
// The live table is never read: at the deadline a use that no row
// answered is used_without_redemption.

// evidenceKey is a (coupon, order)'s live rows and how many of them proved
// a use already.
type evidenceKey struct {
	live, proved int64
}

// waitingUse is a use of the batch that no row proved yet.
type waitingUse struct {
	Anomaly
	done bool
}

// evidenceCoupons are the coupons whose evidence a batch moves: those it
// uses and those its write-off rows name, each once, in batch order.
func evidenceCoupons(b *batch) []int64 {
	var coupons []int64
	seen := map[int64]bool{}
	note := func(c int64) {
		if !seen[c] {
			seen[c] = true
			coupons = append(coupons, c)
		}
	}
	for i := range b.Transitions {
		if t := &b.Transitions[i]; isUse(t) {
			note(t.Coupon)
		}
	}
	for i := range b.Redemptions {
		note(b.Redemptions[i].Coupon)
	}
	return coupons
}

// judgeAtPositions judges the batch's uses and rows in binlog order: it
// settles the pending checks a row answers, starts one for each use
// nothing proves, and leaves the proved counts it changed in b.proved.
func (w *redemptionWait) judgeAtPositions(ctx context.Context, b *batch) error {
	coupons := evidenceCoupons(b)
	if len(coupons) == 0 {
		return nil
	}
	keys, err := w.s.evidenceKeys(ctx, w.s.db, coupons)
	if err != nil {
		return err
	}
	changed := map[redemptionKey]bool{}
	key := func(k redemptionKey) *evidenceKey {
		if keys[k] == nil {
			keys[k] = &evidenceKey{}
		}
		return keys[k]
	}
	var waiting []*waitingUse
	row := func(i int) {
		r := &b.Redemptions[i]
		k := redemptionKey{r.Coupon, r.Order}
		e := key(k)
		if r.Deleted {
			e.live = max(e.live-1, 0)
			if e.proved > e.live {
				e.proved, changed[k] = e.live, true
			}
			return
		}
		e.live++
		j := slices.IndexFunc(waiting, func(u *waitingUse) bool {
			return !u.done && u.Coupon == r.Coupon && hasOrder([]string{r.Order}, u.Order)
		})
		switch {
		case j >= 0:
			waiting[j].done = true
		case w.settleOne(b, r.Coupon, r.Order):
		default:
			return
		}
		e.proved++
		changed[k] = true
	}
	next := 0
	for i := range b.Transitions {
		for ; next < len(b.Redemptions) && b.Redemptions[next].After <= i; next++ {
			row(next)
		}
		t := &b.Transitions[i]
		if !isUse(t) {
			continue
		}
		if k, ok := unproved(keys, t.Coupon, t.Order); ok {
			keys[k].proved++
			changed[k] = true
			continue
		}
		a := anomalyAt(t)
		a.Kind = inventory.AnomalyUsedWithoutRedemption
		waiting = append(waiting, &waitingUse{Anomaly: a})
	}
	for ; next < len(b.Redemptions); next++ {
		row(next)
	}
	deadline := w.s.cfg.Now().Add(w.s.cfg.RedemptionGrace)
	for _, u := range waiting {
		if !u.done {
			w.addPending(b, u.Anomaly, deadline)
		}
	}
	b.proved = map[redemptionKey]evidenceKey{}
	for k := range changed {
		b.proved[k] = *keys[k]
	}
	return nil
}

// unproved finds a key of the coupon, of order (any order when ""), with a
// live row that proved no use yet.
func unproved(keys map[redemptionKey]*evidenceKey, c int64, order string) (redemptionKey, bool) {
	var found []redemptionKey
	for k, e := range keys {
		if k.coupon == c && e.live > e.proved && hasOrder([]string{k.order}, order) {
			found = append(found, k)
		}
	}
	if len(found) == 0 {
		return redemptionKey{}, false
	}
	// the same one whatever the map's order, so that a replay decides alike
	slices.SortFunc(found, func(a, b redemptionKey) int { return strings.Compare(a.order, b.order) })
	return found[0], true
}

// settleOne answers one pending move into USED of the coupon by a new row
// of order, if one waits.
func (w *redemptionWait) settleOne(b *batch, c int64, order string) bool {
	uses := w.pending[c]
	for i := range uses {
		if !hasOrder([]string{order}, uses[i].Order) {
			continue
		}
		b.pendingDirty[redemptionKey{c, uses[i].Order}] = true
		if uses[i].moves--; uses[i].moves > 0 {
			return true
		}
		w.npending--
		w.keep(c, slices.Delete(uses, i, i+1))
		return true
	}
	return false
}

// isUse says whether a transition moves a coupon into USED.
func isUse(t *canal.Transition) bool {
	return t.To == coupon.Used && t.From != coupon.Used && !t.Undecodable
}

// evidenceKeys reads the live rows and proved uses of the coupons' keys
// (q: the database, committed by the last batch).
func (s *Sink) evidenceKeys(ctx context.Context, q inventory.Querier, coupons []int64) (map[redemptionKey]*evidenceKey, error) {
	out := map[redemptionKey]*evidenceKey{}
	for start := 0; start < len(coupons); start += 1000 {
		chunk := coupons[start:min(start+1000, len(coupons))]
		err := sqltx.EachRow(ctx, q, `SELECT user_coupon_id, order_id, row_count, proved FROM cdc_redemption_key
			WHERE name = ? AND user_coupon_id IN (`+sqltx.Placeholders(len(chunk))+`)`, append([]any{s.cfg.Name}, sqltx.Int64Args(chunk)...),
			func(rows *sql.Rows) error {
				var k redemptionKey
				var order []byte
				e := &evidenceKey{}
				if err := rows.Scan(&k.coupon, &order, &e.live, &e.proved); err != nil {
					return err
				}
				k.order = string(order)
				out[k] = e
				return nil
			})
		if err != nil {
			return nil, fmt.Errorf("read redemption keys: %w", err)
		}
	}
	return out, nil
}

// saveProved writes the proved uses the batch changed, in its
// transaction, after countRedemptions wrote the live rows of the same keys
// (a key with no live row left is gone, and proves nothing).
func (w *redemptionWait) saveProved(ctx context.Context, b *batch) error {
	ins := &rowInserter{tx: b.tx, what: "save proved uses", cols: 5,
		head: "INSERT INTO cdc_redemption_key (name, user_coupon_id, order_id, row_count, proved) VALUES ",
		tail: " ON DUPLICATE KEY UPDATE proved = VALUES(proved)"}
	for k, e := range b.proved {
		if e.live > 0 {
			if err := ins.add(ctx, w.s.cfg.Name, k.coupon, k.order, e.live, e.proved); err != nil {
				return err
			}
		}
	}
	return ins.flush(ctx)
}
