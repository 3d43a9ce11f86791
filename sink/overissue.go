package sink

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/couponlink/couponlink/inventory"
)

// Over-issue is judged from the truth, never from the counters alone: the
// counter mirror is loaded from inventory_counter (at a start, after a
// correction), which a hand edit may have corrupted — such a counter is
// drift, which the reconciler reports as drift. The mirror only names the
// suspects (overSuspects): a bucket whose held + used + frozen is over its
// quota (a legacy template without channel buckets: over its budget). Each
// suspect is confirmed by counting its coupons in the coupon table
// (judgeOverIssueByTruth); couponlink_over_issued counts the confirmed
// ones, and an over_issue anomaly a batch raises stands only when the
// truth confirms it.

// overVerdict is what the truth said of a suspect, while its mirror value
// stays what it was when counted.
type overVerdict struct {
	mirror, truth, limit int64
	over                 bool
	at                   time.Time // when the coupons were counted
}

// overRecountEvery bounds how often one suspect's coupons are counted
// again while its counters move (a busy bucket whose counter drifted over
// its quota would be counted at every batch): its last verdict stands
// meanwhile.
const overRecountEvery = 5 * time.Second

// overSuspect is a bucket (Channel "" for a template judged as a whole)
// whose counter mirror is over its limit.
type overSuspect struct {
	mirror, limit int64
}

// overSuspects lists the buckets — or, without channel quotas, the
// templates — whose held + used + frozen in the counter mirror exceeds
// their quota. The caller holds s.mu.
func (s *Sink) overSuspects() map[inventory.Pair]overSuspect {
	out := map[inventory.Pair]overSuspect{}
	if s.quotas != nil {
		for p, c := range s.counts {
			if q, ok := s.quotas[p]; ok && c.Taken() > q.Quota {
				out[p] = overSuspect{c.Taken(), q.Quota}
			}
		}
		return out
	}
	taken := map[int64]int64{}
	for p, c := range s.counts {
		taken[p.Template] += c.Taken()
	}
	for tpl, t := range taken {
		if v := s.tpl[tpl]; v.HasBudget && t > v.Budget {
			out[inventory.Pair{Template: tpl}] = overSuspect{t, v.Budget}
		}
	}
	return out
}

// judgeOverIssueByTruth confirms each suspect the mirror names against the
// truth, counting the coupons of the suspects not judged at their current
// mirror value yet, or judged not over (the counters and the coupons
// disagreed: a commit not visible yet, or drifted counters) more than
// overRecountEvery ago; a bucket the mirror no longer suspects is not over.
// A count that fails keeps the last verdicts (logged): the next batch or
// reload tries again.
func (s *Sink) judgeOverIssueByTruth(ctx context.Context, b *batch) {
	if b != nil && len(b.next) == 0 && len(b.quotas) == 0 && len(b.templates) == 0 {
		return // nothing the suspects depend on moved
	}
	s.mu.RLock()
	suspects, before := s.overSuspects(), s.overJudged
	s.mu.RUnlock()
	var stale []int64
	judged := map[inventory.Pair]overVerdict{}
	now := time.Now()
	for p, sus := range suspects {
		v, ok := before[p]
		settled := v.over && v.mirror == sus.mirror && v.limit == sus.limit
		if ok && (settled || now.Sub(v.at) < overRecountEvery) {
			judged[p] = v
		} else {
			stale = append(stale, p.Template)
		}
	}
	if len(stale) > 0 {
		truth, err := s.countTruth(ctx, slices.Compact(slices.Sorted(slices.Values(stale))))
		if err != nil {
			s.log.Error("over-issue: the truth could not be counted; the last verdicts stay", "err", err)
			return
		}
		for p, sus := range suspects {
			if _, ok := judged[p]; ok {
				continue
			}
			v := overVerdict{mirror: sus.mirror, truth: takenOf(truth, p, s.quotas == nil), limit: sus.limit, at: now}
			v.over = v.truth > sus.limit
			if !v.over {
				s.log.Warn("over-issue suspected from the counters but not in the coupons: the counters drifted (the reconciler reports it)",
					"template", p.Template, "channel", p.Channel, "counters", sus.mirror, "coupons", v.truth, "quota", sus.limit)
			}
			judged[p] = v
		}
	}
	s.mu.Lock()
	s.overJudged = judged
	s.mu.Unlock()
}

// takenOf is held + used + frozen of bucket p in counts, or with whole
// of every bucket of p's template.
func takenOf(counts map[inventory.Pair]*inventory.Counts, p inventory.Pair, whole bool) int64 {
	var n int64
	for q, c := range counts {
		if q == p || (whole && q.Template == p.Template) {
			n += c.Taken()
		}
	}
	return n
}

// overIssuedNow counts the buckets the truth confirmed over their quota
// (couponlink_over_issued). A state, not an event: an over-issue found by
// a bootstrap before the first scrape is seen as surely as one the binlog
// shows later. The caller holds s.mu.
func (s *Sink) overIssuedNow() int {
	n := 0
	for _, v := range s.overJudged {
		if v.over {
			n++
		}
	}
	return n
}

// overConfirmTries and overConfirmWait bound the recounts of a batch's
// over-issue that the coupons do not show yet: a binlog event can be read
// before its transaction's rows are visible to a new read (the binlog is
// written before the engine commits), so a count that disagrees with the
// counters is counted again, waiting 2, 4, ... 64 ms (about 0.13 s in
// all), before it is taken as drift.
const (
	overConfirmTries = 7
	overConfirmWait  = 2 * time.Millisecond
)

// countTruth counts the coupons of templates now.
func (s *Sink) countTruth(ctx context.Context, templates []int64) (map[inventory.Pair]*inventory.Counts, error) {
	if s.cfg.countTruth != nil {
		return s.cfg.countTruth(ctx, templates)
	}
	return s.src.CountTemplates(ctx, s.db, templates)
}

// confirmedOverIssues keeps the over_issue anomalies of a batch that the
// truth confirms: the coupons of their templates counted now (at or past
// the batch, as the binlog is behind the server) are over the limit. One
// the coupons do not show is counted again (overConfirmTries), unless its
// bucket disagreed after every recount less than overRecountEvery ago;
// what disagrees still is drift, logged (the reconciler reports it).
func (s *Sink) confirmedOverIssues(ctx context.Context, found []Anomaly, limit func(Anomaly) int64) ([]Anomaly, error) {
	var out []Anomaly
	wait := overConfirmWait
	for try := 1; len(found) > 0; try++ {
		ids := map[int64]bool{}
		for _, a := range found {
			ids[a.Template] = true
		}
		truth, err := s.countTruth(ctx, slices.Sorted(maps.Keys(ids)))
		if err != nil {
			return nil, fmt.Errorf("over-issue: count the truth: %w", err)
		}
		var again []Anomaly
		for _, a := range found {
			p := inventory.Pair{Template: a.Template, Channel: a.Channel}
			switch t := takenOf(truth, p, s.quotas == nil); {
			case t > limit(a):
				out = append(out, a)
			case try < overConfirmTries && !s.unsettled(p):
				again = append(again, a)
			default:
				s.settle(p)
				s.log.Warn("over-issue in the counters but not in the coupons: the counters drifted (the reconciler reports it)",
					"template", a.Template, "channel", a.Channel, "coupons", t, "quota", limit(a), "counted", try)
			}
		}
		if found = again; len(found) > 0 {
			s.m.overRecounts.Add(float64(len(found)))
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			wait *= 2
		}
	}
	return out, nil
}

// unsettled says whether p's counters and coupons disagreed after every
// recount less than overRecountEvery ago.
func (s *Sink) unsettled(p inventory.Pair) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	at, ok := s.overUnsettled[p]
	return ok && time.Since(at) < overRecountEvery
}

// settle records that p's counters and coupons disagree after every recount.
func (s *Sink) settle(p inventory.Pair) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.overUnsettled == nil {
		s.overUnsettled = map[inventory.Pair]time.Time{}
	}
	s.overUnsettled[p] = time.Now()
}
