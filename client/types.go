package client

import (
	"time"

	"github.com/couponlink/couponlink/api"
)

// The requests and answers of the API, as openapi.json describes them.

// The bodies of the coupon routes (package api has their fields).
type (
	NewTemplate   = api.NewTemplate   // the body of CreateTemplate
	Template      = api.Template      // a campaign
	ClaimRequest  = api.ClaimRequest  // the body of Claim; an empty RequestID is filled with NewRequestID
	Claim         = api.Claim         // a claimed coupon; Replayed: the answer of an earlier claim with the same request id
	RedeemRequest = api.RedeemRequest // the body of Redeem: the pair is its idempotency key
	Redemption    = api.Redemption    // a coupon redeemed by an order
	RefundRequest = api.RefundRequest // the body of Refund
	Refund        = api.Refund        // a refunded redemption
	VoidRequest   = api.VoidRequest   // the body of Void; an empty RequestID is filled with NewRequestID
	VoidResult    = api.VoidResult    // one coupon of a void batch
	VoidResponse  = api.VoidResponse  // the answer of Void
	ExpireResult  = api.ExpireResult  // the answer of Expire
	HistoryEvent  = api.HistoryEvent  // one change of a coupon
	History       = api.History       // a coupon's state and its changes, oldest first
	Health        = api.Health        // the answer of Health
)

// Refund modes.
const (
	RefundRestore = api.RefundRestore // the coupon goes back to the user
	RefundRecycle = api.RefundRecycle // the slot goes back to the pool
)

// States are the counts by state.
type States struct {
	Held     int64 `json:"held"`
	Used     int64 `json:"used"`
	Expired  int64 `json:"expired"`
	Returned int64 `json:"returned"`
	Released int64 `json:"released"`
	Frozen   int64 `json:"frozen"`
}

// Counts are a bucket's (or a template's) quota, claim guard and states.
type Counts struct {
	Quota     int64 `json:"quota"`
	Claimed   int64 `json:"claimed"`
	Claimable int64 `json:"claimable"`
	States
}

// Derived are the cdc's counters.
type Derived struct {
	Position    string            `json:"position"`
	EventTime   string            `json:"event_time,omitempty"`
	Checkpoint  string            `json:"checkpoint"`
	Channels    map[string]States `json:"channels"`
	Initialized bool              `json:"initialized"`
	States
}

// Inventory is a template's live counts.
type Inventory struct {
	TemplateID int64 `json:"template_id"`
	TotalQuota int64 `json:"total_quota"`
	Counts
	Channels  map[string]Counts `json:"channels"`
	Conserved bool              `json:"conserved"`
	Derived   *Derived          `json:"derived,omitempty"`
}

// Transfer is an applied quota move.
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

// ChannelView is a channel bucket.
type ChannelView struct {
	Channel        string    `json:"channel"`
	Quota          int64     `json:"quota"`
	Claimed        int64     `json:"claimed"`
	Held           int64     `json:"held"`
	Used           int64     `json:"used"`
	Expired        int64     `json:"expired"`
	Returned       int64     `json:"returned"`
	Released       int64     `json:"released"`
	Claimable      int64     `json:"claimable"`
	RedemptionRate *float64  `json:"redemption_rate"`
	LastTransfer   *Transfer `json:"last_transfer"`
}

// Channels is the answer of Channels.
type Channels struct {
	Template int64         `json:"template"`
	Channels []ChannelView `json:"channels"`
	// CDC is the cdc checkpoint the counts reflect; nil when the API
	// names none (-cdc-name).
	CDC *CDCPosition `json:"cdc,omitempty"`
}

// CDCPosition is where a cdc checkpoint stands; Found false: the cdc has
// not run against the database.
type CDCPosition struct {
	Checkpoint string     `json:"checkpoint"`
	Found      bool       `json:"found"`
	Position   string     `json:"position,omitempty"`   // file:pos [gtid=...]
	EventTime  *time.Time `json:"event_time,omitempty"` // the binlog time of the last event the counts cover
	SavedAt    *time.Time `json:"saved_at,omitempty"`
}

// Policy is a quota policy.
type Policy struct {
	Mode            string  `json:"mode"` // off, signal or auto
	Low             float64 `json:"low"`
	High            float64 `json:"high"`
	MinClaims       int64   `json:"min_claims"`
	MaxShare        float64 `json:"max_share"`
	Reserve         float64 `json:"reserve"`
	CooldownSeconds int64   `json:"cooldown_seconds"`
	MinAgeSeconds   int64   `json:"min_age_seconds"`
}

// Override is the fields a template sets itself (nil: the default's);
// as the body of SetQuotaPolicy, nil fields keep their value.
type Override struct {
	Mode            *string  `json:"mode,omitempty"`
	Low             *float64 `json:"low,omitempty"`
	High            *float64 `json:"high,omitempty"`
	MinClaims       *int64   `json:"min_claims,omitempty"`
	MaxShare        *float64 `json:"max_share,omitempty"`
	Reserve         *float64 `json:"reserve,omitempty"`
	CooldownSeconds *int64   `json:"cooldown_seconds,omitempty"`
	MinAgeSeconds   *int64   `json:"min_age_seconds,omitempty"`
}

// PolicyChange is the body of SetQuotaPolicy: who, why and what.
type PolicyChange struct {
	Override
	ChangedBy string `json:"changed_by"`
	Reason    string `json:"reason"`
}

// PolicyView is a template's effective policy, the defaults and its
// override.
type PolicyView struct {
	Template  int64      `json:"template"`
	Effective Policy     `json:"effective"`
	Defaults  Policy     `json:"defaults"`
	Override  Override   `json:"override"`
	Version   int64      `json:"version"`
	UpdatedBy string     `json:"updated_by"`
	UpdatedAt *time.Time `json:"updated_at"`
}
