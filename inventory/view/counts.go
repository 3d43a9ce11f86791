package view

import "github.com/couponlink/couponlink/coupon"

// Counts are the states of a channel bucket's (or a template's) quota:
//
//	quota     = claimable + held + used + frozen     (conservation)
//	claimable = quota - claimed                      (channel_quota)
//	frozen    = expired + returned - released        (slots neither claimable nor held nor used)
//
// Held, Used, Expired, Returned and Released are the derived counters (as
// in inventory_counter, a snapshot of the source tables or a batch's
// deltas). Quota and Claimed are the bucket's channel_quota row (summed
// for a template) where the reader read it (the live view, status); the
// counters leave them 0.
type Counts struct {
	Quota, Claimed                          int64
	Held, Used, Expired, Returned, Released int64
}

// Claimable is what is left to give out.
func (c Counts) Claimable() int64 { return c.Quota - c.Claimed }

// Issued is every coupon ever claimed from the pair and still a row.
func (c Counts) Issued() int64 { return c.Held + c.Used + c.Expired + c.Returned }

// Frozen is the slots neither claimable, held nor used.
func (c Counts) Frozen() int64 { return c.Expired + c.Returned - c.Released }

// Taken is held + used + frozen: what the pair's quota must cover.
func (c Counts) Taken() int64 { return c.Held + c.Used + c.Frozen() }

// Conserved reports whether quota = claimable + held + used + frozen with
// every term non-negative.
func (c Counts) Conserved() bool {
	return c.Claimable() >= 0 && c.Held >= 0 && c.Used >= 0 && c.Frozen() >= 0 &&
		c.Quota == c.Claimable()+c.Held+c.Used+c.Frozen()
}

// Add adds o to c, field by field.
func (c *Counts) Add(o Counts) {
	c.Quota += o.Quota
	c.Claimed += o.Claimed
	c.Held += o.Held
	c.Used += o.Used
	c.Expired += o.Expired
	c.Returned += o.Returned
	c.Released += o.Released
}

// Bump adds n coupons in state s to c, and reports whether s is one of
// the four stored states (false: c is unchanged).
func (c *Counts) Bump(s coupon.Status, n int64) bool {
	switch s {
	case coupon.Available:
		c.Held += n
	case coupon.Used:
		c.Used += n
	case coupon.Expired:
		c.Expired += n
	case coupon.Returned:
		c.Returned += n
	default:
		return false
	}
	return true
}
