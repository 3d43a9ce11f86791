package sink

import (
	"context"
	"database/sql"
	"math"
	"time"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/inventory"
	"github.com/couponlink/couponlink/webhook"
)

// The cdc reports what it sees to downstream systems as webhook events,
// written to the outbox in the transaction of the change they report: an
// event exists if and only if its change committed, once, whatever crashes
// and replays happen. The webhook package delivers them.

// enqueue writes events to the outbox in tx, when webhooks are on.
func (s *Sink) enqueue(ctx context.Context, tx *sql.Tx, events []webhook.Event) error {
	if !s.cfg.Webhooks || len(events) == 0 {
		return nil
	}
	return webhook.Enqueue(ctx, tx, events...)
}

// batchEvents are a batch's events: channels that sold out, slots
// released, anomalies.
func (s *Sink) batchEvents(b *canal.Batch, released []release, anomalies []Anomaly) []webhook.Event {
	if !s.cfg.Webhooks {
		return nil
	}
	at := b.EventTime.UTC()
	if b.EventTime.IsZero() {
		at = s.cfg.Now().UTC()
	}
	var out []webhook.Event
	for _, q := range b.Quotas {
		switch {
		case q.SoldOut:
			out = append(out, webhook.Event{Type: webhook.ChannelSoldOut, Time: at, Template: q.Template, Channel: q.Channel,
				Data: map[string]any{"quota": q.Quota, "claimed": q.Claimed, "claimable": 0}})
		case s.cfg.ChannelLow > 0 && turnsLow(q, s.cfg.ChannelLow):
			out = append(out, webhook.Event{Type: webhook.ChannelLow, Time: at, Template: q.Template, Channel: q.Channel,
				Data: map[string]any{"quota": q.Quota, "claimed": q.Claimed, "claimable": q.Quota - q.Claimed,
					"threshold": lowThreshold(q.Quota, s.cfg.ChannelLow), "low_share": s.cfg.ChannelLow}})
		}
	}
	out = append(out, releasedEvents(released, at)...)
	return append(out, anomalyEvents(anomalies, at, b.End)...)
}

// lowThreshold is the claimable count at or below which a bucket of
// quota is low: share of it, rounded up, at least 1.
func lowThreshold(quota int64, share float64) int64 {
	return max(int64(math.Ceil(float64(quota)*share)), 1)
}

// turnsLow says whether the update q brought its bucket's claimable slots
// from above its low threshold to at or below it, not to 0.
func turnsLow(q canal.QuotaChange, share float64) bool {
	if !q.Updated || q.Quota <= 0 {
		return false
	}
	before, after := q.PrevQuota-q.PrevClaimed, q.Quota-q.Claimed
	return before > lowThreshold(q.PrevQuota, share) && after > 0 && after <= lowThreshold(q.Quota, share)
}

// releasedEvents is one quota.released event per channel bucket.
func releasedEvents(rs []release, at time.Time) []webhook.Event {
	type tally struct {
		n       int64
		byCause map[string]int64
	}
	per := map[inventory.Pair]*tally{}
	var pairs []inventory.Pair
	for _, r := range rs {
		t := per[r.Pair]
		if t == nil {
			t = &tally{byCause: map[string]int64{}}
			per[r.Pair] = t
			pairs = append(pairs, r.Pair)
		}
		t.n++
		t.byCause[r.Cause]++
	}
	sortPairs(pairs)
	out := make([]webhook.Event, 0, len(pairs))
	for _, p := range pairs {
		out = append(out, webhook.Event{Type: webhook.QuotaReleased, Time: at, Template: p.Template, Channel: p.Channel,
			Data: map[string]any{"released": per[p].n, "by_cause": per[p].byCause}})
	}
	return out
}

// anomalyEvents is one anomaly.detected event per kind and channel bucket,
// with a sample of the coupons (the cdc_anomaly table has them all).
func anomalyEvents(as []Anomaly, at time.Time, pos canal.Position) []webhook.Event {
	type key struct {
		kind string
		p    inventory.Pair
	}
	type group struct {
		n       int
		coupons []int64
		detail  string
	}
	groups := map[key]*group{}
	var keys []key
	for _, a := range as {
		k := key{a.Kind, inventory.Pair{Template: a.Template, Channel: a.Channel}}
		g := groups[k]
		if g == nil {
			g = &group{detail: a.Detail}
			groups[k] = g
			keys = append(keys, k)
		}
		g.n++
		if len(g.coupons) < 10 {
			g.coupons = append(g.coupons, a.Coupon)
		}
	}
	out := make([]webhook.Event, 0, len(keys))
	for _, k := range keys {
		g := groups[k]
		out = append(out, webhook.Event{Type: webhook.AnomalyDetected, Time: at, Template: k.p.Template, Channel: k.p.Channel,
			Data: map[string]any{"kind": k.kind, "count": g.n, "coupons_sample": g.coupons, "detail": g.detail, "binlog": pos.String()}})
	}
	return out
}
