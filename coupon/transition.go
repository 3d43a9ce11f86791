package coupon

import "github.com/couponlink/couponlink/api"

// Action is a business action that moves a user coupon between states.
type Action string

// The business actions of the transition table (docs/design.md, "The state machine").
const (
	ActionClaim         Action = "claim"
	ActionRedeem        Action = "redeem"
	ActionRefundRestore Action = "refund_restore"
	ActionExpire        Action = "expire"
	ActionVoid          Action = "void"
	ActionRefundRecycle Action = "refund_recycle"
)

// QuotaEffect says what a transition does to the template's quota.
type QuotaEffect string

// The quota effects of the legal transitions.
const (
	EffectReserve  QuotaEffect = "reserve" // claimable -1, held +1
	EffectConsume  QuotaEffect = "consume" // slot consumed for good
	EffectKeep     QuotaEffect = "keep"    // slot stays held by the user
	EffectFreeze   QuotaEffect = "freeze"  // frozen, or released after the cooldown
	EffectRelease  QuotaEffect = "release" // back to the pool
	EffectIllegal  QuotaEffect = "illegal" // not a legal transition
	EffectNoChange QuotaEffect = "no_change"
)

// Rule is one row of the legal transition table.
type Rule struct {
	From, To Status
	Action   Action
	Effect   QuotaEffect
}

// Rules is the table of legal transitions (docs/design.md, "The state machine"), and nothing else.
var Rules = []Rule{
	{None, Available, ActionClaim, EffectReserve},
	{Available, Used, ActionRedeem, EffectConsume},
	{Used, Available, ActionRefundRestore, EffectKeep},
	{Available, Expired, ActionExpire, EffectFreeze},
	{Available, Returned, ActionVoid, EffectRelease},
	{Used, Returned, ActionRefundRecycle, EffectRelease},
}

// Legal reports whether a coupon may move from one state to another.
// A change that leaves the status as it was is not a transition.
func Legal(from, to Status) bool {
	for _, r := range Rules {
		if r.From == from && r.To == to {
			return true
		}
	}
	return false
}

// RuleFor returns the rule an action follows.
func RuleFor(a Action) (Rule, bool) {
	for _, r := range Rules {
		if r.Action == a {
			return r, true
		}
	}
	return Rule{}, false
}

// Check says whether action a may be applied to a coupon in state from.
// It returns the target state, or an *Error with code illegal_transition.
func Check(a Action, from Status) (Status, error) {
	r, ok := RuleFor(a)
	if !ok {
		return None, &Error{Code: api.CodeInvalidArgument, Field: "action", Message: "unknown action " + string(a)}
	}
	if r.From != from {
		return None, IllegalTransition(from, r.To, a)
	}
	return r.To, nil
}
