package coupon_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/api"
	"github.com/couponlink/couponlink/coupon"
)

func ptr(v int64) *int64 { return &v }

// Validate fills in the template defaults of docs/design.md.
func TestNewTemplateDefaults(t *testing.T) {
	nt := coupon.NewTemplate{Name: "  spring sale ", TotalQuota: 10, Channels: map[string]int64{"app": 6, "sms": 4}, ValidSeconds: 60}
	require.NoError(t, nt.Validate())
	assert.Equal(t, "spring sale", nt.Name)
	assert.Equal(t, int64(1), nt.PerUserLimit)
	assert.Equal(t, coupon.PolicyFreeze, nt.ExpiryPolicy)
	assert.Equal(t, int64(259200), *nt.ReleaseCooldownSeconds)
}

// Every refused template names its field; the channel quotas must add up
// exactly, also where an int64 sum would wrap around.
func TestNewTemplateValidate(t *testing.T) {
	ok := func() coupon.NewTemplate {
		return coupon.NewTemplate{Name: "x", TotalQuota: 10, Channels: map[string]int64{"app": 6, "sms": 4}, ValidSeconds: 60}
	}
	cases := []struct {
		name   string
		change func(*coupon.NewTemplate)
		field  string // "" means valid
	}{
		{"valid", func(*coupon.NewTemplate) {}, ""},
		{"no name", func(n *coupon.NewTemplate) { n.Name = " " }, "name"},
		{"zero quota", func(n *coupon.NewTemplate) { n.TotalQuota = 0 }, "total_quota"},
		{"quota at the cap", func(n *coupon.NewTemplate) {
			n.TotalQuota, n.Channels = coupon.MaxQuota, map[string]int64{"app": coupon.MaxQuota - 1, "sms": 1}
		}, ""},
		{"quota past the cap", func(n *coupon.NewTemplate) {
			n.TotalQuota, n.Channels = coupon.MaxQuota+1, map[string]int64{"app": coupon.MaxQuota, "sms": 1}
		}, "total_quota"},
		{"quota of MaxInt64", func(n *coupon.NewTemplate) {
			n.TotalQuota, n.Channels = math.MaxInt64, map[string]int64{"app": math.MaxInt64}
		}, "total_quota"},
		{"channels at the cap", func(n *coupon.NewTemplate) {
			n.TotalQuota, n.Channels = coupon.MaxChannels, channels(coupon.MaxChannels)
		}, ""},
		{"channels past the cap", func(n *coupon.NewTemplate) {
			n.TotalQuota, n.Channels = coupon.MaxChannels+1, channels(coupon.MaxChannels+1)
		}, "channels"},
		{"no channels", func(n *coupon.NewTemplate) { n.Channels = nil }, "channels"},
		{"quotas short of the total", func(n *coupon.NewTemplate) { n.Channels["sms"] = 3 }, "channels"},
		{"quotas over the total", func(n *coupon.NewTemplate) { n.Channels["sms"] = 5 }, "channels"},
		{"a negative quota", func(n *coupon.NewTemplate) { n.Channels = map[string]int64{"app": 11, "sms": -1} }, "channels"},
		{"quotas that wrap around int64", func(n *coupon.NewTemplate) {
			n.TotalQuota = 1
			n.Channels = map[string]int64{"a": math.MaxInt64, "b": math.MaxInt64, "c": 3}
		}, "channels"},
		{"a channel with spaces", func(n *coupon.NewTemplate) { n.Channels = map[string]int64{" app": 10} }, "channels"},
		{"zero validity", func(n *coupon.NewTemplate) { n.ValidSeconds = 0 }, "valid_seconds"},
		{"validity at the cap", func(n *coupon.NewTemplate) { n.ValidSeconds = coupon.MaxSeconds }, ""},
		{"validity past the cap", func(n *coupon.NewTemplate) { n.ValidSeconds = coupon.MaxSeconds + 1 }, "valid_seconds"},
		{"negative per-user limit", func(n *coupon.NewTemplate) { n.PerUserLimit = -1 }, "per_user_limit"},
		{"per-user limit at the cap", func(n *coupon.NewTemplate) { n.PerUserLimit = coupon.MaxPerUserLimit }, ""},
		{"per-user limit past an INT", func(n *coupon.NewTemplate) { n.PerUserLimit = math.MaxInt32 + 1 }, "per_user_limit"},
		{"validity of MaxInt64", func(n *coupon.NewTemplate) { n.ValidSeconds = math.MaxInt64 }, "valid_seconds"},
		{"cooldown at the cap", func(n *coupon.NewTemplate) { n.ReleaseCooldownSeconds = ptr(coupon.MaxSeconds) }, ""},
		{"cooldown of MaxInt64", func(n *coupon.NewTemplate) { n.ReleaseCooldownSeconds = ptr(math.MaxInt64) }, "release_cooldown_seconds"},
		{"unknown policy", func(n *coupon.NewTemplate) { n.ExpiryPolicy = "burn" }, "expiry_policy"},
		{"release policy", func(n *coupon.NewTemplate) { n.ExpiryPolicy = coupon.PolicyRelease }, ""},
		{"zero cooldown", func(n *coupon.NewTemplate) { n.ReleaseCooldownSeconds = ptr(0) }, ""},
		{"negative cooldown", func(n *coupon.NewTemplate) { n.ReleaseCooldownSeconds = ptr(-1) }, "release_cooldown_seconds"},
		{"cooldown past the cap", func(n *coupon.NewTemplate) { n.ReleaseCooldownSeconds = ptr(coupon.MaxSeconds + 1) }, "release_cooldown_seconds"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nt := ok()
			tc.change(&nt)
			err := nt.Validate()
			if tc.field == "" {
				assert.NoError(t, err)
				return
			}
			e, isErr := coupon.AsError(err)
			require.True(t, isErr, "want *coupon.Error, got %v", err)
			assert.Equal(t, api.CodeInvalidArgument, e.Code)
			assert.Equal(t, tc.field, e.Field)
		})
	}
}

// channels is n channels of quota 1 each.
func channels(n int) map[string]int64 {
	m := make(map[string]int64, n)
	for i := range n {
		m[fmt.Sprintf("ch%d", i)] = 1
	}
	return m
}

// Seconds never wraps around, whatever a stored row holds.
func TestSeconds(t *testing.T) {
	for n, want := range map[int64]time.Duration{
		0: 0, 60: time.Minute, -5: 0, coupon.MaxSeconds: coupon.MaxSeconds * time.Second,
		1e10: coupon.MaxSeconds * time.Second, math.MaxInt64: coupon.MaxSeconds * time.Second, math.MinInt64: 0,
	} {
		assert.Equal(t, want, coupon.Seconds(n), "Seconds(%d)", n)
	}
}
