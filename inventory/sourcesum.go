package inventory

import (
	"fmt"
	"sort"
	"strings"

	"github.com/couponlink/couponlink/inventory/view"
)

// sumPairs adds up the pairs of the counted sources; left are the sources
// left out, which every sum names.
func sumPairs(srcs []SourceStatus, left []string) []SourcesPair {
	sums := map[Pair]*SourcesPair{}
	for _, s := range srcs {
		if !s.Counted() {
			continue
		}
		for _, p := range s.Status.Pairs {
			sum := sums[p.Pair]
			if sum == nil {
				sum = &SourcesPair{PairStatus: PairStatus{Pair: p.Pair, Label: p.Label}, Left: left}
				sums[p.Pair] = sum
			}
			sum.HasQuota = addCounts(&sum.Counts, sum.HasQuota, p.Counts, p.HasQuota)
			sum.PastEnd += p.PastEnd
			sum.Parts = append(sum.Parts, PairPart{Source: s.Name, PairStatus: p})
			sum.Sources = append(sum.Sources, s.Name)
		}
	}
	out := make([]SourcesPair, 0, len(sums))
	for _, s := range sums {
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Pair.Less(out[j].Pair) })
	return out
}

// addCounts adds src's counters to dst's. The quota and claimed are a
// channel bucket's row, not counters: dst keeps its own when it has one
// (has), else takes src's (srcHas). It returns whether dst has a quota.
func addCounts(dst *view.Counts, has bool, src view.Counts, srcHas bool) bool {
	quota, claimed := dst.Quota, dst.Claimed
	dst.Add(src)
	dst.Quota, dst.Claimed = quota, claimed
	if !has && srcHas {
		dst.Quota, dst.Claimed = src.Quota, src.Claimed
	}
	return has || srcHas
}

// sumTemplate adds up one template's parts (in the mapping's order): the
// row of the first source that has one, the counters and channels of
// all, ended when a source's clock says so.
func sumTemplate(id int64, parts []TemplatePart, left []string) SourcesTemplate {
	t := SourcesTemplate{Template: view.Template{ID: id}, Parts: parts, Left: left}
	channels := map[string]*view.Channel{}
	budgets := map[string]bool{}
	var budgetNotes []string
	for _, p := range parts {
		t.Sources = append(t.Sources, p.Source)
		if p.Found {
			if !t.Found {
				t.Found, t.Name, t.Budget, t.HasBudget = true, p.Name, p.Budget, p.HasBudget
				t.Remaining, t.PerUserLimit, t.EndTime = p.Remaining, p.PerUserLimit, p.EndTime
				t.Unlimited, t.OffShelf = p.Unlimited, p.OffShelf
			}
			b := budgetText(p.Template)
			budgets[b] = true
			budgetNotes = append(budgetNotes, fmt.Sprintf("%s on %s", b, p.Source))
		}
		t.Ended = t.Ended || p.Ended
		t.Counts.Add(p.Counts)
		t.PastEnd += p.PastEnd
		for _, c := range p.Channels {
			sum := channels[c.Name]
			if sum == nil {
				sum = &view.Channel{Name: c.Name, Label: c.Label}
				channels[c.Name] = sum
			}
			sum.HasQuota = addCounts(&sum.Counts, sum.HasQuota, c.Counts, c.HasQuota)
			sum.PastEnd += c.PastEnd
		}
	}
	t.Quota, t.Claimed = 0, 0 // the template's bar is its budget, not the buckets' sum
	if len(budgets) > 1 {
		t.Differ = "budget " + strings.Join(budgetNotes, ", ")
	}
	for _, c := range channels {
		t.Channels = append(t.Channels, *c)
	}
	sort.Slice(t.Channels, func(i, j int) bool { return t.Channels[i].Name < t.Channels[j].Name })
	return t
}

// budgetText is a template row's budget, "NULL" for none.
func budgetText(t view.Template) string {
	switch {
	case t.Unlimited:
		return "unlimited"
	case !t.HasBudget:
		return "NULL"
	}
	return fmt.Sprint(t.Budget)
}

// judgeByRows judges, on each counted source without a template's row
// (its template table is on another source: template.source), that
// template's coupons by the row of the first source that has it: the
// campaign's end (by that source's clock) and its fixed window. A source
// judged its coupons on its own server, where the row is not: as those of
// a campaign that never ends. The source's pairs follow its channels.
func judgeByRows(srcs []SourceStatus) {
	rows := map[int64]view.Template{}
	for _, s := range srcs {
		for _, t := range s.Status.Templates {
			if _, seen := rows[t.ID]; s.Counted() && t.Found && !seen {
				rows[t.ID] = t
			}
		}
	}
	for i := range srcs {
		st := &srcs[i].Status
		judged := map[Pair]int64{}
		for j := range st.Templates {
			t := &st.Templates[j]
			if row, ok := rows[t.ID]; ok && !t.Found {
				judgeByRow(t, row)
				for _, c := range t.Channels {
					judged[Pair{Template: t.ID, Channel: c.Name}] = c.PastEnd
				}
			}
		}
		for j := range st.Pairs {
			if n, ok := judged[st.Pairs[j].Pair]; ok {
				p := &st.Pairs[j]
				p.Counts, p.PastEnd = view.PastOwnExpiry(view.Unexpire(p.Counts, p.PastEnd), n)
			}
		}
	}
}

// judgeByRow judges t, a source's part without the template's row, by
// the campaign's rules in row (a part that has it).
func judgeByRow(t *view.Template, row view.Template) {
	t.Ended, t.Window = row.Ended, row.Window
	t.Counts, t.PastEnd = view.Counts{}, 0
	for k := range t.Channels {
		c := &t.Channels[k]
		c.Counts, c.PastEnd = view.Expire(c.Read(), c.PastOwn, row.Ended, row.Window)
		t.Counts.Add(c.Counts)
		t.PastEnd += c.PastEnd
	}
	t.Quota, t.Claimed = 0, 0 // the template's bar is its budget, not the buckets' sum
}
