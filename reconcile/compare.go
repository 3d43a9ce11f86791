package reconcile

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/couponlink/couponlink/api"
	"github.com/couponlink/couponlink/inventory"
)

// Where a derived value lives.
const (
	StoreCounter  = "counter"  // inventory_counter
	StoreTemplate = "template" // coupon_template cached counts
	StoreQuota    = "quota"    // channel_quota.claimed and over-issue
	StoreRedis    = "redis"    // stock keys
	StoreLegacy   = "legacy"   // a legacy template table's own counts
	// StoreClaimedUsers is a legacy front end's per-template set of the
	// users who hold the per-user limit (redis.claimed_users; claimedusers.go)
	StoreClaimedUsers = "claimed_users"
)

// What a pass did about a difference.
const (
	ActionFixed       = "fixed"
	ActionNeedsReview = "needs_review"
	ActionInFlight    = "in_flight" // moving while we looked: the next pass decides
	ActionReported    = "reported"  // auto-fix is off
	// left for a person who acknowledged it as it is (its finding says
	// so): found again, nothing new to look at
	ActionAcknowledged = "acknowledged"
)

// reasonNotHandled is the reason of a difference found by a pass that
// stopped on an error before it could act on it.
const reasonNotHandled = "not handled: the pass stopped on an error first"

// Difference is one derived value that is not the truth; Source is
// where it was found, with sources: the source whose pass found it, or
// for a check of the sum over the sources AllSources or the sources
// concerned ("east, west").
type Difference = api.ReconcileDifference

func ptr(v int64) *int64 { return &v }

var counterFields = []string{"held", "used", "expired", "returned", "released"}

func fieldsOf(c inventory.Counts) []int64 {
	return []int64{c.Held, c.Used, c.Expired, c.Returned, c.Released}
}

// compareCounters compares the counters with the truth at stamp pos. A
// row changed after pos cannot be compared with that truth: it is skipped
// (and counted in inFlight).
func compareCounters(truth map[inventory.Pair]*inventory.Counts, counters map[inventory.Pair]inventory.Counter, pos int64) (diffs []Difference, inFlight int) {
	for _, p := range sortedPairs(keysOf(truth, counters)) {
		row, have := counters[p]
		if have && row.Stamp > pos {
			inFlight++
			continue
		}
		want := inventory.Counts{}
		if t := truth[p]; t != nil {
			want = *t
		}
		got, exp := fieldsOf(row.Counts), fieldsOf(want)
		for i, f := range counterFields {
			if got[i] == exp[i] && have {
				continue
			}
			if got[i] == exp[i] && exp[i] == 0 {
				continue // no row and nothing to count: fine
			}
			d := Difference{Store: StoreCounter, Target: fmt.Sprintf("%d/%s/%s", p.Template, p.Channel, f),
				Template: p.Template, Channel: p.Channel, Field: f, Expected: exp[i]}
			if have {
				d.Found = ptr(got[i])
			}
			diffs = append(diffs, d)
		}
	}
	return diffs, inFlight
}

// compareTemplates compares coupon_template's cached counts with the truth
// for the templates whose counters are all at or before pos.
func compareTemplates(truth map[inventory.Pair]*inventory.Counts, counters map[inventory.Pair]inventory.Counter, cache map[int64]inventory.TemplateCache, pos int64) []Difference {
	sum := map[int64]*inventory.Counts{}
	moved := map[int64]bool{}
	for p, c := range truth {
		if sum[p.Template] == nil {
			sum[p.Template] = &inventory.Counts{}
		}
		s := sum[p.Template]
		s.Add(*c)
	}
	for p, r := range counters {
		if r.Stamp > pos {
			moved[p.Template] = true
		}
	}
	var out []Difference
	ids := make([]int64, 0, len(cache))
	for id := range cache {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		if moved[id] {
			continue
		}
		want := inventory.Counts{}
		if s := sum[id]; s != nil {
			want = *s
		}
		got := cache[id]
		for _, f := range []struct {
			name      string
			got, want int64
		}{{"issued_count", got.Issued, want.Issued()}, {"used_count", got.Used, want.Used}, {"expired_count", got.Expired, want.Expired}} {
			if f.got != f.want {
				out = append(out, Difference{Store: StoreTemplate, Target: fmt.Sprintf("%d/%s", id, f.name), Template: id,
					Field: f.name, Expected: f.want, Found: ptr(f.got)})
			}
		}
	}
	return out
}

// compareQuotas checks the claim guard (claimed = coupons − released) and
// over-issue (held + used + frozen > quota), both in the snapshot itself:
// exact, whatever the cdc does. Neither is safe to fix automatically.
func compareQuotas(truth map[inventory.Pair]*inventory.Counts, quotas map[inventory.Pair]inventory.Quota) []Difference {
	var out []Difference
	for _, p := range sortedPairs(keysOf(quotas, truth)) {
		t := inventory.Counts{}
		if c := truth[p]; c != nil {
			t = *c
		}
		q, ok := quotas[p]
		if !ok {
			if t.Issued() > 0 {
				out = append(out, Difference{Store: StoreQuota, Target: fmt.Sprintf("%d/%s/bucket", p.Template, p.Channel),
					Template: p.Template, Channel: p.Channel, Field: "bucket", Expected: t.Taken(), Action: ActionNeedsReview,
					Reason: "coupons exist for a channel with no channel_quota row"})
			}
			continue
		}
		if want := t.Issued() - t.Released; q.Claimed != want {
			out = append(out, Difference{Store: StoreQuota, Target: fmt.Sprintf("%d/%s/claimed", p.Template, p.Channel),
				Template: p.Template, Channel: p.Channel, Field: "claimed", Expected: want, Found: ptr(q.Claimed), Action: ActionNeedsReview,
				Reason: "channel_quota.claimed (the claim guard) differs from coupons − released; a person must decide which is right"})
		}
		if t.Taken() > q.Quota {
			out = append(out, Difference{Store: StoreQuota, Target: fmt.Sprintf("%d/%s/over_issue", p.Template, p.Channel),
				Template: p.Template, Channel: p.Channel, Field: "over_issue", Expected: q.Quota, Found: ptr(t.Taken()), Action: ActionNeedsReview,
				Reason: "over-issue: held + used + frozen exceeds the quota"})
		}
	}
	return out
}

// compareQuotaTotals checks that each template's channel quotas add up to
// its total_quota: releases change only claimed, and a transfer between
// channels moves quota without creating or losing any, so a difference
// means quota was changed outside couponlink (a person decides).
func compareQuotaTotals(quotas map[inventory.Pair]inventory.Quota, totals map[int64]int64) []Difference {
	sums := map[int64]int64{}
	for p, q := range quotas {
		sums[p.Template] += q.Quota
	}
	var out []Difference
	for _, tpl := range slices.Sorted(maps.Keys(sums)) {
		total, ok := totals[tpl]
		if !ok || sums[tpl] == total {
			continue
		}
		out = append(out, Difference{Store: StoreQuota, Target: fmt.Sprintf("%d/quota_total", tpl), Template: tpl,
			Field: "quota_total", Expected: total, Found: ptr(sums[tpl]), Action: ActionNeedsReview,
			Reason: "the channel quotas add up to another number than the template's total_quota: quota was created or lost outside a transfer"})
	}
	return out
}

// reasonStockDrift starts the reason of a legacy remaining-stock column
// that is not its budget minus what is taken.
const reasonStockDrift = "stock_column_drift: "

// compareLegacy checks a legacy template's budget against the truth, and
// its own counts and remaining stock against the truth read with them.
func compareLegacy(truth map[inventory.Pair]*inventory.Counts, budgets map[int64]int64, own map[int64]inventory.LegacyCounts) []Difference {
	sum := map[int64]inventory.Counts{}
	for p, c := range truth {
		s := sum[p.Template]
		s.Add(*c)
		sum[p.Template] = s
	}
	var out []Difference
	for _, id := range sortedIDs(keysOf(sum, own)) {
		s := sum[id]
		if b, ok := budgets[id]; ok && s.Taken() > b {
			out = append(out, Difference{Store: StoreQuota, Target: fmt.Sprintf("%d/over_issue", id), Template: id, Field: "over_issue",
				Expected: b, Found: ptr(s.Taken()), Action: ActionNeedsReview, Reason: "over-issue: more coupons than the template's budget"})
		}
		o, ok := own[id]
		if !ok {
			continue
		}
		for i, name := range []string{"issued", "used"} {
			if o.Own[i] != nil && *o.Own[i] != o.Truth[i] {
				out = append(out, Difference{Store: StoreLegacy, Target: fmt.Sprintf("%d/%s", id, name), Template: id, Field: name,
					Expected: o.Truth[i], Found: ptr(*o.Own[i]), Action: ActionNeedsReview,
					Reason: "the legacy template's own count differs from its coupons; couponlink never writes a legacy table"})
			}
		}
		if o.Remaining != nil && o.Budget != nil && *o.Remaining != *o.Budget-o.Taken {
			out = append(out, Difference{Store: StoreLegacy, Target: fmt.Sprintf("%d/remaining", id), Template: id, Field: "remaining",
				Expected: *o.Budget - o.Taken, Found: ptr(*o.Remaining), Action: ActionNeedsReview,
				Reason: reasonStockDrift + "the template's remaining-stock column differs from its budget minus the coupons taken (held + used + frozen), " +
					"read in one snapshot; the shop's claim guard is off; couponlink never writes a legacy table"})
		}
	}
	return out
}

// keysOf is the set of the keys of a and of b: what two reads of the
// same rows (the truth and a copy of it) hold between them.
func keysOf[K comparable, A, B any](a map[K]A, b map[K]B) map[K]bool {
	out := make(map[K]bool, max(len(a), len(b)))
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

func sortedPairs(m map[inventory.Pair]bool) []inventory.Pair {
	out := make([]inventory.Pair, 0, len(m))
	for p := range m {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Less(out[j]) })
	return out
}

func sortedIDs[V any](m map[int64]V) []int64 {
	out := make([]int64, 0, len(m))
	for id := range m {
		out = append(out, id)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// duplicateIDs reports each coupon id that more than one shard holds, for
// a person: the per-coupon checks need ids unique across the shards.
func duplicateIDs(dups []inventory.DuplicateID) []Difference {
	var out []Difference
	for _, d := range dups {
		out = append(out, Difference{Store: StoreLegacy, Target: fmt.Sprintf("coupon %d/shards", d.ID), Field: "shards", Expected: 1,
			Found: ptr(int64(len(d.Tables))), Action: ActionNeedsReview,
			Reason: fmt.Sprintf("coupon id %d is in %d shards (%s): couponlink needs coupon ids unique across the shards (docs/legacy-schemas.md, \"Sharded tables\"); "+
				"the counters stay right, but the redemptions and anomalies of this id cannot be told apart", d.ID, len(d.Tables), strings.Join(d.Tables, ", "))})
	}
	return out
}
func pairKey(p inventory.Pair) string { return strconv.FormatInt(p.Template, 10) + "/" + p.Channel }

func templateIDs(snap inventory.Snapshot) []int64 {
	seen := map[int64]bool{}
	for p := range snap.Counts {
		seen[p.Template] = true
	}
	for p := range snap.Quotas {
		seen[p.Template] = true
	}
	return sortedIDs(seen)
}
