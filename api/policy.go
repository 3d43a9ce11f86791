package api

import (
	"fmt"
	"math"
	"time"
)

// Bounds of the API's numbers.
const (
	// MaxSeconds bounds every duration in seconds (valid_seconds,
	// release_cooldown_seconds, a quota policy's cooldown and min age): 100
	// years, so that a duration never overflows time.Duration.
	MaxSeconds = 100 * 366 * 24 * 3600
	// MaxQuota bounds total_quota, hence every channel's quota and every sum
	// of them (10^12): far from int64's end, and exact in a float64.
	MaxQuota = 1_000_000_000_000
)

// Modes of a policy.
const (
	ModeOff    = "off"    // never look
	ModeSignal = "signal" // emit the recommendation (log row, webhook); move nothing
	ModeAuto   = "auto"   // move the quota, in one transaction, with its log row
)

// Policy is the quota rebalancing rule of one template, every field set.
//
// A channel whose redemption rate is below Low after at least MinClaims
// claims gives up to MaxShare of its claimable (unclaimed) quota, always
// keeping Reserve × its quota claimable, to the channels whose rate is
// above High (after MinClaims too), in proportion to their rates; channels
// that sold out come first. At most one decision per template per Cooldown,
// and none before the campaign is MinAge old. Mode is off, signal or auto.
type Policy struct {
	Mode            string  `json:"mode"`
	Low             float64 `json:"low"`
	High            float64 `json:"high"`
	MinClaims       int64   `json:"min_claims"`
	MaxShare        float64 `json:"max_share"`
	Reserve         float64 `json:"reserve"`
	CooldownSeconds int64   `json:"cooldown_seconds"`
	MinAgeSeconds   int64   `json:"min_age_seconds"`
}

// Validate says what is wrong with p, as an invalid_argument naming the
// field.
func (p Policy) Validate() error {
	switch p.Mode {
	case ModeOff, ModeSignal, ModeAuto:
	default:
		return Invalid("mode", "mode must be off, signal or auto, not %q", p.Mode)
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"low", p.Low}, {"high", p.High}, {"max_share", p.MaxShare}, {"reserve", p.Reserve}} {
		if math.IsNaN(f.v) || f.v < 0 || f.v > 1 {
			return Invalid(f.name, "%s must be a fraction between 0 and 1, not %v", f.name, f.v)
		}
	}
	if p.Low >= p.High {
		return Invalid("low", "low (%v) must be below high (%v): a channel cannot both give and receive", p.Low, p.High)
	}
	for _, f := range []struct {
		name      string
		v, lo, hi int64
		unit      string
	}{
		{"min_claims", p.MinClaims, 1, MaxQuota, "claims (the largest quota)"},
		{"cooldown_seconds", p.CooldownSeconds, 0, MaxSeconds, "seconds (100 years)"},
		{"min_age_seconds", p.MinAgeSeconds, 0, MaxSeconds, "seconds (100 years)"},
	} {
		if f.v < f.lo || f.v > f.hi {
			return Invalid(f.name, "%s must be between %d and %d %s, not %d", f.name, f.lo, f.hi, f.unit, f.v)
		}
	}
	return nil
}

// Full is p as an override that sets every field (the defaults row).
func (p Policy) Full() Override {
	return Override{Mode: &p.Mode, Low: &p.Low, High: &p.High, MinClaims: &p.MinClaims, MaxShare: &p.MaxShare,
		Reserve: &p.Reserve, CooldownSeconds: &p.CooldownSeconds, MinAgeSeconds: &p.MinAgeSeconds}
}

// String is p as the cdc logs it.
func (p Policy) String() string {
	return fmt.Sprintf("mode=%s low=%.2f high=%.2f min_claims=%d max_share=%.2f reserve=%.2f cooldown=%s min_age=%s",
		p.Mode, p.Low, p.High, p.MinClaims, p.MaxShare, p.Reserve, seconds(p.CooldownSeconds), seconds(p.MinAgeSeconds))
}

// seconds is n seconds, clamped to 0..MaxSeconds, as a time.Duration
// prints.
func seconds(n int64) string {
	return (time.Duration(min(max(n, 0), MaxSeconds)) * time.Second).String()
}

// Override is what a template's policy row sets; nil fields inherit (the
// defaults'). As a change (PolicyChange), nil fields keep their value.
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

// Apply returns p with o's fields set over it: p's full override merged
// with o, which sets every field.
func (o Override) Apply(p Policy) Policy { return p.Full().Merge(o).policy() }

// policy is the policy of an override that sets every field (Full's
// inverse).
func (o Override) policy() Policy {
	return Policy{Mode: *o.Mode, Low: *o.Low, High: *o.High, MinClaims: *o.MinClaims, MaxShare: *o.MaxShare,
		Reserve: *o.Reserve, CooldownSeconds: *o.CooldownSeconds, MinAgeSeconds: *o.MinAgeSeconds}
}

// Merge returns o with change's fields set over it: a partial update.
func (o Override) Merge(change Override) Override {
	over(&o.Mode, change.Mode)
	over(&o.Low, change.Low)
	over(&o.High, change.High)
	over(&o.MinClaims, change.MinClaims)
	over(&o.MaxShare, change.MaxShare)
	over(&o.Reserve, change.Reserve)
	over(&o.CooldownSeconds, change.CooldownSeconds)
	over(&o.MinAgeSeconds, change.MinAgeSeconds)
	return o
}

// Empty reports whether o sets nothing.
func (o Override) Empty() bool { return o == Override{} }

func over[T any](dst **T, v *T) {
	if v != nil {
		*dst = v
	}
}

// PolicyChange is the body of PUT /v1/templates/{id}/quota-policy: who,
// why and what (the override fields given; the others keep their value).
type PolicyChange struct {
	Override
	ChangedBy string `json:"changed_by"`
	Reason    string `json:"reason"`
}

// PolicyView is a template's policy as operators read it: what applies,
// the defaults it inherits, and what its override row sets.
type PolicyView struct {
	Template  int64      `json:"template"`
	Effective Policy     `json:"effective"`
	Defaults  Policy     `json:"defaults"`
	Override  Override   `json:"override"`
	Version   int64      `json:"version"`    // 0: no override row
	UpdatedBy string     `json:"updated_by"` // "" when no override row
	UpdatedAt *time.Time `json:"updated_at"` // nil when no override row
}

// PolicyChangeEntry is one audited change of a policy row; Before nil:
// there was no row, After nil: the row was deleted.
type PolicyChangeEntry struct {
	ID        int64     `json:"id"`
	Template  int64     `json:"template"`
	Version   int64     `json:"version"`
	Action    string    `json:"action"`
	Before    *Override `json:"before"`
	After     *Override `json:"after"`
	ChangedBy string    `json:"changed_by"`
	// OnBehalfOf is who ChangedBy (a token's name) acted for, as the
	// change named them; "" when the same or without a token.
	OnBehalfOf string    `json:"on_behalf_of,omitempty"`
	Reason     string    `json:"reason"`
	Source     string    `json:"source"`
	At         time.Time `json:"at"`
}

// PolicyHistory is the answer of GET
// /v1/templates/{id}/quota-policy/history: the changes, newest first.
type PolicyHistory struct {
	Template int64               `json:"template"`
	Entries  []PolicyChangeEntry `json:"entries"`
}

// PolicyPreview is the answer of POST /v1/templates/{id}/quota-policy/preview:
// what the rebalancing rule would decide now, on the template's current
// numbers, with the policy in force or a change of it (nothing is saved
// and nothing moves), computed by the rule the cdc runs.
type PolicyPreview struct {
	Template int64  `json:"template"`
	Policy   Policy `json:"policy"` // the policy the rule ran with: the change over the one in force
	// AgeSeconds is the campaign's age; LastDecision the last decision of
	// the policy's mode (nil: none), which the cooldown counts from.
	AgeSeconds   float64    `json:"age_seconds"`
	LastDecision *time.Time `json:"last_decision"`
	At           time.Time  `json:"at"`
	// Stop is the condition that stops every move now ("": the rule moves).
	Stop  string        `json:"stop"`
	Rule  string        `json:"rule"` // the rule that fires, with its numbers; "" without moves
	Moves []PreviewMove `json:"moves"`
	// Total is the quota the moves give; Channels each channel's inputs and
	// the condition that makes it a giver, a receiver or neither.
	Total    int64            `json:"total"`
	Channels []PreviewChannel `json:"channels"`
	// Unknown says what the rule could not see of a legacy campaign (its
	// channels' quotas without a per-channel budget, its age) and what
	// follows; left out when it saw everything.
	Unknown []string `json:"unknown,omitempty"`
}

// PreviewMove is one move the rule would make: Amount of From's claimable
// quota to To (mode signal: recommended only).
type PreviewMove struct {
	From   string `json:"from"`
	To     string `json:"to"`
	Amount int64  `json:"amount"`
	Why    string `json:"why"`
}

// PreviewChannel is one channel's inputs to the rule and its role.
type PreviewChannel struct {
	Channel        string   `json:"channel"`
	Quota          int64    `json:"quota"`
	Claimed        int64    `json:"claimed"`
	Claimable      int64    `json:"claimable"`
	Claims         int64    `json:"claims"` // coupons ever given out: held + used + expired + returned
	Released       int64    `json:"released"`
	RedemptionRate *float64 `json:"redemption_rate"` // nil: no slot held yet
	SoldOut        bool     `json:"sold_out"`
	// QuotaUnknown: a legacy channel without a per-channel budget; its
	// quota, claimed, claimable and sold_out say nothing.
	QuotaUnknown bool   `json:"quota_unknown,omitempty"`
	Role         string `json:"role"` // giver, receiver or "" (neither)
	Why          string `json:"why"`  // the condition that decides its role, with its numbers
}
