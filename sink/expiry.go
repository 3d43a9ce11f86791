package sink

import (
	"context"
	"fmt"
	"time"

	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/inventory"
)

// endTimes is the used_after_expiry check.
type endTimes struct {
	noCheck
	s *Sink
}

// on says whether coupons used after their campaign's end or their own
// expiry are looked for (template.end_time or user_coupon.expires_at
// mapped).
func (c endTimes) on() bool {
	m := c.s.cfg.Mapping
	return !m.Reference() && (m.Template.EndTime.Column != "" || m.UserCoupon.ExpiresAt.Column != "")
}

// judge finds the batch's coupons that moved into USED, or were
// restored to AVAILABLE from USED, RETURNED or EXPIRED, after their
// template's end time in force at that point of the binlog (judged by
// TemplateInfo.Ended at the event's time), or after the coupon's own
// expiry (its row's expires_at, Transition.Expires): a shop that never
// writes an expired status still must not take an expired coupon. A
// coupon of a fixed-window campaign (template.fixed_window, in force at
// that point) is judged by its campaign's end alone.
func (c endTimes) judge(_ context.Context, b *batch) ([]Anomaly, error) {
	var out []Anomaly
	cur := c.s.tplCursor(b)
	for i := range b.Transitions {
		t := &b.Transitions[i]
		used := t.To == coupon.Used && t.From != coupon.Used
		restored := t.To == coupon.Available && (t.From == coupon.Used || t.From == coupon.Returned || t.From == coupon.Expired)
		if t.Undecodable || (!used && !restored) {
			continue
		}
		info := cur.at(i, t.Template)
		var after string
		switch {
		case info.Ended(t.At):
			after = fmt.Sprintf("its template %d ended at %s", t.Template, info.EndTime.UTC().Format(time.DateTime))
		case used && info.Outside(t.At):
			after = fmt.Sprintf("before its template %d's window opened at %s", t.Template, info.StartTime.UTC().Format(time.DateTime))
		case !info.Window && !t.Expires.IsZero() && t.At.After(t.Expires): // a fixed window's coupons follow its end (canal/window.go)
			after = fmt.Sprintf("its own expiry at %s", t.Expires.UTC().Format(time.DateTime))
		default:
			continue
		}
		what := "used"
		if restored {
			what = "restored to AVAILABLE"
		}
		a := anomalyAt(t)
		a.Kind = inventory.AnomalyUsedAfterExpiry
		a.Detail = fmt.Sprintf("coupon %d was %s at %s (UTC), after %s (%s)", t.Coupon, what, t.At.UTC().Format(time.DateTime), after, t.Change())
		out = append(out, a)
	}
	return out, nil
}
