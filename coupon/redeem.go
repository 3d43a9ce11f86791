package coupon

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/couponlink/couponlink/internal/sqltx"
)

// RedeemRequest uses a coupon on an order.
type RedeemRequest struct {
	UserCouponID int64
	OrderID      string
}

// Redemption is one redemption_log row.
type Redemption struct {
	RedemptionID int64     `json:"redemption_id"`
	UserCouponID int64     `json:"user_coupon_id"`
	OrderID      string    `json:"order_id"`
	RedeemedAt   time.Time `json:"redeemed_at"`
	// Status is the coupon's status now (USED, or AVAILABLE/RETURNED after a refund).
	Status   string `json:"status"`
	Replayed bool   `json:"replayed"`
}

// Validate checks the request's fields.
func (r *RedeemRequest) Validate() error {
	r.OrderID = strings.TrimSpace(r.OrderID)
	switch {
	case r.UserCouponID <= 0:
		return Invalid("user_coupon_id", "user_coupon_id is required and must be a positive id")
	case r.OrderID == "":
		return Invalid("order_id", "order_id is required")
	case len(r.OrderID) > MaxIDLen:
		return Invalid("order_id", "order_id is longer than %d bytes", MaxIDLen)
	}
	return CheckText(false, "order_id", r.OrderID)
}

// RedemptionKey is redemption_log.idempotency_key: one redemption per
// (order, coupon), enforced by a UNIQUE key.
func RedemptionKey(orderID string, userCouponID int64) string {
	return orderID + "/" + strconv.FormatInt(userCouponID, 10)
}

// Redeem moves an AVAILABLE coupon to USED and writes its redemption_log
// row, in one transaction. The same (order, coupon) again is answered with
// the first redemption and writes nothing.
func (s *Store) Redeem(ctx context.Context, req RedeemRequest) (Redemption, error) {
	if err := req.Validate(); err != nil {
		return Redemption{}, err
	}
	key := RedemptionKey(req.OrderID, req.UserCouponID)
	var out Redemption
	lookup := false // an AVAILABLE coupon skips the key look-up until the key turns out taken
	err := s.retry(ctx, "redemption", func() error {
		// The coupon first, then the key: a redemption by this order that
		// commits between the two reads is found by the second, and is not
		// taken for another order's (already_used).
		c, err := loadCoupon(ctx, s.db, req.UserCouponID)
		if err != nil {
			return err
		}
		if c.Status != Available || lookup || !s.clock().Before(c.ExpiresAt) {
			if r, found, err := s.redemptionByKey(ctx, key); found || err != nil {
				out = r
				return err
			}
		}
		now := s.clock()
		switch {
		case c.Status == Used:
			return conflictf(CodeAlreadyUsed, "coupon %d was already redeemed by another order", c.ID)
		case c.Status != Available:
			return IllegalTransition(c.Status, Used, ActionRedeem)
		case !now.Before(c.ExpiresAt):
			return conflictf(CodeCouponExpired, "coupon %d expired at %s; it can no longer be redeemed",
				c.ID, c.ExpiresAt.Format(time.RFC3339))
		}
		out = Redemption{UserCouponID: c.ID, OrderID: req.OrderID, RedeemedAt: now, Status: Used.String()}
		return sqltx.Run(ctx, s.db, nil, func(tx *sql.Tx) error {
			res, err := tx.ExecContext(ctx, `INSERT INTO redemption_log
				(user_coupon_id, template_id, channel, order_id, redeemed_at, idempotency_key) VALUES (?, ?, ?, ?, ?, ?)`,
				c.ID, c.TemplateID, c.Channel, req.OrderID, now, key)
			if isDuplicate(err) {
				lookup = true
				return errRaceLost // the same redemption exists: replay it
			}
			if err != nil {
				return fmt.Errorf("insert redemption: %w", err)
			}
			if out.RedemptionID, err = res.LastInsertId(); err != nil {
				return err
			}
			return updateStatus(ctx, tx, c, Used, "order_id = ?, redeemed_at = ?", req.OrderID, now)
		})
	})
	return out, err
}

// updateStatus moves a coupon from the state it was read in, guarded by its
// version; a concurrent change makes it errRaceLost.
func updateStatus(ctx context.Context, tx *sql.Tx, c couponRow, to Status, set string, args ...any) error {
	q := `UPDATE user_coupon SET status = ?, version = version + 1`
	if set != "" {
		q += ", " + set
	}
	q += ` WHERE id = ? AND version = ? AND status = ?`
	all := append(append([]any{to}, args...), c.ID, c.Version, c.Status)
	res, err := tx.ExecContext(ctx, q, all...)
	if err != nil {
		return fmt.Errorf("update coupon %d to %s: %w", c.ID, to, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return errRaceLost
	}
	return nil
}

func (s *Store) redemptionByKey(ctx context.Context, key string) (Redemption, bool, error) {
	var r Redemption
	var status Status
	err := s.db.QueryRowContext(ctx, `SELECT r.id, r.user_coupon_id, r.order_id, r.redeemed_at, c.status
		FROM redemption_log r JOIN user_coupon c ON c.id = r.user_coupon_id WHERE r.idempotency_key = ?`, key).
		Scan(&r.RedemptionID, &r.UserCouponID, &r.OrderID, &r.RedeemedAt, &status)
	if errors.Is(err, sql.ErrNoRows) {
		return r, false, nil
	}
	if err != nil {
		return r, false, fmt.Errorf("look up redemption %s: %w", key, err)
	}
	r.Status, r.Replayed = status.String(), true
	return r, true, nil
}
