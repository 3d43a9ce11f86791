package client

import "github.com/couponlink/couponlink/api"

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

// The bodies of the inventory, channels and quota policy routes.
type (
	States       = api.States       // the counts by state
	Counts       = api.Counts       // a bucket's (or a template's) quota, claim guard and states
	Derived      = api.Derived      // the cdc's counters
	Inventory    = api.Inventory    // the answer of Inventory: a template's live counts
	Transfer     = api.Transfer     // an applied quota move
	ChannelView  = api.ChannelView  // a channel bucket
	Channels     = api.Channels     // the answer of Channels
	CDCPosition  = api.CDCPosition  // where a cdc checkpoint stands; Found false: the cdc has not run
	Policy       = api.Policy       // a quota policy
	Override     = api.Override     // the fields a template sets itself (nil: the default's)
	PolicyChange = api.PolicyChange // the body of SetQuotaPolicy: who, why and what (nil fields keep their value)
	PolicyView   = api.PolicyView   // a template's effective policy, the defaults and its override
)
