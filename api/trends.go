package api

import "time"

// Trends is the answer of GET /v1/templates/{id}/trends: per channel,
// claims, redemptions and releases per minute over the last Hours hours,
// read from the ledger (user_coupon.claimed_at, redemption_log.redeemed_at,
// inventory_flow release rows).
type Trends struct {
	Template int64     `json:"template"`
	Hours    int       `json:"hours"`
	From     time.Time `json:"from"` // the start of the first minute
	To       time.Time `json:"to"`   // the end of the last minute (the current one)
	// Channels are the template's channels by name; each series has one
	// count per minute from From, Hours × 60 of them.
	Channels []ChannelTrend `json:"channels"`
}

// ChannelTrend is one channel's counts per minute.
type ChannelTrend struct {
	Channel     string  `json:"channel"`
	Claims      []int64 `json:"claims"`
	Redemptions []int64 `json:"redemptions"`
	Releases    []int64 `json:"releases"`
}
