package sink

import (
	"context"
	"database/sql"
	"fmt"
)

// Derived is the cdc's view of one template: its counters and the binlog
// position they reflect. GET /v1/templates/{id}/inventory shows it beside
// the live count, so a reader sees both and how far apart they are.
type Derived struct {
	Position    string                   `json:"position"`
	EventTime   *string                  `json:"event_time,omitempty"`
	Checkpoint  string                   `json:"checkpoint"`
	Held        int64                    `json:"held"`
	Used        int64                    `json:"used"`
	Expired     int64                    `json:"expired"`
	Returned    int64                    `json:"returned"`
	Released    int64                    `json:"released"`
	Frozen      int64                    `json:"frozen"`
	Channels    map[string]DerivedCounts `json:"channels"`
	Initialized bool                     `json:"initialized"` // false: the cdc has not run against this database
}

// DerivedCounts are one channel's counters.
type DerivedCounts struct {
	Held     int64 `json:"held"`
	Used     int64 `json:"used"`
	Expired  int64 `json:"expired"`
	Returned int64 `json:"returned"`
	Released int64 `json:"released"`
	Frozen   int64 `json:"frozen"`
}

// ReadDerived reads a template's counters and the checkpoint in one snapshot.
func ReadDerived(ctx context.Context, db *sql.DB, checkpoint string, templateID int64) (Derived, error) {
	d := Derived{Checkpoint: checkpoint, Channels: map[string]DerivedCounts{}}
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return d, fmt.Errorf("begin snapshot: %w", err)
	}
	defer tx.Rollback()
	var file string
	var pos uint64
	var gtid string
	var at sql.NullTime
	err = tx.QueryRowContext(ctx, `SELECT binlog_file, binlog_pos, gtid_set, event_time FROM cdc_checkpoint WHERE name = ?`, checkpoint).
		Scan(&file, &pos, &gtid, &at)
	if err == sql.ErrNoRows || (err == nil && file == "") {
		return d, nil
	}
	if err != nil {
		return d, fmt.Errorf("read checkpoint: %w", err)
	}
	d.Initialized = true
	d.Position = fmt.Sprintf("%s:%d gtid=%s", file, pos, gtid)
	if at.Valid {
		s := at.Time.UTC().Format("2006-01-02T15:04:05Z07:00")
		d.EventTime = &s
	}
	rows, err := tx.QueryContext(ctx, `SELECT channel, held, used, expired, returned, released FROM inventory_counter WHERE template_id = ?`, templateID)
	if err != nil {
		return d, fmt.Errorf("read counters of template %d: %w", templateID, err)
	}
	defer rows.Close()
	for rows.Next() {
		var ch string
		var c Counts
		if err := rows.Scan(&ch, &c.Held, &c.Used, &c.Expired, &c.Returned, &c.Released); err != nil {
			return d, err
		}
		d.Channels[ch] = DerivedCounts{Held: c.Held, Used: c.Used, Expired: c.Expired, Returned: c.Returned, Released: c.Released, Frozen: c.Frozen()}
		d.Held += c.Held
		d.Used += c.Used
		d.Expired += c.Expired
		d.Returned += c.Returned
		d.Released += c.Released
		d.Frozen += c.Frozen()
	}
	return d, rows.Err()
}
