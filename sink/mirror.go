package sink

import (
	"context"
	"maps"

	"github.com/couponlink/couponlink/inventory"
	"github.com/couponlink/couponlink/quota"
)

// The mirror is the sink's in-memory copy of what its checkpoint covers:
// inventory_counter (counts), channel_quota (quotas) or, without channel
// quotas, the templates' quotas. The batch writer changes it after each
// commit; the metrics collector, the anomaly checks and the rebalancing
// rule read it.

func (s *Sink) setMirror(counts map[inventory.Pair]*inventory.Counts, quotas map[inventory.Pair]inventory.Quota) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counts, s.quotas = counts, quotas
	now := s.cfg.Now()
	for p := range counts {
		s.active[p.Template] = now
	}
}

// nextQuota is a bucket's quota after the batch b.
func (s *Sink) nextQuota(b *batch, p inventory.Pair) (inventory.Quota, bool) {
	if q, ok := b.quotas[p]; ok {
		return q, true
	}
	q, ok := s.quotas[p]
	return q, ok
}

// commitMirror makes the mirror, and the stall watch's checkpoint, what
// the committed batch b left.
func (s *Sink) commitMirror(_ context.Context, b *batch) {
	s.mu.Lock()
	now := s.cfg.Now()
	maps.Copy(s.counts, b.next)
	for p := range b.next {
		s.active[p.Template] = now
	}
	if s.quotas != nil {
		for p, q := range b.quotas {
			s.quotas[p] = q
			s.active[p.Template] = now
		}
	}
	for tpl, c := range b.templates {
		s.setTemplate(tpl, c.after)
	}
	s.pos = b.End
	s.mu.Unlock()
	s.progressed(b.End, b.EventTime)
}

// quotaMirror is the mirror as the rebalancing rule reads it (quota.Mirror).
type quotaMirror struct{ s *Sink }

func (m quotaMirror) Buckets() map[int64][]quota.Channel {
	s := m.s
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := map[int64][]quota.Channel{}
	for p, q := range s.quotas {
		c := s.countsOf(p)
		c.Name, c.Quota, c.Claimed = p.Channel, q.Quota, q.Claimed
		out[p.Template] = append(out[p.Template], c)
	}
	return out
}

func (m quotaMirror) Counts(template int64, channel string) quota.Channel {
	m.s.mu.RLock()
	defer m.s.mu.RUnlock()
	return m.s.countsOf(inventory.Pair{Template: template, Channel: channel})
}

// countsOf is a bucket's derived counts; the caller holds s.mu.
func (s *Sink) countsOf(p inventory.Pair) quota.Channel {
	var c quota.Channel
	if n := s.counts[p]; n != nil {
		c.AddCounts(*n)
	}
	return c
}
