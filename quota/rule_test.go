package quota

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func policy() Policy {
	p := Defaults()
	p.Mode, p.MinAgeSeconds = ModeAuto, 0
	return p
}

// The worked example of the issue: A claimed 800 of 1000 and redeemed 200
// (rate 0.25); B claimed all its 500 and redeemed 400 (rate 0.80, sold out).
func workedExample() []Channel {
	return []Channel{
		{Name: "A", Quota: 1000, Claimed: 800, Held: 600, Used: 200},
		{Name: "B", Quota: 500, Claimed: 500, Held: 100, Used: 400},
	}
}

func TestWorkedExample(t *testing.T) {
	d := Decide(Input{Template: 7, Policy: policy(), Channels: workedExample(), Now: now})
	require.Empty(t, d.Skip)
	require.Len(t, d.Moves, 1)
	m := d.Moves[0]
	// A has 200 claimable: max_share 0.5 allows 100, its reserve (5% of
	// 1000 = 50) would allow 150; the smaller wins
	assert.Equal(t, Move{From: "A", To: "B", Amount: 100, Why: m.Why}, m)
	assert.Contains(t, m.Why, "A redeems 0.25 < low 0.30 after 800 claims: gives 100 of its 200 claimable")
	assert.Contains(t, m.Why, "keeps reserve 50")
	assert.Contains(t, m.Why, "B redeems 0.80 > high 0.60, sold out")
	assert.Contains(t, d.Rule, "sold out first")
	require.Len(t, d.Seen, 2)
	assert.Equal(t, "giver", d.Seen[0].Role)
	assert.Equal(t, "receiver", d.Seen[1].Role)
	assert.InDelta(t, 0.25, *d.Seen[0].Rate, 1e-9)
	assert.EqualValues(t, 200, d.Seen[0].Claimable)
}

func TestNoMoveBelowMinSample(t *testing.T) {
	ch := workedExample()
	ch[0] = Channel{Name: "A", Quota: 1000, Claimed: 99, Held: 79, Used: 20} // 99 claims < 100
	d := Decide(Input{Policy: policy(), Channels: ch, Now: now})
	assert.Empty(t, d.Moves)
	assert.Contains(t, d.Skip, "no channel redeems below low")

	ch[0] = Channel{Name: "A", Quota: 1000, Claimed: 100, Held: 80, Used: 20} // 100 claims: enough
	assert.Len(t, Decide(Input{Policy: policy(), Channels: ch, Now: now}).Moves, 1)

	ch = workedExample()
	ch[1] = Channel{Name: "B", Quota: 50, Claimed: 50, Held: 10, Used: 40} // the receiver's sample is too small
	d = Decide(Input{Policy: policy(), Channels: ch, Now: now})
	assert.Empty(t, d.Moves)
	assert.Contains(t, d.Skip, "no channel redeems above high")
}

func TestReserveKept(t *testing.T) {
	ch := workedExample()
	ch[0].Claimed, ch[0].Held = 940, 740 // 60 claimable, reserve 50: 10 may go (max_share would allow 30)
	d := Decide(Input{Policy: policy(), Channels: ch, Now: now})
	require.Len(t, d.Moves, 1)
	assert.EqualValues(t, 10, d.Moves[0].Amount)

	ch[0].Claimed, ch[0].Held = 950, 750 // 50 claimable = the reserve: nothing
	d = Decide(Input{Policy: policy(), Channels: ch, Now: now})
	assert.Empty(t, d.Moves)

	p := policy()
	p.Reserve = 0.15 // 150 of A's 200 claimable stay
	d = Decide(Input{Policy: p, Channels: workedExample(), Now: now})
	require.Len(t, d.Moves, 1)
	assert.EqualValues(t, 50, d.Moves[0].Amount)
}

func TestCooldownAndAgeAndMode(t *testing.T) {
	in := Input{Policy: policy(), Channels: workedExample(), Now: now, LastMove: now.Add(-59 * time.Minute)}
	d := Decide(in)
	assert.Empty(t, d.Moves)
	assert.Contains(t, d.Skip, "within the cooldown of 1h0m0s")
	in.LastMove = now.Add(-61 * time.Minute)
	assert.Len(t, Decide(in).Moves, 1)

	in.Policy.MinAgeSeconds = 7200
	in.Age = time.Hour
	assert.Contains(t, Decide(in).Skip, "younger than min_age")
	in.Age = 3 * time.Hour
	assert.Len(t, Decide(in).Moves, 1)

	in.Policy.Mode = ModeOff
	d = Decide(in)
	assert.Empty(t, d.Moves)
	assert.Equal(t, "policy is off", d.Skip)
	assert.Empty(t, d.Seen[0].Role)

	in.Policy.Mode = ModeSignal // the rule is the same; the cdc decides what to do with it
	assert.Len(t, Decide(in).Moves, 1)
}

func TestSoldOutFirstThenByRate(t *testing.T) {
	ch := append(workedExample(), Channel{Name: "C", Quota: 500, Claimed: 300, Held: 30, Used: 270}) // rate 0.9, not sold out
	d := Decide(Input{Policy: policy(), Channels: ch, Now: now})
	require.Len(t, d.Moves, 1, "only the sold-out channel receives")
	assert.Equal(t, "B", d.Moves[0].To)
	assert.Empty(t, d.Seen[2].Role)

	ch[1].Claimed, ch[1].Held = 400, 0 // B has 100 left, rate 1.0: now B (1.0) and C (0.9) share 100 by rate
	d = Decide(Input{Policy: policy(), Channels: ch, Now: now})
	require.Len(t, d.Moves, 2)
	assert.Equal(t, Move{From: "A", To: "B", Amount: 53, Why: d.Moves[0].Why}, d.Moves[0])
	assert.Equal(t, Move{From: "A", To: "C", Amount: 47, Why: d.Moves[1].Why}, d.Moves[1])
}

func TestSeveralGiversEachKeepTheirReserve(t *testing.T) {
	ch := append(workedExample(), Channel{Name: "D", Quota: 2000, Claimed: 1000, Held: 900, Used: 100}) // rate 0.1
	d := Decide(Input{Policy: policy(), Channels: ch, Now: now})
	require.Len(t, d.Moves, 2)
	assert.Equal(t, "A", d.Moves[0].From)
	assert.EqualValues(t, 100, d.Moves[0].Amount)
	assert.Equal(t, "D", d.Moves[1].From)
	assert.EqualValues(t, 500, d.Moves[1].Amount) // half of 1000 claimable; reserve 100
	assert.EqualValues(t, 600, d.Total())
}

func TestSplitAddsUp(t *testing.T) {
	for _, c := range []struct {
		n int64
		w []float64
	}{{100, []float64{1, 1, 1}}, {7, []float64{0.8, 0.61, 0.99, 0.7}}, {1, []float64{0.5, 0.5}}, {0, []float64{1}}, {5, []float64{0, 0}}} {
		parts := split(c.n, c.w)
		var sum int64
		for _, p := range parts {
			assert.GreaterOrEqual(t, p, int64(0))
			sum += p
		}
		want := c.n
		if c.w[0] == 0 {
			want = 0
		}
		assert.Equal(t, want, sum, "%v", c)
	}
	assert.Equal(t, []int64{34, 33, 33}, split(100, []float64{1, 1, 1}))
}

func TestPolicyValidate(t *testing.T) {
	require.NoError(t, Defaults().Validate())
	assert.Equal(t, "mode=signal low=0.30 high=0.60 min_claims=100 max_share=0.50 reserve=0.05 cooldown=1h0m0s min_age=1h0m0s", Defaults().String())
	bad := map[string]func(*Policy){
		"mode":             func(p *Policy) { p.Mode = "sometimes" },
		"low":              func(p *Policy) { p.Low = 0.7 },
		"high":             func(p *Policy) { p.High = 1.5 },
		"max_share":        func(p *Policy) { p.MaxShare = -0.1 },
		"reserve":          func(p *Policy) { p.Reserve = 2 },
		"min_claims":       func(p *Policy) { p.MinClaims = 0 },
		"cooldown_seconds": func(p *Policy) { p.CooldownSeconds = -1 },
		"min_age_seconds":  func(p *Policy) { p.MinAgeSeconds = -1 },
	}
	for field, f := range bad {
		p := Defaults()
		f(&p)
		err := p.Validate()
		require.Error(t, err, field)
		assert.Contains(t, err.Error(), field)
	}
}

func TestOverrideMergeAndApply(t *testing.T) {
	auto, low := ModeAuto, 0.2
	o := Override{Mode: &auto}.Merge(Override{Low: &low})
	assert.Equal(t, ModeAuto, *o.Mode)
	assert.InDelta(t, 0.2, *o.Low, 0)
	assert.Nil(t, o.High)
	p := o.Apply(Defaults())
	assert.Equal(t, ModeAuto, p.Mode)
	assert.InDelta(t, 0.2, p.Low, 0)
	assert.InDelta(t, Defaults().High, p.High, 0)
	assert.True(t, Override{}.Empty())
	assert.Equal(t, Defaults(), Defaults().Full().Apply(Policy{}))
}

// BenchmarkDecide is the cdc's per-template look on its mirror, for a
// template of 10 channels where the rule fires.
func BenchmarkDecide(b *testing.B) {
	var ch []Channel
	for i := range 10 {
		used := int64(100 + 80*i)
		ch = append(ch, Channel{Name: string(rune('a' + i)), Quota: 1000, Claimed: 900, Held: 900 - used, Used: used})
	}
	in := Input{Policy: policy(), Channels: ch, Now: now}
	for b.Loop() {
		if len(Decide(in).Moves) == 0 {
			b.Fatal("no move")
		}
	}
}

// BenchmarkDecideNothing is the common case: no channel gives.
func BenchmarkDecideNothing(b *testing.B) {
	var ch []Channel
	for i := range 10 {
		ch = append(ch, Channel{Name: string(rune('a' + i)), Quota: 1000, Claimed: 900, Held: 450, Used: 450})
	}
	in := Input{Policy: policy(), Channels: ch, Now: now}
	for b.Loop() {
		if len(Decide(in).Moves) != 0 {
			b.Fatal("a move")
		}
	}
}
