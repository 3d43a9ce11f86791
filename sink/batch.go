package sink

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"time"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/internal/sqltx"
	"github.com/couponlink/couponlink/inventory"
)

// ApplyBatch applies one batch: counters, anomalies and checkpoint in one
// transaction; then Redis. An error leaves MySQL as it was before the
// batch; the caller must stop and restart from the checkpoint.
func (s *Sink) ApplyBatch(ctx context.Context, b *canal.Batch) error {
	s.work.Lock()
	defer s.work.Unlock()
	start := time.Now()
	if b.Empty() {
		return s.idle(ctx, b)
	}
	if s.cfg.Strict && len(b.Undecodable) > 0 {
		return fmt.Errorf("%w: %s (strict)", ErrUndecodableRow, b.Undecodable[0])
	}
	d := inventory.FromBatch(b)
	s.quotaNext = quotaChanges(b)
	next := make(map[inventory.Pair]*inventory.Counts, len(d))
	for p, delta := range d {
		c := inventory.Counts{}
		if old := s.counts[p]; old != nil {
			c = *old
		}
		c.Add(*delta)
		next[p] = &c
	}
	if s.followsTemplates() {
		s.tplNext = templateChanges(b)
		if err := s.learnTemplates(ctx, d); err != nil {
			return err
		}
	}
	anomalies, err := s.judge(ctx, b, next)
	if err != nil {
		return err
	}
	// every touched pair, even with a net zero delta: its stamp must move
	pairs := make([]inventory.Pair, 0, len(d))
	for p := range d {
		pairs = append(pairs, p)
	}
	sort.Slice(pairs, func(i, j int) bool { return pairs[i].Less(pairs[j]) })
	templates := templatesOf(pairs)
	applied, all, err := s.commitBatch(ctx, b, d, pairs, templates, anomalies)
	if err != nil {
		return fmt.Errorf("apply batch ending at %s: %w", b.End, err)
	}
	clear(s.pendingDirty)
	clear(s.tplDirty)
	s.m.releases.Add(float64(len(applied)))
	s.commitMirror(next, b.End)
	s.progressed(b.End, b.EventTime)
	s.observe(b, all, start)
	if s.redis != nil {
		s.syncRedis(ctx, s.touchedTemplates(b, templates))
		s.freshenReleased(ctx, applied)
	}
	s.m.batchDuration.Observe(time.Since(start).Seconds())
	return nil
}

// quotaChanges is the batch's channel_quota changes by bucket (a deleted
// bucket's quota is zero).
func quotaChanges(b *canal.Batch) map[inventory.Pair]inventory.Quota {
	out := map[inventory.Pair]inventory.Quota{}
	for _, qc := range b.Quotas {
		p := inventory.Pair{Template: qc.Template, Channel: qc.Channel}
		if qc.Deleted {
			out[p] = inventory.Quota{}
		} else {
			out[p] = inventory.Quota{Quota: qc.Quota, Claimed: qc.Claimed}
		}
	}
	return out
}

// commitBatch writes the batch in one transaction: counters, template
// counts, anomalies (with the duplicates and the order keys' it finds),
// pending checks and order keys,
// releases, webhook events and the checkpoint. It returns the releases it
// applied and every anomaly.
func (s *Sink) commitBatch(ctx context.Context, b *canal.Batch, d inventory.Deltas, pairs []inventory.Pair, templates []int64,
	anomalies []Anomaly) (applied []release, all []Anomaly, err error) {
	err = sqltx.Run(ctx, s.db, nil, func(tx *sql.Tx) error {
		if err := writeCounters(ctx, tx, pairs, d, true, inventory.Stamp(b.End)); err != nil {
			return err
		}
		if err := s.refreshTemplates(ctx, tx, templates); err != nil {
			return err
		}
		dups, err := s.countRedemptions(ctx, tx, b)
		if err != nil {
			return err
		}
		orders, err := s.countOrderKeys(ctx, tx, b)
		if err != nil {
			return err
		}
		over, err := s.countClaims(ctx, tx, b)
		if err != nil {
			return err
		}
		all = append(append(append(anomalies[:len(anomalies):len(anomalies)], dups...), orders...), over...)
		if err := s.insertAnomalies(ctx, tx, all, b); err != nil {
			return err
		}
		if err := s.savePending(ctx, tx); err != nil {
			return err
		}
		if err := s.saveTemplates(ctx, tx); err != nil {
			return err
		}
		if s.cfg.Releases {
			if applied, err = applyReleases(ctx, tx, releasesOf(b), s.cfg.Now().UTC()); err != nil {
				return err
			}
			if err := s.scheduleExpiries(ctx, tx, b); err != nil {
				return err
			}
		}
		if err := s.enqueue(ctx, tx, s.batchEvents(b, applied, all)); err != nil {
			return err
		}
		return saveCheckpoint(ctx, tx, s.cfg.Name, s.epoch, b, len(all))
	})
	return applied, all, err
}

// idle handles a heartbeat: save a moved position, run due checks, and
// keep Redis whole.
func (s *Sink) idle(ctx context.Context, b *canal.Batch) error {
	due := len(s.pending) > 0
	orders := s.orderKeysDue()
	if b.End != s.pos || due || orders {
		s.quotaNext = nil
		var anomalies []Anomaly
		if due {
			var err error
			if anomalies, err = s.duePending(ctx); err != nil {
				return err
			}
		}
		if b.End != s.pos || len(anomalies) > 0 || len(s.pendingDirty) > 0 || orders {
			err := sqltx.Run(ctx, s.db, nil, func(tx *sql.Tx) error {
				more, err := s.countOrderKeys(ctx, tx, b) // the batch is empty: it decides the due keys
				if err != nil {
					return err
				}
				anomalies = append(anomalies, more...)
				if err := s.insertAnomalies(ctx, tx, anomalies, b); err != nil {
					return err
				}
				if err := s.savePending(ctx, tx); err != nil {
					return err
				}
				if err := s.enqueue(ctx, tx, s.batchEvents(b, nil, anomalies)); err != nil {
					return err
				}
				return saveCheckpoint(ctx, tx, s.cfg.Name, s.epoch, b, len(anomalies))
			})
			if err != nil {
				return fmt.Errorf("save idle checkpoint %s: %w", b.End, err)
			}
			clear(s.pendingDirty)
			s.pos = b.End
			s.progressed(b.End, b.EventTime)
			s.countAnomalies(anomalies)
		}
		s.m.pendingChecks.Set(float64(s.npending + s.orderPending))
	}
	s.m.lag.Set(0) // caught up: the heartbeat came because nothing was left to read
	if s.redis != nil {
		s.syncRedis(ctx, nil)
	}
	return nil
}

func (s *Sink) touchedTemplates(b *canal.Batch, templates []int64) []int64 {
	if len(b.Quotas) == 0 {
		return templates
	}
	seen := map[int64]bool{}
	for _, t := range templates {
		seen[t] = true
	}
	for _, q := range b.Quotas {
		if !seen[q.Template] {
			seen[q.Template] = true
			templates = append(templates, q.Template)
		}
	}
	return templates
}

func (s *Sink) observe(b *canal.Batch, anomalies []Anomaly, start time.Time) {
	var ins, upd, del int
	for i := range b.Transitions {
		switch t := &b.Transitions[i]; {
		case t.From == 0:
			ins++
		case t.To == 0:
			del++
		default:
			upd++
		}
	}
	add := func(table, kind string, n int) {
		if n > 0 {
			s.m.events.WithLabelValues(table, kind).Add(float64(n))
		}
	}
	add("user_coupon", "insert", ins)
	add("user_coupon", "update", upd)
	add("user_coupon", "delete", del)
	var rdel int
	for i := range b.Redemptions {
		if b.Redemptions[i].Deleted {
			rdel++
		}
	}
	add("redemption_log", "insert", len(b.Redemptions)-rdel)
	add("redemption_log", "delete", rdel)
	add("inventory_flow", "insert", len(b.Flows))
	rowKinds := func(table string, n int, kind func(i int) (ins, del bool)) {
		var ins, del int
		for i := range n {
			switch in, de := kind(i); {
			case in:
				ins++
			case de:
				del++
			}
		}
		add(table, "insert", ins)
		add(table, "update", n-ins-del)
		add(table, "delete", del)
	}
	rowKinds("channel_quota", len(b.Quotas), func(i int) (bool, bool) { return b.Quotas[i].Inserted, b.Quotas[i].Deleted })
	rowKinds("template", len(b.Templates), func(i int) (bool, bool) { return b.Templates[i].Inserted, b.Templates[i].Deleted })
	rowKinds("orders", len(b.Orders), func(i int) (bool, bool) { return !b.Orders[i].Deleted, b.Orders[i].Deleted })
	s.m.batchRows.Observe(float64(b.Rows))
	if !b.EventTime.IsZero() {
		s.m.lag.Set(max(0, s.cfg.Now().Sub(b.EventTime).Seconds()))
		s.m.checkpointTime.Set(float64(b.EventTime.Unix()))
	}
	s.countAnomalies(anomalies)
	s.m.pendingChecks.Set(float64(s.npending + s.orderPending))
}

func (s *Sink) countAnomalies(as []Anomaly) {
	for _, a := range as {
		s.m.anomalies.WithLabelValues(a.Kind).Inc()
		s.log.Warn("anomaly", "kind", a.Kind, "coupon", a.Coupon, "template", a.Template, "channel", a.Channel,
			"from", a.From.String(), "to", a.To.String(), "change", s.change(a), "order", a.Order, "position", s.pos.String(), "detail", a.Detail)
	}
}
