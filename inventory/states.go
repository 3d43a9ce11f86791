package inventory

import "strings"

// The rows a shop ended without deleting them (canal/states.go): a
// soft-deleted coupon is counted nowhere, a closed or soft-deleted order
// proves nothing; the snapshot's queries leave them out as the cdc does.

// liveCoupon is the condition that leaves out soft-deleted coupons ("":
// the coupon table has no soft-delete column).
func (s *Queries) liveCoupon() string {
	return s.m.UserCoupon.Deleted.NotSQL(quoteIdent)
}

// openOrder is the condition that leaves out closed and soft-deleted
// orders ("": the order table has neither state).
func (s *Queries) openOrder() string {
	o := s.m.Orders
	if o == nil {
		return ""
	}
	return and(o.ClosedWhen().NotSQL(quoteIdent), o.Deleted.NotSQL(quoteIdent))
}

// liveEvidence is the condition that leaves out the evidence rows that
// prove nothing any more, closed or soft-deleted ("": the evidence table
// has no states).
func (s *Queries) liveEvidence() string {
	return s.m.EvidenceEnded().NotSQL(quoteIdent)
}

// fixedWindow is the SELECT expression 1 for a campaign whose coupons
// follow its current window, else 0 (template.fixed_window).
func (s *Queries) fixedWindow() string {
	return caseWhen(s.m.Template.FixedWindow.SQL(quoteIdent))
}

// caseWhen is the SELECT expression 1 when cond holds, else 0 (0 when
// cond is "").
func caseWhen(cond string) string {
	if cond == "" {
		return "0"
	}
	return "CASE WHEN " + cond + " THEN 1 ELSE 0 END"
}

// offShelf is the SELECT expression 1 for a campaign off the shelf, else
// 0 (always 0 when the mapping names no such state).
func (s *Queries) offShelf() string {
	return caseWhen(s.m.Template.OffShelfWhen().SQL(quoteIdent))
}

// and joins the conditions that are not "" with AND.
func and(conds ...string) string {
	var out []string
	for _, c := range conds {
		if c != "" {
			out = append(out, c)
		}
	}
	return strings.Join(out, " AND ")
}

// andAlso is " AND cond", or "" when cond is "": to append to a WHERE.
func andAlso(cond string) string {
	if cond == "" {
		return ""
	}
	return " AND " + cond
}
