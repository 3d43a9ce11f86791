package api

import "testing"

func TestOverrideApply(t *testing.T) {
	p := Policy{Mode: ModeSignal, Low: 0.1, High: 0.6, MinClaims: 50, MaxShare: 0.5, Reserve: 0.1, CooldownSeconds: 3600, MinAgeSeconds: 600}
	if got := (Override{}).Apply(p); got != p {
		t.Fatalf("an empty override changed the policy: %+v", got)
	}
	low, cooldown, mode := 0.25, int64(60), ModeAuto
	o := Override{Mode: &mode, Low: &low, CooldownSeconds: &cooldown}
	want := p
	want.Mode, want.Low, want.CooldownSeconds = ModeAuto, 0.25, 60
	if got := o.Apply(p); got != want {
		t.Fatalf("Apply = %+v, want %+v", got, want)
	}
	if got := p.Full().Apply(Policy{}); got != p {
		t.Fatalf("a full override does not give its policy back: %+v", got)
	}
	if p.Mode != ModeSignal || *o.Low != 0.25 {
		t.Fatal("Apply changed its inputs")
	}
}
