package api

import "time"

// The bodies of the coupon routes: templates, claims, redemptions,
// refunds, voids, the expiry sweep and a coupon's history.

// NewTemplate is the body of POST /v1/templates.
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

// Template is a stored campaign.
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

// ClaimRequest is the body of POST /v1/claims: one coupon of a template
// for a user, from a channel's bucket. RequestID is the claim's
// idempotency key.
type ClaimRequest struct {
	TemplateID int64  `json:"template_id"`
	UserID     string `json:"user_id"`
	Channel    string `json:"channel"`
	RequestID  string `json:"request_id"`
}

// Claim is a claimed coupon.
type Claim struct {
	UserCouponID int64     `json:"user_coupon_id"`
	TemplateID   int64     `json:"template_id"`
	UserID       string    `json:"user_id"`
	Channel      string    `json:"channel"`
	Status       string    `json:"status"`
	ClaimedAt    time.Time `json:"claimed_at"`
	ExpiresAt    time.Time `json:"expires_at"`
	// Replayed is true when the request_id was seen before: nothing new was written.
	Replayed bool `json:"replayed"`
}

// RedeemRequest is the body of POST /v1/redemptions: the pair is its
// idempotency key.
type RedeemRequest struct {
	UserCouponID int64  `json:"user_coupon_id"`
	OrderID      string `json:"order_id"`
}

// Redemption is a coupon redeemed by an order (a redemption_log row).
type Redemption struct {
	RedemptionID int64     `json:"redemption_id"`
	UserCouponID int64     `json:"user_coupon_id"`
	OrderID      string    `json:"order_id"`
	RedeemedAt   time.Time `json:"redeemed_at"`
	// Status is the coupon's status now (USED, or AVAILABLE/RETURNED after a refund).
	Status   string `json:"status"`
	Replayed bool   `json:"replayed"`
}

// Refund modes.
const (
	RefundRestore = "restore" // USED -> AVAILABLE: the coupon goes back to the user
	RefundRecycle = "recycle" // USED -> RETURNED: the slot goes back to the pool
)

// RefundRequest is the body of POST /v1/refunds: it undoes a redemption,
// by the order that made it.
type RefundRequest struct {
	UserCouponID int64  `json:"user_coupon_id"`
	OrderID      string `json:"order_id"`
	Mode         string `json:"mode"` // RefundRestore or RefundRecycle
}

// Refund is a refunded redemption (an inventory_flow row of kind refund).
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

// VoidRequest is the body of POST /v1/voids: an operator's batch void of
// AVAILABLE coupons; RequestID is its idempotency key.
type VoidRequest struct {
	UserCouponIDs []int64 `json:"user_coupon_ids"`
	Reason        string  `json:"reason"`
	Operator      string  `json:"operator"`
	RequestID     string  `json:"request_id"`
}

// VoidResult is what happened to one coupon of a void batch: Result is
// voided, already_voided, illegal_transition or not_found.
type VoidResult struct {
	UserCouponID int64  `json:"user_coupon_id"`
	Result       string `json:"result"`
	Status       string `json:"status,omitempty"` // the coupon's status after the request
	Message      string `json:"message,omitempty"`
	// Replayed is true when this request voided the coupon before: nothing new was written.
	Replayed bool `json:"replayed,omitempty"`
}

// VoidResponse is the answer of POST /v1/voids: a result per coupon and
// the count of each result.
type VoidResponse struct {
	RequestID string         `json:"request_id"`
	Results   []VoidResult   `json:"results"`
	Counts    map[string]int `json:"counts"`
}

// ExpireRequest is the body of POST /v1/expire (optional): at most Limit
// coupons, 0 for all that are due.
type ExpireRequest struct {
	Limit int `json:"limit"`
}

// ExpireResult is the answer of POST /v1/expire: one sweep.
type ExpireResult struct {
	Expired         int     `json:"expired"`
	Transactions    int     `json:"transactions"`
	More            bool    `json:"more"` // stopped at the limit with more due
	DurationSeconds float64 `json:"duration_seconds"`
}

// HistoryEvent is one step of a coupon's life, told from the ledgers.
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
	// OnBehalfOf is who Operator (a token's name) acted for, as the
	// request named them; "" when the same or without a token.
	OnBehalfOf string `json:"on_behalf_of,omitempty"`
	RequestID  string `json:"request_id,omitempty"`
}

// History is a coupon and its life, oldest first.
type History struct {
	UserCouponID int64          `json:"user_coupon_id"`
	TemplateID   int64          `json:"template_id"`
	UserID       string         `json:"user_id"`
	Channel      string         `json:"channel"`
	Status       string         `json:"status"`
	ExpiresAt    time.Time      `json:"expires_at"`
	Events       []HistoryEvent `json:"events"`
}

// Health is the answer of GET /healthz.
type Health struct {
	Status string    `json:"status"`
	Time   time.Time `json:"time"`
	// Legacy says the API serves a legacy shop (started with -mapping):
	// the console then shows its campaigns (GET /v1/legacy).
	Legacy bool `json:"legacy,omitempty"`
}

// UserCoupons is the answer of GET /v1/templates/{id}/user-coupons: the
// life of each coupon of the template the user holds or held.
type UserCoupons struct {
	Template int64     `json:"template"`
	UserID   string    `json:"user_id"`
	Coupons  []History `json:"coupons"`
}
