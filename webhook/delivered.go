package webhook

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/couponlink/couponlink/internal/sqltx"
)

// markDelivered marks the rows a round delivered, in one transaction (a
// round's results are written at once, not one commit per event), and
// counts them. It returns how many it marked. A row no longer pending
// (dropped by overflow meanwhile) is left alone and not counted; so is a
// row a leader of a higher epoch took over (epoch.go): that one sends it
// again.
func (d *Dispatcher) markDelivered(ctx context.Context, rows []outboxRow, l *lease) (int, error) {
	if len(rows) == 0 {
		return 0, nil
	}
	byID := make(map[int64]outboxRow, len(rows))
	ids := make([]any, 0, len(rows))
	for _, r := range rows {
		byID[r.id] = r
		ids = append(ids, r.id)
	}
	var marked []any
	// a deadlock with another dispatcher's claim runs it again: a round's
	// deliveries left unrecorded would be sent again when its lease ends
	err := sqltx.RetryDeadlocks(ctx, d.db, nil, d.lostRace("record deliveries"), func(tx *sql.Tx) error {
		marked = marked[:0]
		q, err := tx.QueryContext(ctx, `SELECT id FROM webhook_outbox WHERE status = ? AND lease_epoch = ? AND id IN (`+
			placeholders(len(ids))+`) FOR UPDATE`, append([]any{statusPending, l.epoch}, ids...)...)
		if err != nil {
			return err
		}
		for q.Next() {
			var id int64
			if err := q.Scan(&id); err != nil {
				q.Close()
				return err
			}
			marked = append(marked, id)
		}
		q.Close()
		if err := q.Err(); err != nil || len(marked) == 0 {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE webhook_outbox SET status = ?, finished_at = ?, lease_epoch = 0 WHERE id IN (`+
			placeholders(len(marked))+`)`, append([]any{statusDelivered, d.now()}, marked...)...)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("record %d webhook deliveries: %w", len(rows), err)
	}
	for _, id := range marked {
		r := byID[id.(int64)]
		d.m.deliveries.WithLabelValues(r.event, resultDelivered).Inc()
		d.cfg.SinkMetrics.count(d.sink.Name(), resultDelivered, 1)
		if r.attempts > 0 {
			d.log.Info("webhook delivered after failed rounds", "event_id", r.eventID, "event", r.event,
				"failed_rounds", r.attempts)
		}
	}
	if len(marked) > 0 {
		d.warn.ok()
	}
	return len(marked), nil
}
