package sink

import (
	"context"
	"fmt"

	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/inventory"
)

// offShelf is the claimed_off_shelf check: a coupon that appears (a
// claim, or a soft-deleted one undeleted) while its campaign is off the
// shelf in force at that point of the binlog (the template cache,
// templates.go: template.status or template.deleted), as a shop whose
// claim path forgets to look at the campaign's state gives it.
type offShelf struct {
	noCheck
	s *Sink
}

func (c offShelf) on() bool {
	t := c.s.cfg.Mapping.Template
	return !c.s.cfg.Mapping.Reference() && len(t.OffShelfWhen()) > 0
}

func (c offShelf) judge(_ context.Context, b *batch) ([]Anomaly, error) {
	var out []Anomaly
	cur := c.s.tplCursor(b)
	for i := range b.Transitions {
		t := &b.Transitions[i]
		if t.From != coupon.None || t.To == coupon.None || t.Undecodable || !cur.at(i, t.Template).OffShelf {
			continue
		}
		a := anomalyAt(t)
		a.Kind = inventory.AnomalyClaimedOffShelf
		a.Detail = fmt.Sprintf("coupon %d of template %d was claimed while the campaign was off the shelf (%s)", t.Coupon, t.Template, t.Change())
		out = append(out, a)
	}
	return out, nil
}
