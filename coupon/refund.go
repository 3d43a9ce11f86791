package coupon

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/couponlink/couponlink/api"
	"github.com/couponlink/couponlink/internal/sqltx"
)

// Refund modes.
const (
	RefundRestore = api.RefundRestore // USED -> AVAILABLE: the coupon goes back to the wallet
	RefundRecycle = api.RefundRecycle // USED -> RETURNED: the slot goes back to the pool
)

// RefundRequest undoes a redemption, by the order that made it.
type RefundRequest struct {
	UserCouponID int64
	OrderID      string
	Mode         string
}

// Refund is one refund movement (an inventory_flow row of kind refund).
type Refund = api.Refund

// Validate checks the request's fields.
func (r *RefundRequest) Validate() error {
	rr := RedeemRequest{UserCouponID: r.UserCouponID, OrderID: r.OrderID}
	if err := rr.Validate(); err != nil {
		return err
	}
	r.OrderID = rr.OrderID
	r.Mode = strings.TrimSpace(r.Mode)
	if r.Mode != RefundRestore && r.Mode != RefundRecycle {
		return Invalid("mode", `mode must be "restore" (the coupon goes back to the user) or "recycle" (the slot goes back to the pool), got %q`, r.Mode)
	}
	return nil
}

// Refund reverses the redemption that order_id made of the coupon, in one
// transaction with its inventory_flow row. The flow's unique key
// (coupon, refund, redemption id) makes a redemption refundable once.
func (s *Store) Refund(ctx context.Context, req RefundRequest) (Refund, error) {
	if err := req.Validate(); err != nil {
		return Refund{}, err
	}
	action, to := ActionRefundRestore, Available
	if req.Mode == RefundRecycle {
		action, to = ActionRefundRecycle, Returned
	}
	var out Refund
	err := s.retry(ctx, "refund", func() error {
		// The coupon first, then the ledgers: this very refund committing
		// between the reads is found with the redemption, and is not taken for an
		// illegal transition.
		c, err := loadCoupon(ctx, s.db, req.UserCouponID)
		if err != nil {
			return err
		}
		red, err := s.redemptionByKey(ctx, RedemptionKey(req.OrderID, req.UserCouponID))
		if err != nil {
			return err
		}
		if red == nil {
			return conflictf(api.CodeOrderMismatch, "order %s did not redeem coupon %d; only the order that redeemed a coupon may refund it",
				req.OrderID, req.UserCouponID)
		}
		if red.refund != nil { // refunded before: this refund again, or the other mode
			out = *red.refund
			if out.Mode != req.Mode {
				return conflictf(api.CodeIdempotencyConflict, "order %s already refunded coupon %d with mode %q; a refund with mode %q is refused",
					req.OrderID, req.UserCouponID, out.Mode, req.Mode)
			}
			return nil
		}
		if _, err := Check(action, c.Status); err != nil {
			return err
		}
		if c.OrderID.String != req.OrderID {
			return conflictf(api.CodeOrderMismatch, "coupon %d is now redeemed by another order; order %s may not refund it", c.ID, req.OrderID)
		}
		now := s.clock()
		out = Refund{UserCouponID: c.ID, RedemptionID: red.RedemptionID, OrderID: req.OrderID, Mode: req.Mode,
			Status: to.String(), RefundedAt: now}
		return sqltx.Run(ctx, s.db, nil, func(tx *sql.Tx) error {
			id, err := insertFlow(ctx, tx, flowRow{Coupon: c, Kind: FlowRefund, Seq: red.RedemptionID, From: Used, To: to,
				Mode: req.Mode, OrderID: req.OrderID, CreatedAt: now})
			if isDuplicate(err) {
				return errRaceLost // the same refund committed meanwhile: replay it
			}
			if err != nil {
				return fmt.Errorf("insert refund flow: %w", err)
			}
			out.FlowID = id
			if to == Available {
				return moveCoupons(ctx, tx, to, []couponRow{c}, "order_id = NULL, redeemed_at = NULL")
			}
			return moveCoupons(ctx, tx, to, []couponRow{c}, "")
		})
	})
	return out, err
}
