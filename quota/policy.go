// Package quota decides how channel quota moves between the channel buckets
// of a template: the rebalancing policy (defaults, per-template overrides
// set by operators, audited), the rule that turns redemption rates into
// moves, and the per-channel view operators read.
//
// The cdc (package sink) applies the decisions; this package only reads
// and decides, apart from storing policies.
package quota

import (
	"fmt"
	"math"

	"github.com/couponlink/couponlink/coupon"
)

// Modes of a policy.
const (
	ModeOff    = "off"    // never look
	ModeSignal = "signal" // emit the recommendation (log row, webhook); move nothing
	ModeAuto   = "auto"   // move the quota, in one transaction, with its log row
)

// Policy is the rule of one template, every field set.
//
// A channel whose redemption rate is below Low after at least MinClaims
// claims gives up to MaxShare of its claimable (unclaimed) quota, always
// keeping Reserve × its quota claimable, to the channels whose rate is
// above High (after MinClaims too), in proportion to their rates; channels
// that sold out come first. At most one decision per template per Cooldown,
// and none before the campaign is MinAge old.
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

// Defaults is the built-in policy, used where neither the cdc's
// configuration nor an override says otherwise.
func Defaults() Policy {
	return Policy{Mode: ModeSignal, Low: 0.30, High: 0.60, MinClaims: 100, MaxShare: 0.50, Reserve: 0.05,
		CooldownSeconds: 3600, MinAgeSeconds: 3600}
}

// Validate says what is wrong with p, as a 400 naming the field.
func (p Policy) Validate() error {
	switch p.Mode {
	case ModeOff, ModeSignal, ModeAuto:
	default:
		return coupon.Invalid("mode", "mode must be off, signal or auto, not %q", p.Mode)
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"low", p.Low}, {"high", p.High}, {"max_share", p.MaxShare}, {"reserve", p.Reserve}} {
		if math.IsNaN(f.v) || f.v < 0 || f.v > 1 {
			return coupon.Invalid(f.name, "%s must be a fraction between 0 and 1, not %v", f.name, f.v)
		}
	}
	if p.Low >= p.High {
		return coupon.Invalid("low", "low (%v) must be below high (%v): a channel cannot both give and receive", p.Low, p.High)
	}
	for _, f := range []struct {
		name      string
		v, lo, hi int64
		unit      string
	}{
		{"min_claims", p.MinClaims, 1, coupon.MaxQuota, "claims (the largest quota)"},
		{"cooldown_seconds", p.CooldownSeconds, 0, coupon.MaxSeconds, "seconds (100 years)"},
		{"min_age_seconds", p.MinAgeSeconds, 0, coupon.MaxSeconds, "seconds (100 years)"},
	} {
		if f.v < f.lo || f.v > f.hi {
			return coupon.Invalid(f.name, "%s must be between %d and %d %s, not %d", f.name, f.lo, f.hi, f.unit, f.v)
		}
	}
	return nil
}

// Override is what one policy row sets; nil fields inherit.
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

// Apply returns p with o's fields set over it.
func (o Override) Apply(p Policy) Policy {
	set(&p.Mode, o.Mode)
	set(&p.Low, o.Low)
	set(&p.High, o.High)
	set(&p.MinClaims, o.MinClaims)
	set(&p.MaxShare, o.MaxShare)
	set(&p.Reserve, o.Reserve)
	set(&p.CooldownSeconds, o.CooldownSeconds)
	set(&p.MinAgeSeconds, o.MinAgeSeconds)
	return p
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

func set[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

func over[T any](dst **T, v *T) {
	if v != nil {
		*dst = v
	}
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
