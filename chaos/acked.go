package chaos

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
)

// checkAcked proves every 2xx answer of the run in the ledger: claims by
// request id (the same coupon), redemptions by order and coupon (the same
// redemption), refunds by order, coupon and mode, voids by coupon.
func (k *acks) checkAcked(ctx context.Context, db *sql.DB) ([]string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	var bad []string
	claims := map[string]int64{}
	if err := scanAll(ctx, db, `SELECT request_id, id FROM user_coupon WHERE request_id IS NOT NULL`, func(r *sql.Rows) error {
		var req string
		var id int64
		err := r.Scan(&req, &id)
		claims[req] = id
		return err
	}); err != nil {
		return nil, err
	}
	for req, id := range k.claims {
		if got, ok := claims[req]; !ok || got != id {
			bad = append(bad, fmt.Sprintf("claim %s answered coupon %d; user_coupon has %s", req, id, show(got, ok)))
		}
	}
	reds := map[string]int64{}
	if err := scanAll(ctx, db, `SELECT order_id, user_coupon_id, id FROM redemption_log`, func(r *sql.Rows) error {
		var order string
		var coupon, id int64
		err := r.Scan(&order, &coupon, &id)
		reds[redKey(order, coupon)] = id
		return err
	}); err != nil {
		return nil, err
	}
	for key, id := range k.redemptions {
		if got, ok := reds[key]; !ok || got != id {
			bad = append(bad, fmt.Sprintf("redemption %s answered id %d; redemption_log has %s", key, id, show(got, ok)))
		}
	}
	refunds, voids := map[string]string{}, map[int64]bool{}
	if err := scanAll(ctx, db, `SELECT kind, user_coupon_id, COALESCE(order_id, ''), COALESCE(mode, '') FROM inventory_flow
		WHERE kind IN ('refund', 'void')`, func(r *sql.Rows) error {
		var kind, order, mode string
		var coupon int64
		err := r.Scan(&kind, &coupon, &order, &mode)
		if kind == "void" {
			voids[coupon] = true
		} else {
			refunds[redKey(order, coupon)] = mode
		}
		return err
	}); err != nil {
		return nil, err
	}
	for key, mode := range k.refunds {
		if got, ok := refunds[key]; !ok || got != mode {
			bad = append(bad, fmt.Sprintf("refund %s answered mode %s; inventory_flow has %s", key, mode, show(got, ok)))
		}
	}
	for coupon, req := range k.voids {
		if !voids[coupon] {
			bad = append(bad, fmt.Sprintf("void %s answered coupon %d voided; no void row in inventory_flow", req, coupon))
		}
	}
	sort.Strings(bad)
	return bad, nil
}

// checkIdempotency lists the replays that answered differently and any
// (order, coupon) with more than one redemption row.
func (k *acks) checkIdempotency(ctx context.Context, db *sql.DB) ([]string, error) {
	k.mu.Lock()
	bad := append([]string(nil), k.replays...)
	k.mu.Unlock()
	err := scanAll(ctx, db, `SELECT order_id, user_coupon_id, COUNT(*) FROM redemption_log GROUP BY 1, 2 HAVING COUNT(*) > 1 LIMIT 50`,
		func(r *sql.Rows) error {
			var order string
			var coupon, n int64
			err := r.Scan(&order, &coupon, &n)
			bad = append(bad, fmt.Sprintf("redemption %s: %d rows", redKey(order, coupon), n))
			return err
		})
	return bad, err
}

// checkWebhooks proves every outbox event delivered and received (by its
// id, at least once), every received id an outbox event's, the bodies'
// ids equal to the headers', the signatures valid.
func (cl *cluster) checkWebhooks(ctx context.Context) ([]string, error) {
	got, _, badSig, badID := cl.hooks.received()
	var bad []string
	for _, id := range badSig {
		bad = append(bad, "bad signature on event "+id)
	}
	for _, s := range badID {
		bad = append(bad, "event id of the body differs from the header: "+s)
	}
	outbox := map[string]bool{}
	err := scanAll(ctx, cl.db, `SELECT event_id, event, status FROM webhook_outbox`, func(r *sql.Rows) error {
		var id, event, status string
		if err := r.Scan(&id, &event, &status); err != nil {
			return err
		}
		outbox[id] = true
		if status != "delivered" || got[id] == 0 {
			bad = append(bad, fmt.Sprintf("event %s (%s): outbox status %s, received %d times", id, event, status, got[id]))
		}
		return nil
	})
	for id := range got {
		if !outbox[id] {
			bad = append(bad, fmt.Sprintf("event %s received but not in the outbox", id))
		}
	}
	sort.Strings(bad)
	return bad, err
}

func scanAll(ctx context.Context, db *sql.DB, q string, fn func(*sql.Rows) error) error {
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return fmt.Errorf("%.60s: %w", q, err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// eventStats counts the outbox's events and the receiver's deliveries.
func (cl *cluster) eventStats(ctx context.Context) (events int64, deliveries int) {
	_ = cl.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM webhook_outbox`).Scan(&events)
	_, deliveries, _, _ = cl.hooks.received()
	return events, deliveries
}
