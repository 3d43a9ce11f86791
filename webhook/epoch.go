package webhook

import (
	"context"
	"fmt"
)

// Leases that follow leadership. In a cdc, only the leader (the process
// holding the checkpoint's leader lock, under the checkpoint's epoch)
// delivers events: a standby's dispatcher and relays send nothing. Every
// lease a leader takes carries its checkpoint and epoch (lease_checkpoint,
// lease_epoch of event_sink_position for a stream sink, of webhook_outbox
// for a webhook round), so that a new leader of the checkpoint does not
// wait for a dead one's leases to run out:
//   - a relay under a higher epoch takes a sink's lease at once, and the
//     old holder's position writes (guarded by its epoch) are refused;
//   - a dispatcher under a higher epoch makes the rows an older epoch's
//     round claimed due at once (takeOver) before it claims, and the old
//     round's renewals and records (guarded by its epoch) are refused.
// The old holder's sends that were not recorded are sent again by the new
// leader: delivery stays at-least-once, consumers dedupe on the event id.
// The epochs of different checkpoints (the cdcs of several sources sharing
// one outbox) are not compared: between them the leases run out as plain
// ones do.

// leading returns the epoch a round works under and whether it may
// deliver: with no epoch source (plain leases) epoch 0 and true; else the
// epoch, and false while it is 0 (a standby).
func leading(epoch func() int64) (int64, bool) {
	if epoch == nil {
		return 0, true
	}
	e := epoch()
	return e, e > 0
}

// maxTakeOver bounds the rows one takeOver moves (a round claims at most
// BatchSize of them; a dispatcher runs one round at a time).
const maxTakeOver = 1000

// takeOver makes the pending rows claimed under an epoch below epoch due
// now and unclaimed: a former leader's round, dead or deposed, holds them.
// The ids are found by a plain read and moved by primary key, so that no
// gap of the outbox is locked against the batches' inserts. Without an
// epoch (plain leases) it does nothing.
func (d *Dispatcher) takeOver(ctx context.Context, epoch int64) error {
	if epoch == 0 {
		return nil
	}
	rows, err := d.db.QueryContext(ctx, `SELECT id FROM webhook_outbox
		WHERE lease_epoch > 0 AND lease_epoch < ? AND lease_checkpoint = ? AND status = ? LIMIT ?`,
		epoch, d.cfg.Checkpoint, statusPending, maxTakeOver)
	if err != nil {
		return fmt.Errorf("find webhook events a former leader holds: %w", err)
	}
	var ids []any
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return fmt.Errorf("find webhook events a former leader holds: %w", err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(ids) == 0 {
		return err
	}
	n, err := d.update(ctx, `UPDATE webhook_outbox SET next_attempt_at = ?, lease_epoch = 0
		WHERE status = ? AND lease_epoch > 0 AND lease_epoch < ? AND lease_checkpoint = ? AND id IN (`+placeholders(len(ids))+`)`,
		append([]any{d.now(), statusPending, epoch, d.cfg.Checkpoint}, ids...)...)
	if err != nil {
		return fmt.Errorf("take over webhook events a former leader holds: %w", err)
	}
	d.log.Info("webhook events a former leader held taken over", "events", n, "epoch", epoch)
	return nil
}
