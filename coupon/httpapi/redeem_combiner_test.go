package httpapi_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The redemption combiner under HTTP load, over two API processes (two
// stores, two combiners, one database): the single path's answers and
// invariants hold, and groups of more than one redemption really happen.

// assertRedeemGrouped checks that some redemption group of each env held
// more than one redemption.
func assertRedeemGrouped(t *testing.T, es ...*env) {
	t.Helper()
	var groups uint64
	var reds float64
	for _, e := range es {
		g, r := e.histogram(t, "couponlink_api_redemption_group_size")
		groups, reds = groups+g, reds+r
		t.Logf("%d redemptions in %d groups, %d groups fell back", int(r), g, e.store.RedemptionFallbacks())
	}
	require.Positive(t, groups, "the combiner ran")
	assert.Greater(t, reds, float64(groups), "some group held more than one redemption")
}

// twoProcesses is two combined API processes on one database, and n
// coupons claimed through them.
func twoProcesses(t *testing.T, n int) (a, b *env, ids []int64) {
	a = combinedEnv(t)
	b = newEnv(t, envConfig{db: a.db, combine: true, now: a.clock.Now})
	tpl := a.template(t, map[string]any{"total_quota": n, "channels": map[string]int{"app": n}})
	for i := range n {
		ids = append(ids, a.claim(t, tpl, fmt.Sprintf("u%03d", i), "app").UserCouponID)
	}
	return a, b, ids
}

// redeemReplies sends redemptions i = 0..n-1 of ids[i % len(ids)] by
// order(i) at once, the requests for one coupon alternately to a and b.
func redeemReplies(t *testing.T, a, b *env, n int, ids []int64, order func(i int) string) []reply {
	return parallel(t, 128, n, func(i int) (reply, error) {
		coupon := func(i int) int64 { return ids[i%len(ids)] }
		return []*env{a, b}[i/len(ids)%2].api.do("POST", "/v1/redemptions", map[string]any{"user_coupon_id": coupon(i), "order_id": order(i)})
	})
}

// 200 concurrent redemptions of 50 coupons by 200 distinct orders: exactly
// 50 redemption rows, one per coupon, each the answer of its 201 (its id,
// its order, the coupon USED by that order at version 2); every other
// answer already_used.
func TestCombinedRedemptionsTwoProcesses(t *testing.T) {
	a, b, ids := twoProcesses(t, 50)
	replies := redeemReplies(t, a, b, 200, ids, func(i int) string { return fmt.Sprintf("o%03d", i) })
	got := map[string]int{}
	won := map[int64]int{}
	for i, r := range replies {
		switch {
		case r.Status == http.StatusCreated:
			var red redeemReply
			require.NoError(t, r.decode(&red))
			got["created"]++
			won[red.UserCouponID]++
			assert.Equal(t, ids[i%50], red.UserCouponID)
			assert.Equal(t, fmt.Sprintf("o%03d", i), red.OrderID)
			assert.Equal(t, 1, a.count(t, `SELECT COUNT(*) FROM redemption_log r JOIN user_coupon c ON c.id = r.user_coupon_id
				WHERE r.id = ? AND r.user_coupon_id = ? AND r.order_id = ? AND c.status = 2 AND c.order_id = ? AND c.version = 2`,
				red.RedemptionID, red.UserCouponID, red.OrderID, red.OrderID), "redemption %d is its request's row", red.RedemptionID)
		case r.Status == http.StatusConflict:
			got[r.errCode()]++
		default:
			t.Errorf("redemption %d: unexpected reply %s", i, r)
		}
	}
	assert.Equal(t, map[string]int{"created": 50, "already_used": 150}, got)
	assert.Len(t, won, 50, "one winner per coupon")
	assert.Equal(t, 50, a.count(t, `SELECT COUNT(*) FROM redemption_log`))
	assert.Equal(t, 50, a.count(t, `SELECT COUNT(DISTINCT user_coupon_id) FROM redemption_log`))
	assert.Equal(t, 50, a.count(t, `SELECT COUNT(*) FROM user_coupon WHERE status = 2 AND version = 2`))
	assertRedeemGrouped(t, a, b)
}

// The same redemption ((order, coupon)) sent 8 times at once, for 25
// coupons, over two processes: one row per coupon, one 201 and seven
// replays (200, replayed) per coupon, all naming the same redemption.
func TestCombinedRedemptionReplays(t *testing.T) {
	a, b, ids := twoProcesses(t, 25)
	replies := redeemReplies(t, a, b, 200, ids, func(i int) string { return fmt.Sprintf("o%03d", i%25) })
	status := map[int64]map[int]int{}
	redID := map[int64]map[int64]bool{}
	for i, r := range replies {
		id := ids[i%25]
		if status[id] == nil {
			status[id], redID[id] = map[int]int{}, map[int64]bool{}
		}
		status[id][r.Status]++
		var red redeemReply
		if !assert.Contains(t, []int{200, 201}, r.Status, "redemption %d: %s", i, r) {
			continue
		}
		require.NoError(t, r.decode(&red))
		assert.Equal(t, r.Status == http.StatusOK, red.Replayed)
		assert.Equal(t, "USED", red.Status)
		assert.Equal(t, fmt.Sprintf("o%03d", i%25), red.OrderID)
		redID[id][red.RedemptionID] = true
	}
	for _, id := range ids {
		assert.Equal(t, map[int]int{201: 1, 200: 7}, status[id], "coupon %d", id)
		require.Len(t, redID[id], 1, "coupon %d: every answer names one redemption", id)
		for rid := range redID[id] {
			assert.Equal(t, 1, a.count(t, `SELECT COUNT(*) FROM redemption_log WHERE id = ? AND user_coupon_id = ?`, rid, id))
		}
	}
	assert.Equal(t, 25, a.count(t, `SELECT COUNT(*) FROM redemption_log`))
	assertRedeemGrouped(t, a, b)
}

// Fresh coupons redeemed at once with refused requests mixed in (each sent
// several times, so that they share groups with the fresh ones): a
// redemption refunded (already_refunded), an expired coupon
// (coupon_expired), a voided one (illegal_transition), one used by another
// order (already_used), an unknown id (not_found). Only those are refused:
// every fresh coupon is redeemed, and nothing fell back.
func TestCombinedRedemptionsMixedRefusals(t *testing.T) {
	e := combinedEnv(t)
	tpl := e.template(t, map[string]any{"total_quota": 100, "channels": map[string]int{"app": 100}})
	var fresh []int64
	for i := range 60 {
		fresh = append(fresh, e.claim(t, tpl, fmt.Sprintf("f%02d", i), "app").UserCouponID)
	}
	refunded, expired, voided, used := e.claim(t, tpl, "r", "app"), e.claim(t, tpl, "x", "app"), e.claim(t, tpl, "v", "app"), e.claim(t, tpl, "u", "app")
	e.redeem(t, refunded.UserCouponID, "ord-r")
	e.refund(t, refunded.UserCouponID, "ord-r", "restore")
	e.void(t, "void-1", voided.UserCouponID)
	e.redeem(t, used.UserCouponID, "ord-u")
	_, err := e.db.Exec(`UPDATE user_coupon SET expires_at = ? WHERE id = ?`, e.clock.Now().Add(-time.Second), expired.UserCouponID)
	require.NoError(t, err)
	refusals := []struct {
		id    int64
		order string
		code  string
	}{{refunded.UserCouponID, "ord-r", "already_refunded"}, {expired.UserCouponID, "ord-x", "coupon_expired"},
		{voided.UserCouponID, "ord-v", "illegal_transition"}, {used.UserCouponID, "ord-other", "already_used"}, {99_999_999, "ord-n", "not_found"}}
	n := len(fresh) + 4*len(refusals)
	replies := parallel(t, 128, n, func(i int) (reply, error) {
		body := map[string]any{"user_coupon_id": 0, "order_id": ""}
		if i < len(fresh) {
			body["user_coupon_id"], body["order_id"] = fresh[i], fmt.Sprintf("ord-f%02d", i)
		} else {
			r := refusals[(i-len(fresh))%len(refusals)]
			body["user_coupon_id"], body["order_id"] = r.id, r.order
		}
		return e.api.do("POST", "/v1/redemptions", body)
	})
	for i, r := range replies {
		if i < len(fresh) {
			assert.Equal(t, http.StatusCreated, r.Status, "fresh coupon %d: %s", fresh[i], r)
			continue
		}
		assert.Equal(t, refusals[(i-len(fresh))%len(refusals)].code, r.errCode(), "refused request %d: %s", i, r)
	}
	assert.Equal(t, len(fresh), e.count(t, `SELECT COUNT(*) FROM redemption_log WHERE order_id LIKE 'ord-f%'`))
	assert.Equal(t, 2, e.count(t, `SELECT COUNT(*) FROM redemption_log WHERE order_id NOT LIKE 'ord-f%'`), "only the two made before")
	assert.Equal(t, "AVAILABLE", e.status(t, refunded.UserCouponID).String())
	assert.Zero(t, e.store.RedemptionFallbacks(), "refusals are answers, not group errors")
	assertRedeemGrouped(t, e)
}
