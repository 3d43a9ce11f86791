package quota

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/couponlink/couponlink/coupon"
)

// Input is what the rule sees of one template.
type Input struct {
	Template int64
	Policy   Policy
	Channels []Channel
	Age      time.Duration // since the campaign was created
	LastMove time.Time     // the last decision of this mode; zero if none
	Now      time.Time
	// What the rule cannot see of a legacy template (legacy.go): its
	// channels' quota (the mapping names no per-channel budget: nothing can
	// be recommended) or its age (no creation time: min_age is not applied).
	QuotaUnknown, AgeUnknown bool
}

// Decision is what the rule says about one template.
type Decision struct {
	Moves []Move
	Rule  string // the rule that fired, with its numbers; empty without moves
	Skip  string // why there are no moves
	Seen  []Seen // every channel's inputs, as logged with a move
	// Unknown says what the rule could not see (a legacy template's), and
	// what follows from it; nil: it saw everything.
	Unknown []string
}

// Move gives Amount of From's claimable quota to To.
type Move struct {
	From   string `json:"from"`
	To     string `json:"to"`
	Amount int64  `json:"amount"`
	Why    string `json:"why"`
}

// Seen is one channel's inputs to a decision.
type Seen struct {
	Channel
	Claimable int64    `json:"claimable"`
	Rate      *float64 `json:"rate"` // nil: no slot held yet
	Role      string   `json:"role"` // giver, receiver, or "" (neither)
	// Why is the condition that makes the channel a giver, a receiver or
	// neither, with its numbers.
	Why string `json:"why"`
}

// Total is the quota a decision moves.
func (d Decision) Total() int64 {
	var n int64
	for _, m := range d.Moves {
		n += m.Amount
	}
	return n
}

// Decide applies p's rule to a template's channels. It is pure: the cdc
// calls it on its mirror to see whether a look is worth a transaction,
// then again on the rows it locked.
func Decide(in Input) Decision {
	p := in.Policy
	chans := append([]Channel(nil), in.Channels...)
	sort.Slice(chans, func(i, j int) bool { return chans[i].Name < chans[j].Name })
	d := Decision{Unknown: unknowns(in)}
	var givers, takers []int
	d.Seen, givers, takers = judge(in, chans)
	if d.Skip = stopped(in, len(givers), len(takers)); d.Skip != "" {
		for i := range d.Seen {
			d.Seen[i].Role = ""
		}
		return d
	}
	soldOut := false
	for _, i := range takers {
		soldOut = soldOut || d.Seen[i].Claimable == 0
	}
	if soldOut {
		takers = soldOutFirst(d.Seen, takers)
	}
	d.Moves = moves(p, chans, d.Seen, givers, takers)
	d.Rule = fmt.Sprintf("rate < low %.2f after >= %d claims gives <= %.0f%% of claimable keeping %.0f%% of quota; to rate > high %.2f%s, by rate",
		p.Low, p.MinClaims, p.MaxShare*100, p.Reserve*100, p.High, map[bool]string{true: " (sold out first)", false: ""}[soldOut])
	return d
}

// judge is what the rule sees in each channel (chans, sorted by name):
// its rate, its role and why; and the givers and receivers among them
// (indexes into chans).
func judge(in Input, chans []Channel) (seen []Seen, givers, takers []int) {
	p := in.Policy
	seen = make([]Seen, len(chans))
	for i, c := range chans {
		s := Seen{Channel: c, Claimable: c.Claimable()}
		rate, ok := c.Rate()
		if ok {
			s.Rate = &rate
		}
		switch {
		case in.QuotaUnknown: // whether it could give or is sold out is unknown: it is only rated
			s.Why = rated(c, rate, ok) + "; its quota is unknown (no per-channel budget), so neither what it could give nor whether it is sold out"
		case !ok:
			s.Why = "no slot held yet: no redemption rate"
		case c.Claims() < p.MinClaims:
			s.Why = fmt.Sprintf("%d claims < min_claims %d: too few to judge", c.Claims(), p.MinClaims)
		case rate < p.Low && giveable(c, p) > 0:
			s.Role = "giver"
			s.Why = fmt.Sprintf("redeems %.2f < low %.2f: may give %d of its %d claimable (max_share %.2f, keeps reserve %d)",
				rate, p.Low, giveable(c, p), c.Claimable(), p.MaxShare, reserve(c, p))
			givers = append(givers, i)
		case rate < p.Low:
			s.Why = fmt.Sprintf("redeems %.2f < low %.2f, but has nothing to give: %d claimable, reserve %d", rate, p.Low, c.Claimable(), reserve(c, p))
		case rate > p.High:
			s.Role = "receiver"
			s.Why = fmt.Sprintf("redeems %.2f > high %.2f: may receive%s", rate, p.High, soldOutNote(s))
			takers = append(takers, i)
		default:
			s.Why = fmt.Sprintf("redeems %.2f, from low %.2f to high %.2f: neither gives nor receives", rate, p.Low, p.High)
		}
		seen[i] = s
	}
	return seen, givers, takers
}

// stopped is what stops every move now (the policy, the campaign's age,
// the cooldown, no giver or no receiver), or "" when nothing does.
func stopped(in Input, givers, takers int) string {
	p := in.Policy
	switch {
	case p.Mode == ModeOff:
		return "policy is off"
	case in.QuotaUnknown:
		return "the channels' quotas are unknown (the mapping names no per-channel budget, channel_quota): there is no quota to move between them, so nothing is recommended"
	case !in.AgeUnknown && in.Age < coupon.Seconds(p.MinAgeSeconds):
		return fmt.Sprintf("campaign is %s old, younger than min_age %s", in.Age.Round(time.Second), seconds(p.MinAgeSeconds))
	case !in.LastMove.IsZero() && in.Now.Sub(in.LastMove) < coupon.Seconds(p.CooldownSeconds):
		return fmt.Sprintf("last decision %s ago, within the cooldown of %s", in.Now.Sub(in.LastMove).Round(time.Second), seconds(p.CooldownSeconds))
	case givers == 0:
		return fmt.Sprintf("no channel redeems below low %.2f after %d claims with claimable quota above its reserve", p.Low, p.MinClaims)
	case takers == 0:
		return fmt.Sprintf("no channel redeems above high %.2f after %d claims", p.High, p.MinClaims)
	}
	return ""
}

// soldOutFirst keeps the sold-out receivers only (they come first), and
// says so in the others' why.
func soldOutFirst(seen []Seen, takers []int) []int {
	kept := takers[:0]
	for _, i := range takers {
		if seen[i].Claimable == 0 {
			kept = append(kept, i)
		} else {
			seen[i].Role = ""
			seen[i].Why += "; but another receiver is sold out, and sold-out channels come first"
		}
	}
	return kept
}

// moves splits what each giver may give over the receivers, by their
// redemption rates.
func moves(p Policy, chans []Channel, seen []Seen, givers, takers []int) []Move {
	weights := make([]float64, len(takers))
	for k, i := range takers {
		weights[k] = *seen[i].Rate
	}
	var out []Move
	for _, g := range givers {
		c := chans[g]
		give := giveable(c, p)
		for k, amount := range split(give, weights) {
			if amount == 0 {
				continue
			}
			t := seen[takers[k]]
			out = append(out, Move{From: c.Name, To: t.Name, Amount: amount, Why: fmt.Sprintf(
				"%s redeems %.2f < low %.2f after %d claims: gives %d of its %d claimable (max_share %.2f, keeps reserve %d); %s redeems %.2f > high %.2f%s",
				c.Name, *seen[g].Rate, p.Low, c.Claims(), give, c.Claimable(), p.MaxShare, reserve(c, p),
				t.Name, *t.Rate, p.High, soldOutNote(t))})
		}
	}
	return out
}

// giveable is how much of c's claimable quota the rule may move: at most
// MaxShare of it, and never below the reserve.
func giveable(c Channel, p Policy) int64 {
	byShare := int64(math.Floor(p.MaxShare * float64(c.Claimable())))
	return max(0, min(byShare, c.Claimable()-reserve(c, p)))
}

// reserve is the claimable quota a giver keeps: Reserve of its quota.
func reserve(c Channel, p Policy) int64 { return int64(math.Ceil(p.Reserve * float64(c.Quota))) }

// split divides n in proportion to weights, by largest remainder (ties to
// the earlier index), so the parts always add up to n.
func split(n int64, weights []float64) []int64 {
	out := make([]int64, len(weights))
	var sum float64
	for _, w := range weights {
		sum += w
	}
	if sum <= 0 || n <= 0 {
		return out
	}
	type rem struct {
		i int
		r float64
	}
	rems := make([]rem, len(weights))
	var given int64
	for i, w := range weights {
		exact := float64(n) * w / sum
		out[i] = int64(math.Floor(exact))
		given += out[i]
		rems[i] = rem{i, exact - float64(out[i])}
	}
	sort.SliceStable(rems, func(a, b int) bool { return rems[a].r > rems[b].r })
	for k := 0; given < n; k++ {
		out[rems[k%len(rems)].i]++
		given++
	}
	return out
}

// unknowns says what the rule cannot see of in.
func unknowns(in Input) []string {
	var out []string
	if in.QuotaUnknown {
		out = append(out, "quota: the mapping names no per-channel budget (channel_quota), so each channel's claimable quota and whether it is sold out are unknown")
	}
	if in.AgeUnknown {
		out = append(out, "age: the mapping names no creation time of a campaign, so min_age is not applied")
	}
	return out
}

// rated is a channel's redemption rate and claims, or why it has none.
func rated(c Channel, rate float64, ok bool) string {
	if !ok {
		return "no slot held yet: no redemption rate"
	}
	return fmt.Sprintf("redeems %.2f after %d claims", rate, c.Claims())
}

func soldOutNote(s Seen) string {
	if s.Claimable == 0 {
		return ", sold out"
	}
	return ""
}

func seconds(n int64) string { return coupon.Seconds(n).String() }
