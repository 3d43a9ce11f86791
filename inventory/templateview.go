package inventory

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"time"

	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/internal/sqltx"
	"github.com/couponlink/couponlink/inventory/view"
)

// TemplateViews reads the templates of ids as people see a legacy
// template (view.Template): its row in the template table (Templates),
// judged ended by the server's clock (serverNow), its AVAILABLE coupons
// past their own expires_at shown as expired (ExpiredByTime; not those of
// a fixed-window campaign, which follow its end: view.Expire), beside counts (the counters per pair) and quotas (the channel
// buckets; nil without), with the mapping's channel labels. A template
// with neither a row nor counters is absent; the rest are in ids' order.
func (s *Queries) TemplateViews(ctx context.Context, q Querier, ids []int64, counts map[Pair]*Counts, quotas map[Pair]Quota) ([]view.Template, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	m, err := s.m.WithServerZone(ctx, q) // time_zone SYSTEM, when the mapping was not resolved
	if err != nil {
		return nil, err
	}
	if m != s.m {
		s = NewQueries(m)
	}
	info, err := s.Templates(ctx, q, ids)
	if err != nil {
		return nil, err
	}
	now, err := s.serverNow(ctx, q)
	if err != nil {
		return nil, err
	}
	byTime, err := s.ExpiredByTime(ctx, q, ids, now)
	if err != nil {
		return nil, err
	}
	pairs := map[int64][]Pair{}
	for p := range counts {
		pairs[p.Template] = append(pairs[p.Template], p)
	}
	for p := range quotas {
		if counts[p] == nil {
			pairs[p.Template] = append(pairs[p.Template], p)
		}
	}
	out := make([]view.Template, 0, len(ids))
	for _, id := range ids {
		ti, found := info[id]
		if !found && len(pairs[id]) == 0 {
			continue
		}
		t := view.Template{ID: id, Found: found, Name: ti.Name, Budget: ti.Budget, HasBudget: ti.HasBudget, Remaining: ti.Remaining,
			PerUserLimit: ti.PerUserLimit, EndTime: ti.EndTime, Ended: ti.Ended(now), Window: ti.Window, Unlimited: ti.Unlimited, OffShelf: ti.OffShelf}
		ps := pairs[id]
		sort.Slice(ps, func(i, j int) bool { return ps[i].Less(ps[j]) })
		for _, p := range ps {
			ch := view.Channel{Name: p.Channel, Label: s.ChannelLabel(p.Channel), PastOwn: byTime[p]}
			if c := counts[p]; c != nil {
				ch.Counts = *c
			}
			if bq, ok := quotas[p]; ok {
				ch.Quota, ch.Claimed, ch.HasQuota = bq.Quota, bq.Claimed, true
			}
			ch.Counts, ch.PastEnd = view.Expire(ch.Counts, ch.PastOwn, t.Ended, t.Window)
			t.Counts.Add(ch.Counts)
			t.PastEnd += ch.PastEnd
			t.Channels = append(t.Channels, ch)
		}
		t.Quota, t.Claimed = 0, 0 // the template's bar is its budget, not the buckets' sum
		out = append(out, t)
	}
	return out, nil
}

// serverNow is the server's clock as an instant: NOW(6) read as UTC, as
// today, without time_zone (the server compares its own wall clocks);
// UTC_TIMESTAMP(6) with it (the DATETIMEs are read in that zone).
func (s *Queries) serverNow(ctx context.Context, q Querier) (time.Time, error) {
	query := "SELECT NOW(6)"
	if s.m.TimeZone != "" {
		query = "SELECT UTC_TIMESTAMP(6)"
	}
	var now time.Time
	if err := sqltx.EachRow(ctx, q, query, nil, func(rows *sql.Rows) error { return rows.Scan(&now) }); err != nil {
		return now, fmt.Errorf("read the server's clock: %w", err)
	}
	return now, nil
}

// ChannelLabel is the label the mapping gives a stored channel value
// (channel_labels), or "".
func (s *Queries) ChannelLabel(channel string) string { return s.m.ChannelLabels[channel] }

// ReadTemplate reads one template of a legacy mapping as
// `couponlink status -template` shows it (see TemplateViews); a template
// with neither a row nor counters is coupon.NotFound.
func (s *Queries) ReadTemplate(ctx context.Context, db *sql.DB, id int64) (view.Template, error) {
	all, err := LoadCounters(ctx, db)
	if err != nil {
		return view.Template{}, err
	}
	counts := map[Pair]*Counts{}
	for p, c := range all {
		if p.Template == id {
			counts[p] = c
		}
	}
	quotas, err := s.Quotas(ctx, db, id)
	if err != nil {
		return view.Template{}, err
	}
	ts, err := s.TemplateViews(ctx, db, []int64{id}, counts, quotas)
	if err != nil {
		return view.Template{}, err
	}
	if len(ts) == 0 {
		return view.Template{}, coupon.NotFound("template", id)
	}
	return ts[0], nil
}
