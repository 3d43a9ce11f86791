package api

import "time"

// The channel buckets of a template, as GET /v1/templates/{id}/channels
// answers them.

// Transfer is one quota_transfer_log row: a move of Amount claimable
// quota From one channel To another, applied (mode auto) or recommended
// (mode signal).
type Transfer struct {
	ID       int64     `json:"id"`
	Decision string    `json:"decision"`
	From     string    `json:"from"`
	To       string    `json:"to"`
	Amount   int64     `json:"amount"`
	Rule     string    `json:"rule"`
	Mode     string    `json:"mode"`
	At       time.Time `json:"at"`
}

// ChannelView is one channel bucket as operators read it: its quota and
// claim guard (claimed), the cdc's state counts, redemption rate and last
// applied transfer.
type ChannelView struct {
	Channel   string `json:"channel"`
	Quota     int64  `json:"quota"`
	Claimed   int64  `json:"claimed"`
	Held      int64  `json:"held"`
	Used      int64  `json:"used"`
	Expired   int64  `json:"expired"`
	Returned  int64  `json:"returned"`
	Released  int64  `json:"released"`
	Claimable int64  `json:"claimable"`
	// RedemptionRate is used / (claims − released); nil while no slot is held.
	RedemptionRate *float64 `json:"redemption_rate"`
	// LastTransfer is the newest applied move from or to the channel; nil: none.
	LastTransfer *Transfer `json:"last_transfer"`
}

// Channels is the answer of GET /v1/templates/{id}/channels.
type Channels struct {
	Template int64         `json:"template"`
	Channels []ChannelView `json:"channels"`
	// CDC is the cdc checkpoint the counts reflect (the API's -cdc-name),
	// read in the same snapshot; absent when the API names none.
	CDC *CDCPosition `json:"cdc,omitempty"`
}

// CDCPosition is where a named cdc checkpoint stands.
type CDCPosition struct {
	Checkpoint string     `json:"checkpoint"`
	Found      bool       `json:"found"` // false: the cdc has not run against this database
	Position   string     `json:"position,omitempty"`
	EventTime  *time.Time `json:"event_time,omitempty"` // binlog time of the last event the counters cover
	SavedAt    *time.Time `json:"saved_at,omitempty"`
}
