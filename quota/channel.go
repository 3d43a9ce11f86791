package quota

// Channel is one channel bucket of a template, as the rule sees it: its
// quota and claim guard (channel_quota) and its derived state counts
// (inventory_counter, at the cdc's checkpoint).
type Channel struct {
	Name     string `json:"channel"`
	Quota    int64  `json:"quota"`
	Claimed  int64  `json:"claimed"` // the claim guard: slots taken and not released
	Held     int64  `json:"held"`
	Used     int64  `json:"used"`
	Expired  int64  `json:"expired"`
	Returned int64  `json:"returned"`
	Released int64  `json:"released"`
}

// Claimable is the quota not claimed yet.
func (c Channel) Claimable() int64 { return max(c.Quota-c.Claimed, 0) }

// Claims is how many coupons the channel ever gave out.
func (c Channel) Claims() int64 { return c.Held + c.Used + c.Expired + c.Returned }

// Rate is the redemption rate, used / (claims − released): of the slots the
// channel's users still hold or consumed, the share redeemed. ok is false
// when no slot is held.
func (c Channel) Rate() (rate float64, ok bool) {
	return Rate(c.Used, c.Claims(), c.Released)
}

// Rate is used / (claims − released), the one definition of a redemption
// rate (the rule, the metric and the status views all use it).
func Rate(used, claims, released int64) (float64, bool) {
	d := claims - released
	if d <= 0 {
		return 0, false
	}
	return float64(used) / float64(d), true
}
