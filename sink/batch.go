package sink

import (
	"context"
	"sort"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/inventory"
)

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

// The commit stages of the pipeline that are no check's, in b's
// transaction (pipeline.go).

// writeBatchCounters adds the batch's deltas to inventory_counter: in the
// tail of the transaction (saveBatchCheckpoint sends it).
func (s *Sink) writeBatchCounters(_ context.Context, b *batch) error {
	if st, ok := countersStatement(b.pairs, b.deltas, true, inventory.Stamp(b.End)); ok {
		b.tail = append(b.tail, st)
	}
	return nil
}

// refreshBatchTemplates refreshes the cached counts of the templates the
// batch touched, from the counters: in the tail, after them.
func (s *Sink) refreshBatchTemplates(_ context.Context, b *batch) error {
	if st, ok := s.templatesStatement(b.touched); ok {
		b.tail = append(b.tail, st)
	}
	return nil
}

// recordAnomalies records every anomaly of the batch.
func (s *Sink) recordAnomalies(ctx context.Context, b *batch) error {
	return s.insertAnomalies(ctx, b.tx, b.anomalies, b.Batch)
}

// enqueueBatch writes the batch's webhook events.
func (s *Sink) enqueueBatch(ctx context.Context, b *batch) error {
	return s.enqueue(ctx, b.tx, s.batchEvents(b.Batch, b.released, b.anomalies))
}

// saveBatchCheckpoint sends the tail (the counters, the template counts)
// and the batch's end as the checkpoint, fenced by the epoch: in one round
// trip when the pool allows it (groupcommit.go).
func (s *Sink) saveBatchCheckpoint(ctx context.Context, b *batch) error {
	tail := append(b.tail, checkpointStatement(s.cfg.Name, s.epoch, b.Batch, len(b.anomalies)))
	res, err := s.execTail(ctx, b.tx, tail)
	if err != nil {
		return err
	}
	return fenced(res)
}

// syncBatch writes, after the commit, the Redis stock keys of the
// templates whose buckets the batch changed (its channel_quota rows), then
// of the buckets it released. A stock key is a bucket's quota − claimed
// (or their sum): a batch of coupon rows alone changes none.
func (s *Sink) syncBatch(ctx context.Context, b *batch) {
	if s.redis != nil {
		s.syncRedis(ctx, quotaTemplates(b.Batch))
		s.freshenReleased(ctx, b.released)
		s.syncClaimed(ctx, b.Transitions)
	}
}

// sortPairs sorts pairs by template, then channel.
func sortPairs(pairs []inventory.Pair) {
	sort.Slice(pairs, func(i, j int) bool { return pairs[i].Less(pairs[j]) })
}

// quotaTemplates are the templates of b's channel_quota changes, in the
// order they first come.
func quotaTemplates(b *canal.Batch) []int64 {
	var out []int64
	seen := map[int64]bool{}
	for _, q := range b.Quotas {
		if !seen[q.Template] {
			seen[q.Template] = true
			out = append(out, q.Template)
		}
	}
	return out
}

// observe counts the committed batch in the metrics, and logs its
// anomalies.
func (s *Sink) observe(_ context.Context, bs *batch) {
	s.m.releases.Add(float64(len(bs.released)))
	b := bs.Batch
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
	s.countAnomalies(bs.anomalies)
	s.pendingChecks()
}

func (s *Sink) countAnomalies(as []Anomaly) {
	for _, a := range as {
		s.m.anomalies.WithLabelValues(a.Kind).Inc()
		s.log.Warn("anomaly", "kind", a.Kind, "coupon", a.Coupon, "template", a.Template, "channel", a.Channel,
			"from", a.From.String(), "to", a.To.String(), "change", s.change(a), "order", a.Order, "position", s.pos.String(), "detail", a.Detail)
	}
}
