// Package quota decides how channel quota moves between the channel buckets
// of a template: the rebalancing policy (defaults, per-template overrides
// set by operators, audited), the rule that turns redemption rates into
// moves, and the per-channel view operators read.
//
// The cdc (package sink) applies the decisions; this package only reads
// and decides, apart from storing policies.
package quota

import "github.com/couponlink/couponlink/api"

// Modes of a policy.
const (
	ModeOff    = api.ModeOff    // never look
	ModeSignal = api.ModeSignal // emit the recommendation (log row, webhook); move nothing
	ModeAuto   = api.ModeAuto   // move the quota, in one transaction, with its log row
)

// Policy is the rule of one template, every field set (api.Policy says
// what it does, and validates it).
type Policy = api.Policy

// Override is what one policy row sets; nil fields inherit.
type Override = api.Override

// Defaults is the built-in policy, used where neither the cdc's
// configuration nor an override says otherwise.
func Defaults() Policy {
	return Policy{Mode: ModeSignal, Low: 0.30, High: 0.60, MinClaims: 100, MaxShare: 0.50, Reserve: 0.05,
		CooldownSeconds: 3600, MinAgeSeconds: 3600}
}
