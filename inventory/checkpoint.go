package inventory

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/couponlink/couponlink/canal"
)

// Checkpoint is the binlog position the counters reflect, with the
// bookkeeping `couponlink status` shows. Package sink writes it.
type Checkpoint struct {
	Name           string
	Pos            canal.Position
	EventTime      sql.NullTime
	Epoch          int64
	Leader         string
	EventsApplied  int64
	Batches        int64
	Anomalies      int64
	BootstrappedAt sql.NullTime
	UpdatedAt      time.Time
}

// LoadCheckpoint reads the named checkpoint; found is false when there is none.
func LoadCheckpoint(ctx context.Context, db *sql.DB, name string) (cp Checkpoint, found bool, err error) {
	cp.Name = name
	err = db.QueryRowContext(ctx, `SELECT binlog_file, binlog_pos, gtid_set, event_time, epoch, leader,
		events_applied, batches, anomalies, bootstrapped_at, updated_at FROM cdc_checkpoint WHERE name = ?`, name).
		Scan(&cp.Pos.File, &cp.Pos.Pos, &cp.Pos.GTID, &cp.EventTime, &cp.Epoch, &cp.Leader,
			&cp.EventsApplied, &cp.Batches, &cp.Anomalies, &cp.BootstrappedAt, &cp.UpdatedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return cp, false, nil
	}
	if err != nil {
		return cp, false, fmt.Errorf("read checkpoint %q: %w", name, err)
	}
	return cp, true, nil
}
