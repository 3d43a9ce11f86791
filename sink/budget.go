package sink

import (
	"context"
	"fmt"
	"sort"

	"github.com/couponlink/couponlink/inventory"
)

// overIssue is the over_issue check: the pairs (or, without channel
// quotas, the templates) a batch took over their quota; a bootstrap finds
// those over it at its snapshot (overIssuedAt).
type overIssue struct {
	noCheck
	s *Sink
}

func (c overIssue) seed(_ context.Context, sd *seeding) ([]Anomaly, error) {
	return c.s.overIssuedAt(sd.snap, sd.infos), nil
}

func (c overIssue) judge(ctx context.Context, b *batch) ([]Anomaly, error) {
	return c.s.confirmedOverIssues(ctx, c.s.overIssued(b), func(a Anomaly) int64 { return c.s.limitAfter(b, a) })
}

// limitAfter is the quota an over_issue anomaly of batch b was judged
// against: its bucket's after b, or without channel quotas its template's
// budget in force at b's end.
func (s *Sink) limitAfter(b *batch, a Anomaly) int64 {
	if s.quotas != nil {
		q, _ := s.nextQuota(b, inventory.Pair{Template: a.Template, Channel: a.Channel})
		return q.Quota
	}
	now := s.tpl[a.Template]
	if c, ok := b.templates[a.Template]; ok {
		now = c.after
	}
	return now.Budget
}

// overIssued finds pairs (or, without channel quotas, templates) that the
// batch took over their quota.
func (s *Sink) overIssued(b *batch) []Anomaly {
	var out []Anomaly
	if s.quotas != nil {
		for p, c := range b.next {
			q, ok := s.nextQuota(b, p)
			if !ok {
				continue
			}
			before := s.counts[p]
			wasOver := before != nil && before.Taken() > s.quotas[p].Quota
			if c.Taken() > q.Quota && !wasOver {
				out = append(out, Anomaly{Kind: inventory.AnomalyOverIssue, Template: p.Template, Channel: p.Channel,
					Detail: fmt.Sprintf("template %d channel %q holds %d coupons (held+used+frozen) over a quota of %d", p.Template, p.Channel, c.Taken(), q.Quota)})
			}
		}
		return out
	}
	return s.overBudget(b)
}

// overIssuedAt finds the pairs (or, without channel quotas, templates)
// over their quota at a bootstrap's snapshot (infos: its template rows):
// one over_issue anomaly each, per bootstrap. The batches flag only the
// crossings they see.
func (s *Sink) overIssuedAt(snap inventory.Snapshot, infos map[int64]inventory.TemplateInfo) []Anomaly {
	const found = "found at the snapshot of a bootstrap: "
	var out []Anomaly
	if snap.Quotas != nil {
		pairs := make([]inventory.Pair, 0, len(snap.Counts))
		for p := range snap.Counts {
			pairs = append(pairs, p)
		}
		sortPairs(pairs)
		for _, p := range pairs {
			c := snap.Counts[p]
			if q, ok := snap.Quotas[p]; ok && c.Taken() > q.Quota {
				out = append(out, Anomaly{Kind: inventory.AnomalyOverIssue, Template: p.Template, Channel: p.Channel,
					Detail: fmt.Sprintf(found+"template %d channel %q holds %d coupons (held+used+frozen) over a quota of %d", p.Template, p.Channel, c.Taken(), q.Quota)})
			}
		}
		return out
	}
	taken := map[int64]int64{}
	for p, c := range snap.Counts {
		taken[p.Template] += c.Taken()
	}
	for _, tpl := range templatesIn(snap.Counts) {
		if v := infos[tpl]; v.HasBudget && taken[tpl] > v.Budget {
			out = append(out, Anomaly{Kind: inventory.AnomalyOverIssue, Template: tpl,
				Detail: fmt.Sprintf(found+"template %d holds %d coupons (held+used+frozen) over its quota of %d", tpl, taken[tpl], v.Budget)})
		}
	}
	return out
}

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
func (s *Sink) overBudget(b *batch) []Anomaly {
	next := b.next
	if len(next) == 0 && len(b.templates) == 0 {
		return nil // a heartbeat: nothing moved
	}
	before, after := map[int64]int64{}, map[int64]int64{}
	for p := range next {
		before[p.Template], after[p.Template] = 0, 0
	}
	for tpl := range b.templates {
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
		if c, ok := b.templates[tpl]; ok {
			was, now = c.before, c.after
		}
		wasOver := was.HasBudget && before[tpl] > was.Budget
		if now.HasBudget && after[tpl] > now.Budget && !wasOver {
			out = append(out, Anomaly{Kind: inventory.AnomalyOverIssue, Template: tpl,
				Detail: fmt.Sprintf("template %d holds %d coupons (held+used+frozen) over its quota of %d", tpl, after[tpl], now.Budget)})
		}
	}
	return out
}
