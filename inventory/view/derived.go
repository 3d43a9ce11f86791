package view

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/couponlink/couponlink/api"
	"github.com/couponlink/couponlink/internal/sqltx"
)

// Derived is the cdc's view of one template: its counters and the binlog
// position they reflect. GET /v1/templates/{id}/inventory shows it beside
// the live count, so a reader sees both and how far apart they are.
type Derived struct {
	Checkpoint  string
	Initialized bool   // false: the cdc has not run against this database
	Position    string // file:pos gtid=...
	EventTime   time.Time
	Counts      // the template's counters, summed over its channels
	Channels    map[string]Counts
}

// MarshalJSON shows the counters without quota (the cdc's counters do not
// hold it), as an api.Derived.
func (d Derived) MarshalJSON() ([]byte, error) { return json.Marshal(d.wire()) }

func (d Derived) wire() api.Derived {
	v := api.Derived{Position: d.Position, Checkpoint: d.Checkpoint, States: StatesOf(d.Counts),
		Channels: make(map[string]States, len(d.Channels)), Initialized: d.Initialized}
	if !d.EventTime.IsZero() {
		v.EventTime = d.EventTime.UTC().Format(time.RFC3339)
	}
	for ch, c := range d.Channels {
		v.Channels[ch] = StatesOf(c)
	}
	return v
}

// ReadDerived reads a template's counters and the checkpoint in one snapshot.
func ReadDerived(ctx context.Context, db *sql.DB, checkpoint string, templateID int64) (Derived, error) {
	d := Derived{Checkpoint: checkpoint, Channels: map[string]Counts{}}
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
		d.EventTime = at.Time
	}
	err = sqltx.EachRow(ctx, tx, `SELECT channel, held, used, expired, returned, released FROM inventory_counter WHERE template_id = ?`,
		[]any{templateID}, func(rows *sql.Rows) error {
			var ch string
			var c Counts
			if err := rows.Scan(&ch, &c.Held, &c.Used, &c.Expired, &c.Returned, &c.Released); err != nil {
				return err
			}
			d.Channels[ch] = c
			d.Counts.Add(c)
			return nil
		})
	if err != nil {
		return d, fmt.Errorf("read counters of template %d: %w", templateID, err)
	}
	return d, nil
}
