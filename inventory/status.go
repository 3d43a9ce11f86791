package inventory

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/inventory/view"
)

// Status is where a cdc stands, read from MySQL: what `couponlink status` prints.
type Status struct {
	Checkpoint Checkpoint
	Found      bool
	Server     canal.Position // the server's binlog end now
	Now        time.Time
	Anomalies  map[string]int64
	// Recent are the latest anomalies, newest first (at most RecentAnomalies).
	Recent []Anomaly
	Pairs  []PairStatus
	// Templates are a legacy mapping's templates that have counters, as
	// the shop's template table has them (name, budget, remaining stock,
	// end time), beside their counters; nil for the reference schema.
	Templates []view.Template
	// Webhooks counts the outbox's events by status (pending, delivered,
	// dropped); OldestPending is when the oldest pending one was written.
	Webhooks      map[string]int64
	OldestPending time.Time
	WebhookError  string // the newest failing webhook event's last error
	// EventSinks are the stream sinks' positions, by name (eventsinks.go).
	EventSinks []EventSinkJSON
	// Shards are a legacy mapping's sharded roles and the tables each
	// stands for on the server now; ShardsError says why they could not
	// be resolved (a shard missing, a pattern matching nothing).
	Shards      []canal.RoleTables
	ShardsError string
}

// PairStatus is one channel bucket: its derived counters and, when known
// (HasQuota), its quota and claimed. With a legacy mapping, Label is the
// channel's label (channel_labels), and the AVAILABLE coupons of a
// template whose campaign has ended (its end_time) are counted in Expired,
// not Held: PastEnd says how many (see view.Template).
type PairStatus struct {
	Pair
	Counts
	HasQuota bool
	Label    string
	PastEnd  int64
}

// Lag is how far the checkpoint's last event is behind now. When the
// checkpoint is at the server's binlog end, the cdc is caught up: 0.
func (s Status) Lag() time.Duration {
	if !s.Found || !s.Checkpoint.EventTime.Valid {
		return 0
	}
	if s.Server.File == s.Checkpoint.Pos.File && s.Server.Pos == s.Checkpoint.Pos.Pos {
		return 0
	}
	return s.Now.Sub(s.Checkpoint.EventTime.Time)
}

// ReadPositions is where the cdc's checkpoint name stands and the
// server's binlog end now: a Status with nothing else read (its Lag and
// Behind work).
func ReadPositions(ctx context.Context, db *sql.DB, name string) (Status, error) {
	st := Status{Now: time.Now().UTC()}
	var err error
	if st.Checkpoint, st.Found, err = LoadCheckpoint(ctx, db, name); err != nil {
		return st, err
	}
	st.Server, err = canal.CurrentPosition(ctx, db)
	return st, err
}

// ReadStatus reads the checkpoint, the anomaly counts and the counters,
// with the reference schema's channel quotas.
func ReadStatus(ctx context.Context, db *sql.DB, name string) (Status, error) {
	return ReadMappedStatus(ctx, db, name, nil)
}

// ReadMappedStatus is ReadStatus for the schema of mapping m (nil: the
// reference schema): the quotas of its channel buckets and, for a legacy
// mapping, its templates (Status.Templates) and its channel labels.
func ReadMappedStatus(ctx context.Context, db *sql.DB, name string, m *canal.Mapping) (Status, error) {
	st, err := ReadPositions(ctx, db, name)
	if err != nil {
		return st, err
	}
	st.Webhooks = map[string]int64{}
	if err := readAnomalies(ctx, db, &st); err != nil {
		return st, err
	}
	if err := readOutbox(ctx, db, &st); err != nil {
		return st, err
	}
	if err := readEventSinks(ctx, db, &st); err != nil {
		return st, err
	}
	counts, err := LoadCounters(ctx, db)
	if err != nil {
		return st, err
	}
	legacy := m != nil && !m.Reference()
	if m == nil {
		m = canal.DefaultMapping()
	}
	if legacy && m.HasSets() {
		st.Shards, st.ShardsError = readShards(ctx, db, m)
	}
	src := NewQueries(m)
	quotas, err := src.Quotas(ctx, db)
	if err != nil && legacy {
		return st, err
	} // the reference schema's channel_quota: a deployment without it shows none, as before
	pastTime := map[Pair]int64{} // by the campaign's end or the coupons' own expiry
	if legacy {
		if st.Templates, err = src.TemplateViews(ctx, db, templatesOf(counts), counts, quotas); err != nil {
			return st, err
		}
		for _, t := range st.Templates {
			for _, c := range t.Channels {
				pastTime[Pair{Template: t.ID, Channel: c.Name}] = c.PastEnd
			}
		}
	}
	for p, c := range counts {
		ps := PairStatus{Pair: p, Counts: *c, Label: src.ChannelLabel(p.Channel)}
		if q, ok := quotas[p]; ok {
			ps.Quota, ps.Claimed, ps.HasQuota = q.Quota, q.Claimed, true
		}
		if n := pastTime[p]; n > 0 {
			ps.Counts, ps.PastEnd = view.PastOwnExpiry(ps.Counts, n)
		}
		st.Pairs = append(st.Pairs, ps)
	}
	sort.Slice(st.Pairs, func(i, j int) bool { return st.Pairs[i].Pair.Less(st.Pairs[j].Pair) })
	return st, nil
}

// readShards resolves the mapping on db and lists its sharded roles.
func readShards(ctx context.Context, db *sql.DB, m *canal.Mapping) ([]canal.RoleTables, string) {
	r, err := m.Resolve(ctx, db)
	if err != nil {
		return nil, err.Error()
	}
	var out []canal.RoleTables
	for _, rt := range r.RoleTables() {
		if rt.Sharded {
			out = append(out, rt)
		}
	}
	return out, ""
}

// templatesOf is the templates of the pairs, in order.
func templatesOf(counts map[Pair]*Counts) []int64 {
	seen := map[int64]bool{}
	var out []int64
	for p := range counts {
		if !seen[p.Template] {
			seen[p.Template] = true
			out = append(out, p.Template)
		}
	}
	slices.Sort(out)
	return out
}

// readOutbox counts the webhook outbox by status.
func readOutbox(ctx context.Context, db *sql.DB, st *Status) error {
	rows, err := db.QueryContext(ctx, `SELECT status, COUNT(*), MIN(created_at) FROM webhook_outbox GROUP BY status`)
	if err != nil {
		return fmt.Errorf("count webhook events: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var status string
		var n int64
		var oldest time.Time
		if err := rows.Scan(&status, &n, &oldest); err != nil {
			return err
		}
		st.Webhooks[status] = n
		if status == "pending" {
			st.OldestPending = oldest
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	var failing int64
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM webhook_outbox WHERE status = 'pending' AND attempts > 0`).Scan(&failing); err != nil {
		return fmt.Errorf("count failing webhook events: %w", err)
	}
	st.Webhooks["failing"] = failing
	return nil
}
