package coupon

import (
	"context"
	"database/sql"
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
// row, in one transaction. The same (order, coupon) again writes nothing:
// it is answered with the first redemption while that is in effect, and
// refused with already_refunded once it was refunded.
func (s *Store) Redeem(ctx context.Context, req RedeemRequest) (Redemption, error) {
	if err := req.Validate(); err != nil {
		return Redemption{}, err
	}
	if s.redemptions != nil {
		return s.redeemCombined(ctx, req)
	}
	return s.redeemOne(ctx, req)
}

// redeemOne is the single path: one redemption, one transaction.
func (s *Store) redeemOne(ctx context.Context, req RedeemRequest) (Redemption, error) {
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
		if lookup || !redeemable(c, s.clock()) {
			k, found, err := s.redemptionByKey(ctx, key)
			if err != nil {
				return err
			}
			if found {
				out, err = k.replay()
				return err
			}
		}
		now := s.clock()
		if err := redeemRefusal(c, now); err != nil {
			return err
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

// redeemable is an AVAILABLE coupon before its expiry. Any other coupon is
// answered by its key's redemption if there is one (a replay), else
// refused by redeemRefusal.
func redeemable(c couponRow, now time.Time) bool {
	return c.Status == Available && now.Before(c.ExpiresAt)
}

// redeemRefusal is why coupon c cannot be redeemed at now (nil: it can).
func redeemRefusal(c couponRow, now time.Time) error {
	switch {
	case c.Status == Used:
		return conflictf(CodeAlreadyUsed, "coupon %d was already redeemed by another order", c.ID)
	case c.Status != Available:
		return IllegalTransition(c.Status, Used, ActionRedeem)
	case !now.Before(c.ExpiresAt):
		return conflictf(CodeCouponExpired, "coupon %d expired at %s; it can no longer be redeemed",
			c.ID, c.ExpiresAt.Format(time.RFC3339))
	}
	return nil
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

// keyedRedemption is the redemption of an (order, coupon) key with what
// became of it: the coupon as it is now, and the redemption's refund.
type keyedRedemption struct {
	Redemption
	coupon      Status
	couponOrder string
	refund      *Refund // nil: not refunded
}

// redemptionByKey reads, in one statement, the redemption of key, its
// coupon's state and its refund, if any: a refund commits the flow and the
// coupon's new state together, so the two are never seen half-way.
func (s *Store) redemptionByKey(ctx context.Context, key string) (keyedRedemption, bool, error) {
	ks, err := redemptionsByKey(ctx, s.db, []any{key})
	k, found := ks[key]
	return k, found, err
}

// redemptionsByKey is redemptionByKey for several keys at once.
func redemptionsByKey(ctx context.Context, q sqltx.Querier, keys []any) (map[string]keyedRedemption, error) {
	out := make(map[string]keyedRedemption, len(keys))
	err := sqltx.EachRow(ctx, q, `SELECT r.idempotency_key, r.id, r.user_coupon_id, r.order_id, r.redeemed_at, c.status, c.order_id,
			f.id, f.mode, f.to_status, f.created_at
		FROM redemption_log r JOIN user_coupon c ON c.id = r.user_coupon_id
		LEFT JOIN inventory_flow f ON f.user_coupon_id = r.user_coupon_id AND f.kind = ? AND f.seq = r.id
		WHERE r.idempotency_key IN (`+sqltx.Placeholders(len(keys))+`)`, append([]any{FlowRefund}, keys...), func(r *sql.Rows) error {
		var k keyedRedemption
		var key string
		var order, mode sql.NullString
		var flowID sql.NullInt64
		var to sql.Null[Status]
		var refundedAt sql.NullTime
		if err := r.Scan(&key, &k.RedemptionID, &k.UserCouponID, &k.OrderID, &k.RedeemedAt, &k.coupon, &order,
			&flowID, &mode, &to, &refundedAt); err != nil {
			return err
		}
		k.couponOrder = order.String
		k.Status, k.Replayed = k.coupon.String(), true
		if flowID.Valid {
			k.refund = &Refund{FlowID: flowID.Int64, UserCouponID: k.UserCouponID, RedemptionID: k.RedemptionID, OrderID: k.OrderID,
				Mode: mode.String, Status: to.V.String(), RefundedAt: refundedAt.Time, Replayed: true}
		}
		out[key] = k
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("look up %d redemption key(s): %w", len(keys), err)
	}
	return out, nil
}

// replay answers a redemption request whose key is taken: with the
// redemption while it is in effect (the coupon USED by it), else refused.
// A refunded redemption is final, so that a late retry of the original
// request never consumes the coupon again.
func (k keyedRedemption) replay() (Redemption, error) {
	switch {
	case k.refund != nil:
		return Redemption{}, conflictf(CodeAlreadyRefunded,
			"order %s redeemed coupon %d (redemption %d) and that redemption was refunded with mode %q at %s; "+
				"a refunded redemption is final and is not redeemed again: to redeem the coupon again, use a new order_id",
			k.OrderID, k.UserCouponID, k.RedemptionID, k.refund.Mode, k.refund.RefundedAt.Format(time.RFC3339Nano))
	case k.coupon == Used && k.couponOrder == k.OrderID:
		return k.Redemption, nil
	case k.coupon == Used:
		// no refund row, yet another order holds it: changed outside the API
		return Redemption{}, conflictf(CodeAlreadyUsed, "coupon %d is now redeemed by another order", k.UserCouponID)
	}
	return Redemption{}, IllegalTransition(k.coupon, Used, ActionRedeem)
}
