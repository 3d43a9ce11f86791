package client

import "time"

// The requests and answers of the API, as openapi.json describes them.

// NewTemplate is the body of CreateTemplate.
type NewTemplate struct {
	Name         string           `json:"name"`
	TotalQuota   int64            `json:"total_quota"`
	Channels     map[string]int64 `json:"channels"` // quota per channel bucket; adds up to TotalQuota
	ValidSeconds int64            `json:"valid_seconds"`
	PerUserLimit *int64           `json:"per_user_limit,omitempty"` // nil: 1
	ExpiryPolicy string           `json:"expiry_policy,omitempty"`  // "freeze" (default) or "release"
	// ReleaseCooldownSeconds is nil for the default, 72 h.
	ReleaseCooldownSeconds *int64 `json:"release_cooldown_seconds,omitempty"`
}

// Template is a campaign.
type Template struct {
	ID                     int64            `json:"id"`
	Name                   string           `json:"name"`
	TotalQuota             int64            `json:"total_quota"`
	Channels               map[string]int64 `json:"channels"`
	ValidSeconds           int64            `json:"valid_seconds"`
	PerUserLimit           int64            `json:"per_user_limit"`
	ExpiryPolicy           string           `json:"expiry_policy"`
	ReleaseCooldownSeconds int64            `json:"release_cooldown_seconds"`
	CreatedAt              time.Time        `json:"created_at"`
}

// ClaimRequest is the body of Claim; an empty RequestID is filled with
// NewRequestID.
type ClaimRequest struct {
	TemplateID int64  `json:"template_id"`
	UserID     string `json:"user_id"`
	Channel    string `json:"channel"`
	RequestID  string `json:"request_id"`
}

// Claim is a claimed coupon; Replayed: the answer of an earlier claim with
// the same request id.
type Claim struct {
	UserCouponID int64     `json:"user_coupon_id"`
	TemplateID   int64     `json:"template_id"`
	UserID       string    `json:"user_id"`
	Channel      string    `json:"channel"`
	Status       string    `json:"status"`
	ClaimedAt    time.Time `json:"claimed_at"`
	ExpiresAt    time.Time `json:"expires_at"`
	Replayed     bool      `json:"replayed"`
}

// RedeemRequest is the body of Redeem: the pair is its idempotency key.
type RedeemRequest struct {
	UserCouponID int64  `json:"user_coupon_id"`
	OrderID      string `json:"order_id"`
}

// Redemption is a coupon redeemed by an order.
type Redemption struct {
	RedemptionID int64     `json:"redemption_id"`
	UserCouponID int64     `json:"user_coupon_id"`
	OrderID      string    `json:"order_id"`
	RedeemedAt   time.Time `json:"redeemed_at"`
	Status       string    `json:"status"`
	Replayed     bool      `json:"replayed"`
}

// Refund modes.
const (
	RefundRestore = "restore" // the coupon goes back to the user
	RefundRecycle = "recycle" // the slot goes back to the pool
)

// RefundRequest is the body of Refund.
type RefundRequest struct {
	UserCouponID int64  `json:"user_coupon_id"`
	OrderID      string `json:"order_id"`
	Mode         string `json:"mode"` // RefundRestore or RefundRecycle
}

// Refund is a refunded redemption.
type Refund struct {
	FlowID       int64     `json:"flow_id"`
	UserCouponID int64     `json:"user_coupon_id"`
	RedemptionID int64     `json:"redemption_id"`
	OrderID      string    `json:"order_id"`
	Mode         string    `json:"mode"`
	Status       string    `json:"status"` // the coupon's status after the refund
	RefundedAt   time.Time `json:"refunded_at"`
	Replayed     bool      `json:"replayed"`
}

// VoidRequest is the body of Void; an empty RequestID is filled with
// NewRequestID.
type VoidRequest struct {
	UserCouponIDs []int64 `json:"user_coupon_ids"`
	Reason        string  `json:"reason"`
	Operator      string  `json:"operator"`
	RequestID     string  `json:"request_id"`
}

// VoidResult is one coupon of a void batch: Result is voided,
// already_voided, illegal_transition or not_found.
type VoidResult struct {
	UserCouponID int64  `json:"user_coupon_id"`
	Result       string `json:"result"`
	Status       string `json:"status,omitempty"`
	Message      string `json:"message,omitempty"`
	Replayed     bool   `json:"replayed,omitempty"`
}

// VoidResponse is the answer of Void.
type VoidResponse struct {
	RequestID string         `json:"request_id"`
	Results   []VoidResult   `json:"results"`
	Counts    map[string]int `json:"counts"`
}

// ExpireResult is the answer of Expire.
type ExpireResult struct {
	Expired         int     `json:"expired"`
	Transactions    int     `json:"transactions"`
	More            bool    `json:"more"`
	DurationSeconds float64 `json:"duration_seconds"`
}

// HistoryEvent is one change of a coupon.
type HistoryEvent struct {
	At           time.Time `json:"at"`
	Event        string    `json:"event"` // claimed, redeemed, refunded, expired, voided, released, corrected
	From         string    `json:"from"`
	To           string    `json:"to"`
	Channel      string    `json:"channel,omitempty"`
	OrderID      string    `json:"order_id,omitempty"`
	RedemptionID int64     `json:"redemption_id,omitempty"`
	Mode         string    `json:"mode,omitempty"`
	Reason       string    `json:"reason,omitempty"`
	Operator     string    `json:"operator,omitempty"`
	RequestID    string    `json:"request_id,omitempty"`
}

// History is a coupon's state and its changes, oldest first.
type History struct {
	UserCouponID int64          `json:"user_coupon_id"`
	TemplateID   int64          `json:"template_id"`
	UserID       string         `json:"user_id"`
	Channel      string         `json:"channel"`
	Status       string         `json:"status"`
	ExpiresAt    time.Time      `json:"expires_at"`
	Events       []HistoryEvent `json:"events"`
}

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

// Health is the answer of Health.
type Health struct {
	Status string    `json:"status"`
	Time   time.Time `json:"time"`
}
