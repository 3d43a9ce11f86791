package sink

import (
	"context"
	"fmt"
	"sort"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/inventory"
)

// The template budget cache (a legacy mapping without channel quotas): the
// budget of every template the sink has met, read from the template table
// at start or when a batch first touches a template, and followed from the
// binlog after that (canal.TemplateChange), so that over-issue is judged
// against the budget in force at the end of each batch. A template whose
// budget is NULL, or which has no row (never had one, or deleted), has no
// known budget: no over-issue is judged for it, and it counts nowhere in
// couponlink_over_issued, until a budget is set.

// budget is a template's budget; known is false when it has none.
type budget struct {
	quota int64
	known bool
}

// budgetChange is a batch's net change of a template's budget: before its
// first change (the before image the binlog carries) and after its last.
type budgetChange struct{ before, after budget }

// budgetChanges is the batch's template budget changes (a deleted row
// leaves the template with no known budget, as a fresh read would).
func budgetChanges(b *canal.Batch) map[int64]budgetChange {
	out := map[int64]budgetChange{}
	for _, tc := range b.Templates {
		after := budget{quota: tc.Quota, known: tc.Known}
		if tc.Deleted {
			after = budget{}
		}
		c, ok := out[tc.Template]
		if !ok {
			c.before = budget{quota: tc.PrevQuota, known: tc.PrevKnown}
		}
		c.after = after
		out[tc.Template] = c
	}
	return out
}

// loadTemplateQuotas reads the budgets of the templates the counters hold.
func (s *Sink) loadTemplateQuotas(ctx context.Context) error {
	s.mu.Lock() // the metrics collector reads it
	s.tplQuota = map[int64]budget{}
	s.mu.Unlock()
	return s.readBudgets(ctx, templatesIn(s.counts))
}

// learnTemplates reads the budgets of the templates the batch touches for
// the first time (unless the batch itself carries their budget).
func (s *Sink) learnTemplates(ctx context.Context, d inventory.Deltas) error {
	var unknown []inventory.Pair
	for p := range d {
		_, cached := s.tplQuota[p.Template]
		_, changed := s.tplNext[p.Template]
		if !cached && !changed {
			unknown = append(unknown, p)
		}
	}
	return s.readBudgets(ctx, templatesOf(unknown))
}

// readBudgets caches the budgets of ids as the template table holds them
// now; the binlog keeps them from then on.
func (s *Sink) readBudgets(ctx context.Context, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	q, err := s.src.TemplateQuotas(ctx, s.db, ids)
	if err != nil {
		return fmt.Errorf("read template quotas: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		v, ok := q[id]
		s.setBudget(id, budget{quota: v, known: ok})
	}
	return nil
}

// setBudget caches a template's budget and says once, when it becomes
// unknown, that its over-issue is not judged. The caller holds s.mu.
func (s *Sink) setBudget(tpl int64, b budget) {
	old, had := s.tplQuota[tpl]
	s.tplQuota[tpl] = b
	if !b.known && (!had || old.known) {
		s.log.Warn("template has no known budget (NULL, or no row in the template table): over-issue is not judged for it until one is set",
			"template", tpl, "table", s.cfg.Mapping.Template.Table, "column", s.cfg.Mapping.Template.TotalQuota)
	}
}

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
		was, now := s.tplQuota[tpl], s.tplQuota[tpl]
		if c, ok := s.tplNext[tpl]; ok {
			was, now = c.before, c.after
		}
		wasOver := was.known && before[tpl] > was.quota
		if now.known && after[tpl] > now.quota && !wasOver {
			out = append(out, Anomaly{Kind: AnomalyOverIssue, Template: tpl,
				Detail: fmt.Sprintf("template %d holds %d coupons (held+used+frozen) over its quota of %d", tpl, after[tpl], now.quota)})
		}
	}
	return out
}
