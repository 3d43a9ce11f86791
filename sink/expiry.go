package sink

import (
	"context"
	"fmt"
	"time"

	"github.com/couponlink/couponlink/coupon"
)

// endTimes is the used_after_expiry check.
type endTimes struct {
	noCheck
	s *Sink
}

// on says whether coupons used after their campaign's end are looked for
// (template.end_time mapped).
func (c endTimes) on() bool {
	return !c.s.cfg.Mapping.Reference() && c.s.cfg.Mapping.Template.EndTime != ""
}

// judge finds the batch's coupons that moved into USED, or were
// restored to AVAILABLE from USED, RETURNED or EXPIRED, after their
// template's end time in force at that point of the binlog (judged by
// TemplateInfo.Ended at the event's time): a shop that never writes an
// expired status still must not take a coupon of an ended campaign.
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
		if !info.Ended(t.At) {
			continue
		}
		what := "used"
		if restored {
			what = "restored to AVAILABLE"
		}
		a := anomalyAt(t)
		a.Kind = AnomalyUsedAfterExpiry
		a.Detail = fmt.Sprintf("coupon %d was %s at %s, after its template %d ended at %s (%s)",
			t.Coupon, what, t.At.UTC().Format(time.DateTime), t.Template, info.EndTime.Format(time.DateTime), t.Change())
		out = append(out, a)
	}
	return out, nil
}
