package chaos

import (
	"context"
	"database/sql"
	"fmt"
	"sort"

	"github.com/couponlink/couponlink/internal/sqltx"
)

// checkAcked proves every 2xx answer of the run in the ledger: claims by
// request id (the same coupon), redemptions by order and coupon (the same
// redemption), refunds by order, coupon and mode, voids by coupon.
func (k *acks) checkAcked(ctx context.Context, db *sql.DB) ([]string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	claims := map[string]int64{}
	if err := sqltx.EachRow(ctx, db, `SELECT request_id, id FROM user_coupon WHERE request_id IS NOT NULL`, nil, func(r *sql.Rows) error {
		var req string
		var id int64
		err := r.Scan(&req, &id)
		claims[req] = id
		return err
	}); err != nil {
		return nil, fmt.Errorf("read user_coupon: %w", err)
	}
	reds := map[string]int64{}
	if err := sqltx.EachRow(ctx, db, `SELECT order_id, user_coupon_id, id FROM redemption_log`, nil, func(r *sql.Rows) error {
		var order string
		var coupon, id int64
		err := r.Scan(&order, &coupon, &id)
		reds[redKey(order, coupon)] = id
		return err
	}); err != nil {
		return nil, fmt.Errorf("read redemption_log: %w", err)
	}
	refunds, voids := map[string]string{}, map[int64]bool{}
	if err := sqltx.EachRow(ctx, db, `SELECT kind, user_coupon_id, COALESCE(order_id, ''), COALESCE(mode, '') FROM inventory_flow
		WHERE kind IN ('refund', 'void')`, nil, func(r *sql.Rows) error {
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
		return nil, fmt.Errorf("read inventory_flow: %w", err)
	}
	bad := unproved("claim", "coupon", k.claims, "user_coupon", claims)
	bad = append(bad, unproved("redemption", "id", k.redemptions, "redemption_log", reds)...)
	bad = append(bad, unproved("refund", "mode", k.refunds, "inventory_flow", refunds)...)
	for coupon, req := range k.voids {
		if !voids[coupon] {
			bad = append(bad, fmt.Sprintf("void %s answered coupon %d voided; no void row in inventory_flow", req, coupon))
		}
	}
	sort.Strings(bad)
	return bad, nil
}

// unproved lists the answers of op (key -> the answered value, what) that
// the ledger, read from table, does not show: no row, or another value.
func unproved[V comparable](op, what string, answered map[string]V, table string, ledger map[string]V) []string {
	var bad []string
	for key, v := range answered {
		if got, ok := ledger[key]; !ok || got != v {
			bad = append(bad, fmt.Sprintf("%s %s answered %s %v; %s has %s", op, key, what, v, table, show(got, ok)))
		}
	}
	return bad
}

// checkIdempotency lists the replays that answered differently and any
// (order, coupon) with more than one redemption row.
func (k *acks) checkIdempotency(ctx context.Context, db *sql.DB) ([]string, error) {
	k.mu.Lock()
	bad := append([]string(nil), k.replays...)
	k.mu.Unlock()
	dups, err := violations(ctx, db, "redemption_log", `SELECT order_id, user_coupon_id, COUNT(*) FROM redemption_log GROUP BY 1, 2 HAVING COUNT(*) > 1 LIMIT 50`,
		func(r *sql.Rows) (string, error) {
			var order string
			var coupon, n int64
			err := r.Scan(&order, &coupon, &n)
			return fmt.Sprintf("redemption %s: %d rows", redKey(order, coupon), n), err
		})
	return append(bad, dups...), err
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
	err := sqltx.EachRow(ctx, cl.db, `SELECT event_id, event, status FROM webhook_outbox`, nil, func(r *sql.Rows) error {
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

// eventStats counts the outbox's events and the receiver's deliveries.
func (cl *cluster) eventStats(ctx context.Context) (events int64, deliveries int) {
	_ = cl.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM webhook_outbox`).Scan(&events)
	_, deliveries, _, _ = cl.hooks.received()
	return events, deliveries
}
