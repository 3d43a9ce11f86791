package sink

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/internal/sqltx"
)

// ErrFenced means another cdc took over the checkpoint (a newer epoch):
// this one must stop applying at once.
var ErrFenced = errors.New("another cdc took over the checkpoint (leader epoch changed); this one gives up the lead and waits as a standby")

// takeEpoch makes this process the checkpoint's writer: it bumps the epoch,
// so that a deposed leader's next batch fails with ErrFenced.
func takeEpoch(ctx context.Context, db *sql.DB, name, leader string) (int64, error) {
	var epoch int64
	err := sqltx.Run(ctx, db, nil, func(tx *sql.Tx) error {
		if err := tx.QueryRowContext(ctx, `SELECT epoch FROM cdc_checkpoint WHERE name = ? FOR UPDATE`, name).Scan(&epoch); err != nil {
			return err
		}
		epoch++
		_, err := tx.ExecContext(ctx, `UPDATE cdc_checkpoint SET epoch = ?, leader = ? WHERE name = ?`, epoch, leader, name)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("take checkpoint %q: %w", name, err)
	}
	return epoch, nil
}

// keepEpoch checks that the checkpoint's epoch is still epoch, this
// process's, and fails with ErrFenced when another cdc took it.
func keepEpoch(ctx context.Context, db *sql.DB, name string, epoch int64) error {
	var now int64
	if err := db.QueryRowContext(ctx, `SELECT epoch FROM cdc_checkpoint WHERE name = ?`, name).Scan(&now); err != nil {
		return fmt.Errorf("read the epoch of checkpoint %q: %w", name, err)
	}
	if now != epoch {
		return ErrFenced
	}
	return nil
}

// checkpointStatement writes the batch's end as the checkpoint, in the
// counters' transaction; it changes no row when another leader took the
// checkpoint (fenced).
func checkpointStatement(name string, epoch int64, b *canal.Batch, anomalies int) statement {
	var at sql.NullTime
	if !b.EventTime.IsZero() {
		at = sql.NullTime{Time: b.EventTime.UTC(), Valid: true}
	}
	return statement{what: "save checkpoint " + b.End.String(), query: `UPDATE cdc_checkpoint SET binlog_file = ?, binlog_pos = ?, gtid_set = ?,
		event_time = COALESCE(?, event_time), events_applied = events_applied + ?, batches = batches + 1, anomalies = anomalies + ?
		WHERE name = ? AND epoch = ?`,
		args: []any{b.End.File, b.End.Pos, b.End.GTID, at, b.Rows, anomalies, name, epoch}}
}

// fenced fails with ErrFenced when the checkpoint's update res changed no
// row: another leader took the checkpoint (a newer epoch).
func fenced(res sql.Result) error {
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("save checkpoint: %w", err)
	}
	if n == 0 {
		return ErrFenced
	}
	return nil
}

// fence locks the checkpoint row and fails with ErrFenced when another cdc
// took it over: work outside a batch (releases, transfers) is fenced too.
func (s *Sink) fence(ctx context.Context, tx *sql.Tx) error {
	var epoch int64
	if err := tx.QueryRowContext(ctx, `SELECT epoch FROM cdc_checkpoint WHERE name = ? FOR UPDATE`, s.cfg.Name).Scan(&epoch); err != nil {
		return fmt.Errorf("read epoch: %w", err)
	}
	if epoch != s.epoch {
		return ErrFenced
	}
	return nil
}
