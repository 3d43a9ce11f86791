package coupon

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"

	"github.com/couponlink/couponlink/api"
	"github.com/couponlink/couponlink/internal/sqltx"
)

// RedeemRequest uses a coupon on an order.
type RedeemRequest struct {
	UserCouponID int64
	OrderID      string
}

// Redemption is one redemption_log row.
type Redemption = api.Redemption

// Validate checks the request's fields.
func (r *RedeemRequest) Validate() error {
	r.OrderID = strings.TrimSpace(r.OrderID)
	if r.UserCouponID <= 0 {
		return Invalid("user_coupon_id", "user_coupon_id is required and must be a positive id")
	}
	return checkFields(textField{Name: "order_id", Value: r.OrderID, Max: MaxIDLen})
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

// redeemOne is the single path: one redemption, one transaction, written
// as a group of one.
func (s *Store) redeemOne(ctx context.Context, req RedeemRequest) (Redemption, error) {
	c := &redeemCall{req: req, key: RedemptionKey(req.OrderID, req.UserCouponID)}
	lookup := false // an AVAILABLE coupon skips the key look-up until the key turns out taken
	err := s.retry(ctx, "redemption", func() error {
		// The coupon first, then the key: a redemption by this order that
		// commits between the two reads is found by the second, and is not
		// taken for another order's (already_used).
		coupons, err := couponsByID(ctx, s.db, []any{req.UserCouponID})
		if err != nil {
			return err
		}
		var k *keyedRedemption
		if row, ok := coupons[req.UserCouponID]; ok && (lookup || !redeemable(row, s.clock())) {
			if k, err = s.redemptionByKey(ctx, c.key); err != nil {
				return err
			}
		}
		if !c.decide(coupons, k, s.clock()) {
			return c.err
		}
		return sqltx.Run(ctx, s.db, nil, func(tx *sql.Tx) error {
			err := writeRedemptions(ctx, tx, []*redeemCall{c})
			if isDuplicate(err) {
				lookup = true
				return errRaceLost // the same redemption exists: replay it
			}
			return err
		})
	})
	return c.out, err
}

// writeRedemptions writes decided redemptions: their redemption_log rows,
// then their coupons to USED under each one's version guard.
func writeRedemptions(ctx context.Context, tx *sql.Tx, calls []*redeemCall) error {
	if err := insertRedemptions(ctx, tx, calls); err != nil {
		return err
	}
	return markUsed(ctx, tx, calls)
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
// coupon's state and its refund (nil: no redemption has the key): a refund
// commits the flow and the coupon's new state together, so the two are
// never seen half-way.
func (s *Store) redemptionByKey(ctx context.Context, key string) (*keyedRedemption, error) {
	ks, err := redemptionsByKey(ctx, s.db, []any{key})
	if k, found := ks[key]; found {
		return &k, err
	}
	return nil, err
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
