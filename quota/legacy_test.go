package quota

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A legacy campaign's inputs: what the rule cannot see is said, and
// nothing is recommended on a quota it does not know.

func TestLegacyQuotaUnknownRecommendsNothing(t *testing.T) {
	chans := workedExample()
	for i := range chans { // the mapping has no per-channel budget
		chans[i].Quota, chans[i].Claimed = 0, 0
	}
	d := Decide(Input{Template: 7, Policy: ForLegacy(policy()), Channels: chans, Now: now, QuotaUnknown: true, AgeUnknown: true})
	assert.Empty(t, d.Moves)
	assert.Contains(t, d.Skip, "the channels' quotas are unknown")
	require.Len(t, d.Unknown, 2)
	assert.Contains(t, d.Unknown[0], "no per-channel budget")
	assert.Contains(t, d.Unknown[1], "min_age is not applied")
	require.Len(t, d.Seen, 2)
	for _, s := range d.Seen {
		assert.Empty(t, s.Role)
		assert.Contains(t, s.Why, "its quota is unknown")
	}
	assert.Contains(t, d.Seen[0].Why, "redeems 0.25 after 800 claims")
	assert.NotNil(t, d.Seen[0].Rate, "the rate is known")
}

func TestLegacyAgeUnknownSkipsMinAge(t *testing.T) {
	p := ForLegacy(policy())
	p.MinAgeSeconds = 3600
	in := Input{Template: 7, Policy: p, Channels: workedExample(), Now: now} // age 0: too young
	assert.Contains(t, Decide(in).Skip, "younger than min_age")
	in.AgeUnknown = true
	d := Decide(in)
	require.Len(t, d.Moves, 1, d.Skip)
	assert.Equal(t, Move{From: "A", To: "B", Amount: 100, Why: d.Moves[0].Why}, d.Moves[0], "the same move as an own template's")
}

func TestForLegacy(t *testing.T) {
	p := policy()
	require.Equal(t, ModeAuto, p.Mode)
	assert.Equal(t, ModeSignal, ForLegacy(p).Mode, "auto, inherited from the defaults, runs as signal")
	p.Mode = ModeOff
	assert.Equal(t, ModeOff, ForLegacy(p).Mode)
	mode := ModeAuto
	err := refuseAuto(Override{Mode: &mode})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "legacy_policy_refused")
	mode = ModeSignal
	assert.NoError(t, refuseAuto(Override{Mode: &mode}))
}
