package sink

import (
	"context"

	"github.com/couponlink/couponlink/coupon"
)

// With evidence states (canal/evidencestates.go) a write-off row may end
// (an order cancelled or refunded and its coupon given back) and the
// coupon be used again, often within one batch, and a read of the live
// table may already show a row closed that proved a use at its binlog
// position. So a use is judged at its position: proven by the live rows
// cdc_redemption_key counted up to the last batch (the binlog's view,
// written with the checkpoint), moved by the batch's own rows in binlog
// order, or by a row the batch inserts after it (a shop that writes the
// order after the use). A row that ended before the use proves nothing,
// and neither does a live row of another order than the use's.

// provenAtUse says, for each index of the batch's Transitions that moves a
// coupon into USED, whether a live evidence row of its coupon and order
// stands at its position or follows it in the batch.
func (w *redemptionWait) provenAtUse(ctx context.Context, b *batch) (map[int]bool, error) {
	var coupons []int64
	seen := map[int64]bool{}
	for i := range b.Transitions {
		if t := &b.Transitions[i]; isUse(t.To, t.From, t.Undecodable) && !seen[t.Coupon] {
			seen[t.Coupon] = true
			coupons = append(coupons, t.Coupon)
		}
	}
	if len(coupons) == 0 {
		return nil, nil
	}
	live, err := w.s.readRedemptionCounts(ctx, w.s.db, coupons, "")
	if err != nil {
		return nil, err
	}
	proven := map[int]bool{}
	next := 0
	for i := range b.Transitions {
		for ; next < len(b.Redemptions) && b.Redemptions[next].After <= i; next++ {
			r := &b.Redemptions[next]
			k := redemptionKey{r.Coupon, r.Order}
			if r.Deleted {
				live[k] = max(live[k]-1, 0)
			} else {
				live[k]++
			}
		}
		t := &b.Transitions[i]
		if !isUse(t.To, t.From, t.Undecodable) {
			continue
		}
		for k, n := range live {
			if k.coupon == t.Coupon && n > 0 && hasOrder([]string{k.order}, t.Order) {
				proven[i] = true
			}
		}
		for _, r := range b.Redemptions[next:] {
			if r.Coupon == t.Coupon && !r.Deleted && hasOrder([]string{r.Order}, t.Order) {
				proven[i] = true
			}
		}
	}
	return proven, nil
}

// isUse says whether a transition moves a coupon into USED.
func isUse(to, from coupon.Status, undecodable bool) bool {
	return to == coupon.Used && from != coupon.Used && !undecodable
}
