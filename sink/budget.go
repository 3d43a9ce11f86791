package sink

import (
	"fmt"
	"sort"

	"github.com/couponlink/couponlink/inventory"
)

// Over-issue of a legacy mapping without channel quotas is judged against
// the template's budget in the template cache (see templates.go): at the
// end of each batch, against the budget in force then. A template with no
// known budget (NULL, or no row) is not judged, and counts nowhere in
// couponlink_over_issued, until a budget is set.

// overBudget finds the templates that the batch took over their budget:
// held + used + frozen over the budget in force at the batch's end, and
// not over the one in force (or without one) at its start. A cut below
// what is taken is such a crossing; a top-up is judged against the new
// budget.
func (s *Sink) overBudget(next map[inventory.Pair]*inventory.Counts) []Anomaly {
	before, after := map[int64]int64{}, map[int64]int64{}
	for p := range next {
		before[p.Template], after[p.Template] = 0, 0
	}
	for tpl := range s.tplNext {
		before[tpl], after[tpl] = 0, 0
	}
	for p, c := range s.counts {
		if _, ok := before[p.Template]; ok {
			before[p.Template] += c.Taken()
			if _, moved := next[p]; !moved {
				after[p.Template] += c.Taken()
			}
		}
	}
	for p, c := range next {
		after[p.Template] += c.Taken()
	}
	templates := make([]int64, 0, len(before))
	for tpl := range before {
		templates = append(templates, tpl)
	}
	sort.Slice(templates, func(i, j int) bool { return templates[i] < templates[j] })
	var out []Anomaly
	for _, tpl := range templates {
		was, now := s.tpl[tpl], s.tpl[tpl]
		if c, ok := s.tplNext[tpl]; ok {
			was, now = c.before, c.after
		}
		wasOver := was.HasBudget && before[tpl] > was.Budget
		if now.HasBudget && after[tpl] > now.Budget && !wasOver {
			out = append(out, Anomaly{Kind: AnomalyOverIssue, Template: tpl,
				Detail: fmt.Sprintf("template %d holds %d coupons (held+used+frozen) over its quota of %d", tpl, after[tpl], now.Budget)})
		}
	}
	return out
}
