package httpapi_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/coupon"
)

// A redemption whose (order, coupon) was refunded is final: the same order
// redeeming the coupon again is already_refunded, naming the refund, and
// writes nothing — whatever happened to the coupon since. A success answer
// means the redemption is in effect now.
func TestRedeemAfterItsRefundIsRefused(t *testing.T) { redeemAfterItsRefundIsRefused(t, newEnv(t)) }

func redeemAfterItsRefundIsRefused(t *testing.T, e *env) {
	tpl := e.template(t, map[string]any{"per_user_limit": 10})

	// refundOnce redeems a new coupon with o-1 and refunds it in mode; it
	// returns the coupon and the refund's time.
	refundOnce := func(t *testing.T, mode string) (int64, time.Time) {
		id := e.claim(t, tpl, "u1", "app").UserCouponID
		e.redeem(t, id, "o-1")
		e.clock.Advance(time.Minute)
		at := e.clock.Now()
		e.refund(t, id, "o-1", mode)
		e.clock.Advance(time.Minute)
		return id, at
	}
	// refused checks that o-1 redeeming id again is already_refunded, names
	// the refund, and writes nothing.
	refused := func(t *testing.T, id int64, mode string, at time.Time) {
		t.Helper()
		before := e.ledgers(t)
		r := e.must(t, "POST", "/v1/redemptions", map[string]any{"user_coupon_id": id, "order_id": "o-1"})
		msg := expectError(t, r, 409, "already_refunded").Message
		assert.Contains(t, msg, fmt.Sprintf("mode %q", mode))
		assert.Contains(t, msg, at.Format(time.RFC3339))
		assert.Contains(t, msg, "new order_id")
		assert.Equal(t, before, e.ledgers(t), "a refused redemption writes nothing")
	}

	t.Run("restore, then the replay", func(t *testing.T) {
		id, at := refundOnce(t, "restore")
		refused(t, id, "restore", at)
		assert.Equal(t, coupon.Available, e.status(t, id))
		// the coupon is in the wallet: a new order redeems it
		e.redeem(t, id, "o-2")
	})
	t.Run("restore, another order redeems, then the replay", func(t *testing.T) {
		id, at := refundOnce(t, "restore")
		r2 := e.redeem(t, id, "o-2")
		refused(t, id, "restore", at)
		assert.Equal(t, 1, e.count(t, `SELECT COUNT(*) FROM user_coupon WHERE id = ? AND status = 2 AND order_id = 'o-2'`, id))
		// o-2's redemption is in effect: its replay is answered
		var again redeemReply
		e.expect(t, 200, "POST", "/v1/redemptions", map[string]any{"user_coupon_id": id, "order_id": "o-2"}, &again)
		assert.Equal(t, redeemReply{RedemptionID: r2.RedemptionID, UserCouponID: id, OrderID: "o-2", Status: "USED", Replayed: true}, again)
	})
	t.Run("recycle, then the replay", func(t *testing.T) {
		id, at := refundOnce(t, "recycle")
		refused(t, id, "recycle", at)
		assert.Equal(t, coupon.Returned, e.status(t, id))
	})
	t.Run("restore, expired, then the replay", func(t *testing.T) {
		id, at := refundOnce(t, "restore")
		e.clock.Advance(2 * time.Hour)
		e.expire(t, map[string]any{})
		require.Equal(t, coupon.Expired, e.status(t, id))
		refused(t, id, "restore", at)
	})
}
