package reconcile

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/inventory"
)

// sumSources is the cross-source step's view of the sources: their
// reconcilers, whose latest pass resolved each mapping on its server.
type sumSources struct {
	parts []*Reconciler
}

// partTruth is what one source holds: its snapshot and the budgets of its
// copy of the template table.
type partTruth struct {
	name    string
	r       *Reconciler
	snap    inventory.Snapshot
	budgets map[int64]int64
}

// truth reads every source's snapshot and budgets, and sums the counts:
// the truth of each template is the sum of its parts. The channel buckets
// are the first source's (a table every shard keeps a copy of).
func (s *sumSources) truth(ctx context.Context) (inventory.Snapshot, []partTruth, error) {
	sum := inventory.Snapshot{Counts: map[inventory.Pair]*inventory.Counts{}}
	parts := make([]partTruth, len(s.parts))
	for i, r := range s.parts {
		p := partTruth{name: r.cfg.Mapping.Source(), r: r}
		var err error
		if p.snap, err = r.queries().Snapshot(ctx, r.db); err != nil {
			return sum, nil, fmt.Errorf("source %s: snapshot: %w", p.name, err)
		}
		for pair, c := range p.snap.Counts {
			if sum.Counts[pair] == nil {
				sum.Counts[pair] = &inventory.Counts{}
			}
			sum.Counts[pair].Add(*c)
		}
		if i == 0 {
			sum.Quotas = p.snap.Quotas
		}
		parts[i] = p
	}
	ids := templateIDs(sum)
	for i := range parts {
		var err error
		if parts[i].budgets, err = parts[i].r.queries().TemplateQuotas(ctx, parts[i].r.db, ids); err != nil {
			return sum, nil, fmt.Errorf("source %s: %w", parts[i].name, err)
		}
	}
	return sum, parts, nil
}

// agreedBudgets is each template's budget as the sources' copies of the
// template table hold it; a template whose copies disagree is left out
// (nothing to judge against) and reported.
func agreedBudgets(parts []partTruth) (map[int64]int64, []Difference) {
	seen := map[int64]map[int64][]string{} // template -> budget -> sources
	for _, p := range parts {
		for id, b := range p.budgets {
			if seen[id] == nil {
				seen[id] = map[int64][]string{}
			}
			seen[id][b] = append(seen[id][b], p.name)
		}
	}
	out := map[int64]int64{}
	var diffs []Difference
	for _, id := range slices.Sorted(maps.Keys(seen)) {
		if len(seen[id]) == 1 {
			for b := range seen[id] {
				out[id] = b
			}
			continue
		}
		var held []string
		for _, b := range slices.Sorted(maps.Keys(seen[id])) {
			held = append(held, fmt.Sprintf("%d on %s", b, strings.Join(seen[id][b], ", ")))
		}
		diffs = append(diffs, Difference{Store: StoreLegacy, Target: fmt.Sprintf("%d/budget", id), Template: id, Field: "budget",
			Action: ActionNeedsReview, Source: AllSources, Reason: "the sources' copies of the template table disagree on the budget (" +
				strings.Join(held, "; ") + "): over-issue and its stock keys are not judged until they agree"})
	}
	return out, diffs
}

// sumMySQL is the cross-source step's record of the truth it compared.
type sumMySQL struct {
	Positions map[string]string  `json:"positions"` // source -> its snapshot's binlog position
	Truth     map[string][]int64 `json:"truth"`     // "template/channel" -> held, used, expired, returned, released, summed
}

// sumPass is the cross-source step's pass: the checks of a template's
// whole on the sum over the sources.
func (r *Reconciler) sumPass(ctx context.Context, rep *Report) (any, any, error) {
	sum, parts, err := r.sum.truth(ctx)
	if err != nil {
		return nil, nil, err
	}
	ms := sumMySQL{Positions: map[string]string{}, Truth: map[string][]int64{}}
	for _, p := range parts {
		ms.Positions[p.name] = p.snap.Pos.String()
		rep.SumOf = append(rep.SumOf, p.name+" at "+p.snap.Pos.String())
	}
	rep.Pairs = len(sum.Counts)
	for pair, c := range sum.Counts {
		ms.Truth[pairKey(pair)] = fieldsOf(*c)
		rep.Coupons += c.Issued()
	}
	budgets, diffs := agreedBudgets(parts)
	rep.Differences = append(rep.Differences, diffs...)
	judged := budgets
	if sum.Quotas != nil {
		judged = nil // over-issue is judged per channel bucket
		rep.Differences = append(rep.Differences, compareQuotas(sum.Counts, sum.Quotas)...)
		rep.Differences = append(rep.Differences, compareQuotaTotals(sum.Quotas, budgets)...)
	}
	rep.Differences = append(rep.Differences, compareLegacy(sum.Counts, judged, nil)...)
	own, err := r.steadyOwnCounts(ctx, parts, templateIDs(sum))
	if err != nil {
		return ms, nil, err
	}
	rep.Differences = append(rep.Differences, own...)
	dups, err := r.sumDuplicates(ctx)
	if err != nil {
		return ms, nil, err
	}
	rep.Differences = append(rep.Differences, dups...)
	if r.cfg.RedisMode != inventory.RedisCorrector {
		return ms, nil, nil // couponlink's own keys follow channel_quota on each source's server: its pass compares them
	}
	redisSnap, err := r.redis(ctx, rep, sum, budgets)
	return ms, redisSnap, err
}

// steadyOwnCounts is sumOwnCounts, looked at twice when it finds
// anything: the servers are read one after the other, so a claim the shop
// was writing on two of them (its coupon on one, the template's counts on
// every copy) can show as a difference once. What is found again, the
// same, after the quiet window is for a person; the rest is in flight.
func (r *Reconciler) steadyOwnCounts(ctx context.Context, parts []partTruth, ids []int64) ([]Difference, error) {
	first, err := r.sumOwnCounts(ctx, parts, ids)
	if err != nil || len(first) == 0 {
		return first, err
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(r.cfg.QuietWindow):
	}
	again, err := r.sumOwnCounts(ctx, parts, ids)
	if err != nil {
		return nil, err
	}
	for i, d := range first {
		if !slices.ContainsFunc(again, func(a Difference) bool { return diffKey(a) == diffKey(d) && a.Source == d.Source }) {
			first[i].Action, first[i].Reason = ActionInFlight, "moved during the quiet window: a write spanning the servers was in flight"
		}
	}
	return first, nil
}

// diffKey is a difference as found: where, expected and found.
func diffKey(d Difference) string {
	return fmt.Sprintf("%s %s %d %s", d.Store, d.Target, d.Expected, str(d.Found))
}

// sumOwnCounts compares each source's copy of the legacy template table
// (its issued, used and remaining-stock columns) with the sum over the
// sources of what they count. A difference every copy shows is one,
// attributed to all sources; else each names the sources whose copy
// holds that value.
func (r *Reconciler) sumOwnCounts(ctx context.Context, parts []partTruth, ids []int64) ([]Difference, error) {
	owns := make([]map[int64]inventory.LegacyCounts, len(parts))
	total := map[int64]inventory.LegacyCounts{} // the parts' truths and taken, summed
	for i, p := range parts {
		own, err := p.r.queries().LegacyCounts(ctx, p.r.db, ids)
		if err != nil {
			return nil, fmt.Errorf("source %s: %w", p.name, err)
		}
		owns[i] = own
		for id, v := range own {
			t := total[id]
			t.Truth[0], t.Truth[1], t.Taken = t.Truth[0]+v.Truth[0], t.Truth[1]+v.Truth[1], t.Taken+v.Taken
			total[id] = t
		}
	}
	var out []Difference
	where := map[string]int{} // the difference (as found) -> its index in out
	for i, own := range owns {
		copyOwn := make(map[int64]inventory.LegacyCounts, len(own))
		for id, v := range own {
			v.Truth, v.Taken = total[id].Truth, total[id].Taken
			copyOwn[id] = v
		}
		for _, d := range compareLegacy(nil, nil, copyOwn) {
			key := diffKey(d)
			if k, ok := where[key]; ok {
				out[k].Source += ", " + parts[i].name
				continue
			}
			d.Source = parts[i].name
			d.Reason += "; the truth is the sum over the sources, the count that of the template table's copy on the sources named"
			where[key] = len(out)
			out = append(out, d)
		}
	}
	slices.SortStableFunc(out, func(a, b Difference) int {
		return cmp.Or(cmp.Compare(a.Template, b.Template), cmp.Compare(a.Target, b.Target))
	})
	for i := range out {
		if strings.Count(out[i].Source, ", ")+1 == len(parts) {
			out[i].Source = AllSources
		}
	}
	return out, nil
}

// sumDuplicates reports the coupon ids held by more than one source (a
// source's pass reports those repeated on its own server).
func (r *Reconciler) sumDuplicates(ctx context.Context) ([]Difference, error) {
	if r.cfg.Mapping.Reference() {
		return nil, nil
	}
	servers := r.sumServers()
	wo, err := sumWriteOffs(ctx, servers, r.cfg.Mapping)
	if err != nil {
		return nil, err
	}
	dups, err := inventory.DuplicateIDsAcross(ctx, servers, 10)
	if err != nil {
		return nil, fmt.Errorf("coupon ids across sources: %w", err)
	}
	var out []Difference
	for _, d := range dups {
		out = append(out, Difference{Store: StoreLegacy, Target: fmt.Sprintf("coupon %d/sources", d.ID), Field: "sources", Expected: 1,
			Found: ptr(int64(len(d.Sources))), Action: ActionNeedsReview, Source: strings.Join(d.Sources, ", "),
			Reason: fmt.Sprintf("coupon id %d is on %d sources (%s): couponlink needs coupon ids unique across all the sources; "+
				"the counters stay right, but the redemptions and anomalies of this id cannot be told apart", d.ID, len(d.Sources), strings.Join(d.Tables, ", "))})
	}
	return append(out, wo...), nil
}

// sumServers is each source's server and queries, for the checks that
// walk the tables of every server at once.
func (r *Reconciler) sumServers() []inventory.ServerCoupons {
	servers := make([]inventory.ServerCoupons, len(r.sum.parts))
	for i, p := range r.sum.parts {
		servers[i] = inventory.ServerCoupons{Name: p.cfg.Mapping.Source(), DB: p.db, Queries: p.queries()}
	}
	return servers
}

// maxWriteOffsAcross bounds the coupons with write-offs on several servers
// one pass looks at.
const maxWriteOffsAcross = 1000

// sumWriteOffs reports each (coupon, order) written off on more than one
// source (evidence table): each cdc counts the write-offs of its own
// server, so a duplicate_redemption split over two servers is found here,
// for a person, at every pass until it is resolved.
func sumWriteOffs(ctx context.Context, servers []inventory.ServerCoupons, m *canal.Mapping) ([]Difference, error) {
	if m.RedemptionEvidence() != canal.EvidenceTable {
		return nil, nil
	}
	cands, err := inventory.WrittenOffAcross(ctx, servers, maxWriteOffsAcross)
	if err != nil || len(cands) == 0 {
		return nil, err
	}
	coupons := make([]int64, len(cands))
	for i, c := range cands {
		coupons[i] = c.ID
	}
	held := map[int64]map[string][]string{} // coupon -> order -> the sources of its rows, one per row
	for _, s := range servers {
		found, err := s.Queries.Redeemed(ctx, s.DB, coupons)
		if err != nil {
			return nil, fmt.Errorf("source %s: %w", s.Name, err)
		}
		for c, orders := range found {
			if held[c] == nil {
				held[c] = map[string][]string{}
			}
			for _, o := range orders {
				held[c][o] = append(held[c][o], s.Name)
			}
		}
	}
	var out []Difference
	for _, c := range coupons {
		for _, o := range slices.Sorted(maps.Keys(held[c])) {
			rows := held[c][o]
			srcs := slices.Compact(slices.Clone(rows))
			if len(srcs) < 2 {
				continue // on one server: its cdc counts them
			}
			out = append(out, Difference{Store: StoreLegacy, Target: fmt.Sprintf("coupon %d/order %q", c, o), Field: "write-offs", Expected: 1,
				Found: ptr(int64(len(rows))), Action: ActionNeedsReview, Source: strings.Join(srcs, ", "),
				Reason: fmt.Sprintf("coupon %d is written off %d times for order %q, on %s: a duplicate redemption split over servers",
					c, len(rows), o, strings.Join(srcs, " and "))})
		}
	}
	return out, nil
}

func str(v *int64) string {
	if v == nil {
		return "nil"
	}
	return fmt.Sprint(*v)
}
