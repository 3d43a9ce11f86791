package quota

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/couponlink/couponlink/api"
	"github.com/couponlink/couponlink/coupon"
)

// Every number of a policy has a documented bound; above it the policy is
// invalid_argument naming the field.
func TestPolicyBounds(t *testing.T) {
	cases := []struct {
		name  string
		set   func(*Policy)
		field string // "" means valid
	}{
		{"cooldown at the cap", func(p *Policy) { p.CooldownSeconds = coupon.MaxSeconds }, ""},
		{"cooldown past the cap", func(p *Policy) { p.CooldownSeconds = coupon.MaxSeconds + 1 }, "cooldown_seconds"},
		{"cooldown of 1e10 s", func(p *Policy) { p.CooldownSeconds = 1e10 }, "cooldown_seconds"},
		{"cooldown of MaxInt64 s", func(p *Policy) { p.CooldownSeconds = math.MaxInt64 }, "cooldown_seconds"},
		{"zero cooldown", func(p *Policy) { p.CooldownSeconds = 0 }, ""},
		{"negative cooldown", func(p *Policy) { p.CooldownSeconds = -1 }, "cooldown_seconds"},
		{"min age at the cap", func(p *Policy) { p.MinAgeSeconds = coupon.MaxSeconds }, ""},
		{"min age past the cap", func(p *Policy) { p.MinAgeSeconds = coupon.MaxSeconds + 1 }, "min_age_seconds"},
		{"min age of 1e10 s", func(p *Policy) { p.MinAgeSeconds = 1e10 }, "min_age_seconds"},
		{"negative min age", func(p *Policy) { p.MinAgeSeconds = math.MinInt64 }, "min_age_seconds"},
		{"min claims at the cap", func(p *Policy) { p.MinClaims = coupon.MaxQuota }, ""},
		{"min claims past the cap", func(p *Policy) { p.MinClaims = coupon.MaxQuota + 1 }, "min_claims"},
		{"zero min claims", func(p *Policy) { p.MinClaims = 0 }, "min_claims"},
		{"an infinite fraction", func(p *Policy) { p.MaxShare = math.Inf(1) }, "max_share"},
		{"a NaN fraction", func(p *Policy) { p.Reserve = math.NaN() }, "reserve"},
	}
	for _, tc := range cases {
		p := Defaults()
		tc.set(&p)
		assert.Equal(t, tc.field, invalidField(p.Validate()), tc.name)
	}
}

// invalidField is the field an invalid_argument names; "" for no error.
func invalidField(err error) string {
	if e, ok := coupon.AsError(err); ok && e.Code == api.CodeInvalidArgument {
		return e.Field
	}
	if err != nil {
		return "not invalid_argument: " + err.Error()
	}
	return ""
}

// A policy that bypassed Validate (a row stored before the bounds) never
// makes the rule's durations wrap around: a cooldown or min age of 10^10 s
// (multiplied by time.Second, a negative duration) still holds.
func TestDecideNeverWrapsADuration(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   func(*Input)
		skip string
	}{
		{"cooldown", func(in *Input) { in.Policy.CooldownSeconds, in.LastMove = 1e10, now.Add(-24*time.Hour) }, "within the cooldown"},
		{"cooldown of MaxInt64 s", func(in *Input) { in.Policy.CooldownSeconds, in.LastMove = math.MaxInt64, now.Add(-time.Hour) }, "within the cooldown"},
		{"min age", func(in *Input) { in.Policy.MinAgeSeconds, in.Age = 1e10, 24*time.Hour }, "younger than min_age"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := Input{Policy: policy(), Channels: workedExample(), Now: now}
			tc.in(&in)
			d := Decide(in)
			assert.Empty(t, d.Moves)
			assert.Contains(t, d.Skip, tc.skip)
			assert.NotContains(t, d.Skip, "-", "no negative duration in %q", d.Skip)
		})
	}
}
