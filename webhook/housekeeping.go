package webhook

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/couponlink/couponlink/internal/sqltx"
)

const (
	dropBatch   = 1000 // overflow rows dropped per statement
	deleteBatch = 1000 // finished rows deleted per statement
	maxDeletes  = 100  // delete statements per housekeeping pass
)

// housekeep keeps the outbox bounded (drops the oldest pending rows beyond
// MaxPending), refreshes the pending gauges, and deletes finished rows
// older than Retention.
func (d *Dispatcher) housekeep(ctx context.Context) error {
	return errors.Join(d.dropOverflow(ctx), d.refreshGauges(ctx), d.prune(ctx))
}

// dropOverflow marks the oldest pending rows beyond MaxPending dropped,
// counts them by event and logs how many. The excess is "every pending row
// older than the newest MaxPending", so two dispatchers doing this at once
// drop the same rows, not twice as many.
func (d *Dispatcher) dropOverflow(ctx context.Context) error {
	var pending int
	if err := d.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM webhook_outbox WHERE status = ?`,
		statusPending).Scan(&pending); err != nil {
		return fmt.Errorf("count pending webhook events: %w", err)
	}
	if pending <= d.cfg.MaxPending {
		return nil
	}
	var newestExcess int64
	err := d.db.QueryRowContext(ctx, `SELECT id FROM webhook_outbox WHERE status = ? ORDER BY id DESC LIMIT 1 OFFSET ?`,
		statusPending, d.cfg.MaxPending).Scan(&newestExcess)
	if errors.Is(err, sql.ErrNoRows) {
		return nil // delivered meanwhile
	}
	if err != nil {
		return fmt.Errorf("find overflowing webhook events: %w", err)
	}
	byEvent := map[string]int{}
	dropped := 0
	for {
		n, err := d.dropOldest(ctx, newestExcess, byEvent)
		dropped += n
		if err != nil || n < dropBatch {
			d.countDropped(dropped, pending, byEvent)
			return err
		}
	}
}

// countDropped counts and logs the rows an overflow dropped.
func (d *Dispatcher) countDropped(dropped, pending int, byEvent map[string]int) {
	if dropped == 0 {
		return
	}
	for e, n := range byEvent {
		d.m.deliveries.WithLabelValues(e, resultDropped).Add(float64(n))
	}
	d.cfg.SinkMetrics.count(d.sink.Name(), resultDropped, dropped)
	d.log.Warn("webhook outbox full: dropped the oldest pending events", "dropped", dropped,
		"pending", pending, "max_pending", d.cfg.MaxPending, "by_event", byEvent)
}

// lockingTx is the isolation of the dispatcher's transactions that lock
// outbox rows by a range (the claim, dropOldest): READ COMMITTED locks the
// rows found and not the gaps between them, so the cdc's batch, which
// inserts its events there, never waits for a claim (under REPEATABLE READ
// it did, for the claim's whole transaction, holding its own locks, the
// counters among them, meanwhile).
var lockingTx = &sql.TxOptions{Isolation: sql.LevelReadCommitted}

// dropOldest marks up to dropBatch pending rows with id <= upTo dropped, in
// one transaction, adding them to byEvent. It returns how many it dropped.
func (d *Dispatcher) dropOldest(ctx context.Context, upTo int64, byEvent map[string]int) (int, error) {
	var ids []any
	events := map[string]int{}
	err := sqltx.Run(ctx, d.db, lockingTx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT id, event FROM webhook_outbox WHERE status = ? AND id <= ?
			ORDER BY id LIMIT ? FOR UPDATE`, statusPending, upTo, dropBatch)
		if err != nil {
			return err
		}
		for rows.Next() {
			var id int64
			var event string
			if err := rows.Scan(&id, &event); err != nil {
				rows.Close()
				return fmt.Errorf("read row: %w", err)
			}
			ids = append(ids, id)
			events[event]++
		}
		rows.Close()
		if err := rows.Err(); err != nil || len(ids) == 0 {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE webhook_outbox SET status = ?, finished_at = ?, last_error = ?
			WHERE id IN (`+placeholders(len(ids))+`)`, append([]any{statusDropped, d.now(),
			fmt.Sprintf("outbox overflow: more than %d pending events", d.cfg.MaxPending)}, ids...)...)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("drop overflowing webhook events: %w", err)
	}
	for e, n := range events {
		byEvent[e] += n
	}
	return len(ids), nil
}

// refreshGauges sets the pending count and the age of the oldest pending
// row.
func (d *Dispatcher) refreshGauges(ctx context.Context) error {
	var pending int64
	var ageMicros int64
	if err := d.db.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(TIMESTAMPDIFF(MICROSECOND, MIN(created_at), ?), 0)
		FROM webhook_outbox WHERE status = ?`, d.now(), statusPending).Scan(&pending, &ageMicros); err != nil {
		return fmt.Errorf("measure the webhook outbox: %w", err)
	}
	d.m.pending.Set(float64(pending))
	age := max(time.Duration(ageMicros)*time.Microsecond, 0).Seconds()
	d.m.oldestPending.Set(age)
	d.cfg.SinkMetrics.setPending(d.sink.Name(), pending, age)
	return nil
}

// prune deletes delivered and dropped rows finished more than Retention
// ago, deleteBatch rows per statement, at most maxDeletes statements.
func (d *Dispatcher) prune(ctx context.Context) error {
	before := d.now().Add(-d.cfg.Retention)
	for range maxDeletes {
		res, err := d.db.ExecContext(ctx, `DELETE FROM webhook_outbox WHERE status IN (?, ?) AND finished_at < ?
			LIMIT ?`, statusDelivered, statusDropped, before, deleteBatch)
		if err != nil {
			return fmt.Errorf("delete finished webhook events: %w", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("delete finished webhook events: %w", err)
		}
		if n < deleteBatch {
			return nil
		}
	}
	return nil
}
