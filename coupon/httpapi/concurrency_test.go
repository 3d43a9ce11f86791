package httpapi_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// parallel runs n jobs on `workers` goroutines and returns each job's reply
// (a transport error is a failed test, not a reply).
func parallel(t *testing.T, workers, n int, job func(i int) (reply, error)) []reply {
	t.Helper()
	out := make([]reply, n)
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				r, err := job(i)
				if assert.NoError(t, err, "job %d", i) {
					out[i] = r
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	return out
}

// 2,000 distinct users claim at once from a template of 1,000 over two
// channels (600 + 400): exactly 1,000 coupons, each bucket's claimed equals
// its rows, every other claim is sold_out, nothing is a 5xx.
func TestConcurrentClaimsNeverOverIssue(t *testing.T) { claimsNeverOverIssue(t, newEnv(t)) }

func claimsNeverOverIssue(t *testing.T, e *env) {
	tpl := e.template(t, map[string]any{"total_quota": 1000, "channels": map[string]int{"app": 600, "sms": 400}})
	const n = 2000
	channelOf := func(i int) string { return []string{"app", "sms"}[i%2] }
	replies := parallel(t, 32, n, func(i int) (reply, error) {
		return e.api.do("POST", "/v1/claims", map[string]any{"template_id": tpl, "user_id": fmt.Sprintf("u%04d", i),
			"channel": channelOf(i), "request_id": fmt.Sprintf("r%04d", i)})
	})
	won := tallyClaims(t, e, replies, channelOf)
	assert.Equal(t, map[string]int{"app": 600, "sms": 400, "sold_out": 1000}, won)

	assert.Equal(t, 1000, e.count(t, `SELECT COUNT(*) FROM user_coupon WHERE template_id = ?`, tpl))
	for ch, quota := range map[string]int{"app": 600, "sms": 400} {
		rows := e.count(t, `SELECT COUNT(*) FROM user_coupon WHERE template_id = ? AND channel = ?`, tpl, ch)
		claimed := e.count(t, `SELECT claimed FROM channel_quota WHERE template_id = ? AND channel = ?`, tpl, ch)
		assert.Equal(t, quota, rows, "rows of %s", ch)
		assert.Equal(t, rows, claimed, "channel_quota.claimed of %s", ch)
	}
	assert.Equal(t, 1000, e.count(t, `SELECT COUNT(*) FROM user_claim WHERE template_id = ?`, tpl),
		"a sold-out claim leaves no per-user count behind")
	assert.Equal(t, 0, e.count(t, `SELECT COUNT(*) FROM (SELECT user_id FROM user_coupon GROUP BY user_id HAVING COUNT(*) > 1) d`))
	inv := e.inventory(t, tpl)
	assert.Equal(t, [3]int64{0, 1000, 1000}, [3]int64{inv.Claimable, inv.Held, inv.Claimed})
	assert.True(t, inv.Conserved)
}

// tallyClaims counts the answers of claims i (user u%04d, request r%04d)
// by channelOf(i) when created, else by error code (only sold_out is
// expected), and checks that each created claim has its own coupon.
func tallyClaims(t *testing.T, e *env, replies []reply, channelOf func(i int) string) map[string]int {
	t.Helper()
	won := map[string]int{}
	ids := map[int64]bool{}
	for i, r := range replies {
		switch {
		case r.Status == http.StatusCreated:
			var c claimReply
			require.NoError(t, r.decode(&c))
			assert.False(t, ids[c.UserCouponID], "coupon id %d answered twice", c.UserCouponID)
			ids[c.UserCouponID] = true
			assert.Equal(t, fmt.Sprintf("u%04d", i), c.UserID)
			assert.Equal(t, 1, e.count(t, `SELECT COUNT(*) FROM user_coupon WHERE id = ? AND request_id = ?`, c.UserCouponID, fmt.Sprintf("r%04d", i)),
				"claim %d is answered with its own coupon", i)
			won[channelOf(i)]++
		case r.Status == http.StatusConflict && r.errCode() == "sold_out":
			won["sold_out"]++
		default:
			t.Errorf("claim %d: unexpected reply %s", i, r)
		}
	}
	return won
}

// 50 concurrent redemptions of one coupon by the same order: one
// redemption_log row; every answer is that redemption (one 201, 49 200s).
func TestConcurrentRedemptionsSameOrder(t *testing.T) { concurrentRedemptionsSameOrder(t, newEnv(t)) }

func concurrentRedemptionsSameOrder(t *testing.T, e *env) {
	tpl := e.template(t, nil)
	c := e.claim(t, tpl, "u1", "app")
	replies := parallel(t, 50, 50, func(int) (reply, error) {
		return e.api.do("POST", "/v1/redemptions", map[string]any{"user_coupon_id": c.UserCouponID, "order_id": "order-1"})
	})
	codes := map[int]int{}
	ids := map[int64]int{}
	for _, r := range replies {
		codes[r.Status]++
		if r.Status == 200 || r.Status == 201 {
			var red redeemReply
			require.NoError(t, r.decode(&red))
			ids[red.RedemptionID]++
			assert.Equal(t, "USED", red.Status)
			assert.Equal(t, r.Status == 200, red.Replayed)
		} else {
			t.Errorf("unexpected reply %s", r)
		}
	}
	assert.Equal(t, map[int]int{201: 1, 200: 49}, codes)
	require.Len(t, ids, 1, "every answer names the same redemption")
	assert.Equal(t, 1, e.count(t, `SELECT COUNT(*) FROM redemption_log WHERE user_coupon_id = ?`, c.UserCouponID))
	for id := range ids {
		assert.Equal(t, 1, e.count(t, `SELECT COUNT(*) FROM redemption_log WHERE id = ? AND order_id = 'order-1'`, id))
	}
	assert.Equal(t, "USED", e.status(t, c.UserCouponID).String())
	assert.Equal(t, 2, e.count(t, `SELECT version FROM user_coupon WHERE id = ?`, c.UserCouponID), "updated once")
}

// 50 concurrent redemptions of one coupon by 50 orders: exactly one wins,
// 49 are already_used, and the coupon names the winner.
func TestConcurrentRedemptionsDifferentOrders(t *testing.T) {
	e := newEnv(t)
	tpl := e.template(t, nil)
	c := e.claim(t, tpl, "u1", "app")
	replies := parallel(t, 50, 50, func(i int) (reply, error) {
		return e.api.do("POST", "/v1/redemptions", map[string]any{"user_coupon_id": c.UserCouponID, "order_id": fmt.Sprintf("order-%d", i)})
	})
	var winner string
	got := map[string]int{}
	for _, r := range replies {
		switch {
		case r.Status == 201:
			var red redeemReply
			require.NoError(t, r.decode(&red))
			winner = red.OrderID
			got["201"]++
		case r.Status == 409:
			got[r.errCode()]++
		default:
			t.Errorf("unexpected reply %s", r)
		}
	}
	assert.Equal(t, map[string]int{"201": 1, "already_used": 49}, got)
	assert.Equal(t, 1, e.count(t, `SELECT COUNT(*) FROM redemption_log WHERE user_coupon_id = ?`, c.UserCouponID))
	assert.Equal(t, 1, e.count(t, `SELECT COUNT(*) FROM user_coupon WHERE id = ? AND status = 2 AND order_id = ? AND version = 2`,
		c.UserCouponID, winner))
	assert.Equal(t, 1, e.count(t, `SELECT COUNT(*) FROM redemption_log WHERE user_coupon_id = ? AND order_id = ?`, c.UserCouponID, winner))
}

// The same claim (one request_id) sent 20 times at once: one coupon, one
// 201, and 19 replays of it — never limit_reached or sold_out.
func TestConcurrentClaimReplays(t *testing.T) { concurrentClaimReplays(t, newEnv(t)) }

func concurrentClaimReplays(t *testing.T, e *env) {
	tpl := e.template(t, map[string]any{"total_quota": 1, "channels": map[string]int{"app": 1}})
	replies := parallel(t, 20, 20, func(int) (reply, error) {
		return e.api.do("POST", "/v1/claims", map[string]any{"template_id": tpl, "user_id": "u1", "channel": "app", "request_id": "same"})
	})
	codes := map[int]int{}
	ids := map[int64]bool{}
	for _, r := range replies {
		codes[r.Status]++
		var c claimReply
		if r.Status/100 == 2 && assert.NoError(t, r.decode(&c)) {
			ids[c.UserCouponID] = true
		} else {
			t.Errorf("unexpected reply %s", r)
		}
	}
	assert.Equal(t, map[int]int{201: 1, 200: 19}, codes)
	assert.Len(t, ids, 1)
	assert.Equal(t, 1, e.count(t, `SELECT COUNT(*) FROM user_coupon`))
	assert.Equal(t, 1, e.count(t, `SELECT claimed FROM channel_quota WHERE template_id = ?`, tpl))
}

// The same refund sent 50 times at once: one inventory_flow row, every
// answer is that refund.
func TestConcurrentRefundReplays(t *testing.T) {
	for _, mode := range []string{"restore", "recycle"} {
		t.Run(mode, func(t *testing.T) {
			e := newEnv(t)
			_, c := e.usedCoupon(t)
			replies := parallel(t, 50, 50, func(int) (reply, error) {
				return e.api.do("POST", "/v1/refunds", map[string]any{"user_coupon_id": c.UserCouponID, "order_id": "o1", "mode": mode})
			})
			flows := map[int64]int{}
			fresh := 0
			for _, r := range replies {
				var ref refundReply
				if r.Status == 200 && assert.NoError(t, r.decode(&ref)) {
					flows[ref.FlowID]++
					if !ref.Replayed {
						fresh++
					}
				} else {
					t.Errorf("unexpected reply %s", r)
				}
			}
			assert.Len(t, flows, 1, "every answer names the same refund")
			assert.Equal(t, 1, fresh, "one answer made the refund, the others replayed it")
			assert.Equal(t, 1, e.count(t, `SELECT COUNT(*) FROM inventory_flow WHERE user_coupon_id = ?`, c.UserCouponID))
			assert.Equal(t, 3, e.count(t, `SELECT version FROM user_coupon WHERE id = ?`, c.UserCouponID))
		})
	}
}
