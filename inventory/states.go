package inventory

import (
	"fmt"
	"strings"
)

// The rows a shop ended without deleting them (canal/states.go): a
// soft-deleted coupon is counted nowhere, a closed or soft-deleted order
// proves nothing; the snapshot's queries leave them out as the cdc does.

// liveCoupon is the condition that leaves out soft-deleted coupons ("":
// the coupon table has no soft-delete column).
func (s *Queries) liveCoupon() string {
	d := s.m.UserCoupon.Deleted
	return notIn(d.Col(), d.Codes())
}

// openOrder is the condition that leaves out closed and soft-deleted
// orders ("": the order table has neither column).
func (s *Queries) openOrder() string {
	o := s.m.Orders
	if o == nil {
		return ""
	}
	return and(notIn(o.Status, o.Closed), notIn(o.Deleted.Col(), o.Deleted.Codes()))
}

// notIn is "col is NULL or none of codes" ("" without a column); the
// codes are integers from the mapping, written as literals.
func notIn(col string, codes []int64) string {
	if col == "" || len(codes) == 0 {
		return ""
	}
	lits := make([]string, len(codes))
	for i, c := range codes {
		lits[i] = fmt.Sprint(c)
	}
	q := quoteIdent(col)
	return fmt.Sprintf("(%s IS NULL OR %s NOT IN (%s))", q, q, strings.Join(lits, ", "))
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
