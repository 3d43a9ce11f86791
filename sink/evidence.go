package sink

import (
	"context"
	"fmt"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/inventory"
)

// What proves a use depends on the mapping's redemption evidence
// (canal.Evidence):
//
//   - table: a redemption row per coupon and order (redemption.go): a
//     move into USED without one within the grace is used_without_redemption,
//     a repeated row a duplicate_redemption.
//   - coupon_order: the coupon row's own order column. The row image that
//     moves into USED is the evidence, so it is judged at once: no order is
//     used_without_redemption; a USED coupon whose order changes to another
//     while it stays USED was spent twice (double_spend). A refund back to
//     AVAILABLE and a new use with another order is legal. A move into USED
//     that keeps the order the row already had (a shop whose give-back
//     leaves the old order id on the row) proves nothing: the coupon was
//     given back from that order, so it is used_without_redemption, unless
//     the mapping's orders (status, closed) say that order is open (a shop
//     that writes the order at checkout and the use at payment).
//   - order_table: orders that name the template and the user, not the
//     coupon; counted per (template, user) against the USED coupons, in the
//     batch's transaction (orders.go).
//   - none: the USED transition is its own evidence; nothing is checked
//     and no redemption table is read.

// couponOrders is the check of the coupon_order evidence (the
// table evidence is redemption.go's, order_table orders.go's).
type couponOrders struct {
	noCheck
	s *Sink
}

func (c couponOrders) on() bool {
	return c.s.cfg.Mapping.RedemptionEvidence() == canal.EvidenceCouponOrder
}

// load looks up, with the mapping's orders, which of the orders kept by
// the batch's moves into USED are open (b.openOrders).
func (c couponOrders) load(ctx context.Context, b *batch) error {
	if c.s.cfg.Mapping.Orders == nil {
		return nil
	}
	var kept []string
	for i := range b.Transitions {
		if t := &b.Transitions[i]; keptOrder(t) {
			kept = append(kept, t.Order)
		}
	}
	if len(kept) == 0 {
		return nil
	}
	var err error
	b.openOrders, err = c.s.src.OpenOrders(ctx, c.s.db, kept)
	return err
}

func (c couponOrders) judge(_ context.Context, b *batch) ([]Anomaly, error) {
	return judgeCouponOrders(b.Batch, c.s.cfg.Mapping.UserCoupon.Order, b.openOrders), nil
}

// keptOrder says whether t moves a coupon into USED with the order its row
// had before (an INSERT has no before).
func keptOrder(t *canal.Transition) bool {
	return t.To == coupon.Used && t.From != coupon.Used && t.From != coupon.None && !t.Undecodable &&
		t.Order != "" && t.Order == t.PrevOrder
}

// judgeCouponOrders judges the order column (named column) of the coupon
// rows that moved into USED, or stayed USED, in the batch; open are the
// kept orders the order table says are open.
func judgeCouponOrders(b *canal.Batch, column string, open map[string]bool) []Anomaly {
	var out []Anomaly
	for i := range b.Transitions {
		t := &b.Transitions[i]
		if t.To != coupon.Used || t.Undecodable {
			continue // an undecodable image is an undecodable_row, judged nowhere else
		}
		a := anomalyAt(t)
		switch {
		case t.From != coupon.Used && t.Order == "":
			a.Kind = inventory.AnomalyUsedWithoutRedemption
			a.Detail = fmt.Sprintf("coupon %d became USED with no order in its %s column", t.Coupon, column)
		case keptOrder(t) && !open[t.Order]:
			a.Kind, a.Order = inventory.AnomalyUsedWithoutRedemption, t.Order
			a.Detail = fmt.Sprintf("coupon %d became USED again with order %q, which its %s column kept when the coupon was given back from it",
				t.Coupon, t.Order, column)
		case t.From == coupon.Used && t.PrevOrder != "" && t.Order != "" && t.PrevOrder != t.Order:
			a.Kind = inventory.AnomalyDoubleSpend
			a.Detail = fmt.Sprintf("coupon %d, USED by order %q, was used by order %q without leaving USED", t.Coupon, t.PrevOrder, t.Order)
		default:
			continue
		}
		out = append(out, a)
	}
	return out
}
