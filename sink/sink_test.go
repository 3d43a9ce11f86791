package sink_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/coupon"
)

func TestCountersFollowTheAPI(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	tpl := e.Template(map[string]int64{"app": 30, "sms": 20}, time.Hour)
	for i := range 10 {
		_, err := e.Store.Claim(ctx, coupon.ClaimRequest{TemplateID: tpl, UserID: fmt.Sprint("u", i), Channel: "app", RequestID: fmt.Sprint("r", i)})
		require.NoError(t, err)
	}
	e.StartCDC(nil)
	e.assertTruth(true) // bootstrap
	for i := 10; i < 30; i++ {
		ch := "sms"
		if i%2 == 0 {
			ch = "app"
		}
		c, err := e.Store.Claim(ctx, coupon.ClaimRequest{TemplateID: tpl, UserID: fmt.Sprint("u", i), Channel: ch, RequestID: fmt.Sprint("r", i)})
		require.NoError(t, err)
		if i%3 == 0 {
			_, err = e.Store.Redeem(ctx, coupon.RedeemRequest{UserCouponID: c.UserCouponID, OrderID: fmt.Sprint("o", i)})
			require.NoError(t, err)
		}
		if i%9 == 0 {
			_, err = e.Store.Refund(ctx, coupon.RefundRequest{UserCouponID: c.UserCouponID, OrderID: fmt.Sprint("o", i), Mode: "recycle"})
			require.NoError(t, err)
		}
	}
	e.assertTruth(true)
	require.Empty(t, e.anomalies())
}
