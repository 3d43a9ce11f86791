package sink

import (
	"fmt"

	"github.com/couponlink/couponlink/api"
	"github.com/couponlink/couponlink/inventory"
)

// anomalyFindings are the findings the anomalies are (inventory.Seen):
// the rows an anomaly names are its coupon (and order) when it names
// one, else its template and channel, else the row the mapping could not
// decode; what it found of them is its states, order and detail, so that
// another value (another order, more rows, another count) opens an
// acknowledged finding again.
func (s *Sink) anomalyFindings(as []Anomaly) []inventory.Seen {
	out := make([]inventory.Seen, len(as))
	for i, a := range as {
		var subject string
		switch {
		case a.Coupon != 0:
			subject = fmt.Sprintf("coupon %d", a.Coupon)
			if a.Order != "" {
				subject += fmt.Sprintf(" order %q", a.Order)
			}
		case a.Template != 0:
			subject = fmt.Sprintf("template %d channel %q", a.Template, a.Channel)
		default:
			subject = a.Detail
		}
		out[i] = inventory.Seen{Source: api.FindingFromCDC, Kind: a.Kind, Subject: subject,
			Content: fmt.Sprintf("%s %q %s", s.change(a), a.Order, a.Detail), Summary: a.Detail}
	}
	return out
}
