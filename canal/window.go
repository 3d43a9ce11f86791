package canal

import "fmt"

// Expiry by the shop's rule: a shop may copy the campaign's end onto each
// coupon at claim time (user_coupon.expires_at) but judge the coupons of
// some campaigns, fixed-window ones, against the campaign's current window,
// so that extending the campaign extends them. template.fixed_window (an
// AnyOf on the campaign's columns, e.g. {column: type, values: [1]}) names
// those campaigns: their coupons' own expires_at does not bind, their
// campaign's end (template.end_time) in force at the use's binlog position
// does, and so does its start (template.start_time: a use before it is
// outside the window too). Other campaigns' coupons (a relative validity: N days from the
// claim) keep their own end. The state is followed from the binlog like
// the campaign's other rules.

// validateWindow checks template.fixed_window.
func (m *Mapping) validateWindow() []error {
	t := m.Template
	errs := t.FixedWindow.validate("template", "fixed_window", "value", "{column: type, values: [1]}")
	if len(t.FixedWindow) > 0 && (m.reference || t.EndTime.Column == "" || m.UserCoupon.ExpiresAt.Column == "") {
		errs = append(errs, fmt.Errorf("mapping: template.fixed_window says which coupons follow their campaign's end rather than their own: it needs template.end_time and user_coupon.expires_at"))
	}
	if t.StartTime.Column != "" && len(t.FixedWindow) == 0 {
		errs = append(errs, fmt.Errorf("mapping: template.start_time judges the uses of fixed-window coupons: it needs template.fixed_window"))
	}
	return errs
}
