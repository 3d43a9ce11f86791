package inventory

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"time"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/internal/sqltx"
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

// PairStatus is one channel bucket: its derived counters and, when known
// (HasQuota), its quota and claimed.
type PairStatus struct {
	Pair
	Counts
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
	err = sqltx.EachRow(ctx, db, `SELECT kind, COUNT(*) FROM cdc_anomaly GROUP BY kind`, nil, func(rows *sql.Rows) error {
		var k string
		var n int64
		if err := rows.Scan(&k, &n); err != nil {
			return err
		}
		st.Anomalies[k] = n
		return nil
	})
	if err != nil {
		return st, fmt.Errorf("count anomalies: %w", err)
	}
	if err := readOutbox(ctx, db, &st); err != nil {
		return st, err
	}
	counts, err := LoadCounters(ctx, db)
	if err != nil {
		return st, err
	}
	quotas := map[Pair]Quota{}
	var scanErr error
	// a legacy deployment may have no channel_quota rows (nor table): a failed query is no error
	_ = sqltx.EachRow(ctx, db, `SELECT template_id, channel, quota, claimed FROM channel_quota`, nil, func(rows *sql.Rows) error {
		var p Pair
		var q Quota
		if scanErr = rows.Scan(&p.Template, &p.Channel, &q.Quota, &q.Claimed); scanErr != nil {
			return scanErr
		}
		quotas[p] = q
		return nil
	})
	if scanErr != nil {
		return st, scanErr
	}
	for p, c := range counts {
		ps := PairStatus{Pair: p, Counts: *c}
		if q, ok := quotas[p]; ok {
			ps.Quota, ps.Claimed, ps.HasQuota = q.Quota, q.Claimed, true
		}
		st.Pairs = append(st.Pairs, ps)
	}
	sort.Slice(st.Pairs, func(i, j int) bool { return st.Pairs[i].Pair.Less(st.Pairs[j].Pair) })
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
