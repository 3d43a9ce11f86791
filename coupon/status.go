// Package coupon is the domain of couponlink: the states of a user coupon,
// the legal transitions between them, and the MySQL transactions that move a
// coupon from one state to the next together with its ledger row.
package coupon

import "fmt"

// Status is the state of one user coupon, as stored in user_coupon.status.
type Status int8

// The stored codes of the reference schema. Legacy schemas map their own
// codes onto these (see the canal package's mapping).
const (
	None      Status = 0 // no row: before a claim, or after a DELETE
	Available Status = 1 // claimed, held by the user, not yet redeemed
	Used      Status = 2 // redeemed by an order
	Expired   Status = 3 // lapsed unredeemed; frozen or released by policy
	Returned  Status = 4 // voided or refunded-and-recycled; released to the pool
)

// Statuses lists the four real states in code order.
var Statuses = []Status{Available, Used, Expired, Returned}

func (s Status) String() string {
	switch s {
	case None:
		return "NONE"
	case Available:
		return "AVAILABLE"
	case Used:
		return "USED"
	case Expired:
		return "EXPIRED"
	case Returned:
		return "RETURNED"
	}
	return fmt.Sprintf("Status(%d)", int8(s))
}

// Valid reports whether s is one of the four stored states.
func (s Status) Valid() bool { return s >= Available && s <= Returned }

// ParseStatus turns a name such as "USED" into its Status.
func ParseStatus(name string) (Status, error) {
	for _, s := range append([]Status{None}, Statuses...) {
		if s.String() == name {
			return s, nil
		}
	}
	return None, fmt.Errorf("unknown coupon status %q (want AVAILABLE, USED, EXPIRED or RETURNED)", name)
}
