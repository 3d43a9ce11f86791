package sink

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"time"

	"github.com/couponlink/couponlink/canal"
)

// Status is where a cdc stands, read from MySQL: what `couponlink status` prints.
type Status struct {
	Checkpoint Checkpoint
	Found      bool
	Server     canal.Position // the server's binlog end now
	Now        time.Time
	Anomalies  map[string]int64
	Pairs      []PairStatus
	// Webhooks counts the outbox's events by status (pending, delivered,
	// dropped); OldestPending is when the oldest pending one was written.
	Webhooks      map[string]int64
	OldestPending time.Time
}

// PairStatus is one channel bucket: derived counters and, when known, its quota.
type PairStatus struct {
	Pair
	Counts
	Quota    Quota
	HasQuota bool
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

// ReadStatus reads the checkpoint, the anomaly counts and the counters.
func ReadStatus(ctx context.Context, db *sql.DB, name string) (Status, error) {
	st := Status{Now: time.Now().UTC(), Anomalies: map[string]int64{}, Webhooks: map[string]int64{}}
	var err error
	if st.Checkpoint, st.Found, err = LoadCheckpoint(ctx, db, name); err != nil {
		return st, err
	}
	if st.Server, err = canal.CurrentPosition(ctx, db); err != nil {
		return st, err
	}
	rows, err := db.QueryContext(ctx, `SELECT kind, COUNT(*) FROM cdc_anomaly GROUP BY kind`)
	if err != nil {
		return st, fmt.Errorf("count anomalies: %w", err)
	}
	for rows.Next() {
		var k string
		var n int64
		if err := rows.Scan(&k, &n); err != nil {
			rows.Close()
			return st, err
		}
		st.Anomalies[k] = n
	}
	rows.Close()
	if err := readOutbox(ctx, db, &st); err != nil {
		return st, err
	}
	counts, err := loadCounters(ctx, db)
	if err != nil {
		return st, err
	}
	quotas := map[Pair]Quota{}
	qrows, err := db.QueryContext(ctx, `SELECT template_id, channel, quota, claimed FROM channel_quota`)
	if err == nil { // a legacy deployment may have no channel_quota rows
		for qrows.Next() {
			var p Pair
			var q Quota
			if err := qrows.Scan(&p.Template, &p.Channel, &q.Quota, &q.Claimed); err != nil {
				qrows.Close()
				return st, err
			}
			quotas[p] = q
		}
		qrows.Close()
	}
	for p, c := range counts {
		q, ok := quotas[p]
		st.Pairs = append(st.Pairs, PairStatus{Pair: p, Counts: *c, Quota: q, HasQuota: ok})
	}
	sort.Slice(st.Pairs, func(i, j int) bool { return st.Pairs[i].Pair.less(st.Pairs[j].Pair) })
	return st, nil
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
	return rows.Err()
}
