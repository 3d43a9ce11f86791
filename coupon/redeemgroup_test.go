package coupon

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The group transaction of the redemption combiner, called directly so
// that the group's members are exactly the test's.

// groupCoupons claims n coupons of a fresh template (single path) and
// returns their ids.
func groupCoupons(t *testing.T, s *Store, n int) []int64 {
	t.Helper()
	tpl := groupTemplate(t, s, int64(n), int64(n))
	ids := make([]int64, n)
	for i := range ids {
		c, err := s.Claim(context.Background(), ClaimRequest{TemplateID: tpl, UserID: "u", Channel: "app",
			RequestID: fmt.Sprintf("c%d-%d", tpl, i)})
		require.NoError(t, err)
		ids[i] = c.UserCouponID
	}
	return ids
}

// redeemCalls are redemptions of coupons[i] by orders[i].
func redeemCalls(t *testing.T, coupons []int64, orders []string) []*redeemCall {
	t.Helper()
	out := make([]*redeemCall, len(coupons))
	for i := range coupons {
		req := RedeemRequest{UserCouponID: coupons[i], OrderID: orders[i]}
		require.NoError(t, req.Validate())
		out[i] = &redeemCall{member: newMember(context.Background()), req: req, key: RedemptionKey(req.OrderID, req.UserCouponID)}
	}
	return out
}

// runRedemptions runs the group, then each member's own answer (a solo
// one on the single path, as the combiner does): "ok", "replay" or the
// error code.
func runRedemptions(s *Store, group []*redeemCall) ([]Redemption, []string) {
	s.runRedeemGroup(context.Background(), group)
	out := make([]Redemption, len(group))
	codes := make([]string, len(group))
	for i, c := range group {
		settle(s, c)
		out[i], codes[i] = redeemCode(c.out, c.err)
	}
	return out, codes
}

func redeemCode(r Redemption, err error) (Redemption, string) { return r, code(err, r.Replayed) }

// One group of every kind of request: three fresh coupons redeemed; a
// coupon redeemed by another order (already_used); the same redemption
// again (replayed); a refunded redemption (already_refunded, though its
// coupon is AVAILABLE again); a voided coupon (illegal_transition); an
// expired one (coupon_expired); an unknown id (not_found); and a fresh
// coupon twice more, by its own order and another (the replay of the
// group's redemption, already_used). Each request gets the single path's
// answer, the refusals fail alone, and the group did not fall back.
func TestRedeemGroupAnswers(t *testing.T) {
	s, db := groupStore(t)
	ids := groupCoupons(t, s, 8)
	ctx := context.Background()
	for _, pre := range []RedeemRequest{{ids[3], "x"}, {ids[4], "y"}, {ids[5], "r"}} {
		_, err := s.Redeem(ctx, pre)
		require.NoError(t, err)
	}
	first, err := s.Redeem(ctx, RedeemRequest{ids[4], "y"})
	require.NoError(t, err)
	_, err = s.Refund(ctx, RefundRequest{UserCouponID: ids[5], OrderID: "r", Mode: RefundRestore})
	require.NoError(t, err)
	_, err = s.Void(ctx, VoidRequest{UserCouponIDs: []int64{ids[6]}, Reason: "test", Operator: "t", RequestID: "v1"})
	require.NoError(t, err)
	_, err = db.Exec(`UPDATE user_coupon SET expires_at = ? WHERE id = ?`, s.clock(), ids[7])
	require.NoError(t, err)

	group := redeemCalls(t, []int64{ids[0], ids[1], ids[3], ids[4], ids[5], ids[6], ids[7], 999_999, ids[2], ids[0], ids[0]},
		[]string{"o0", "o1", "other", "y", "r", "o6", "o7", "o8", "o2", "o0", "late"})
	out, codes := runRedemptions(s, group)
	assert.Equal(t, []string{"ok", "ok", "already_used", "replay", "already_refunded", "illegal_transition", "coupon_expired",
		"not_found", "ok", "replay", "already_used"}, codes)
	assert.Equal(t, first.RedemptionID, out[3].RedemptionID, "the replay answers the first redemption")
	assert.Equal(t, out[0].RedemptionID, out[9].RedemptionID, "the coupon's second request replays the group's redemption")
	assert.Zero(t, s.RedemptionFallbacks(), "answered by the group, not by the fallback")
	for _, i := range []int{0, 1, 8} {
		assert.Equal(t, []string{fmt.Sprintf("%d|%d|%s|2|%s", out[i].RedemptionID, ids[min(i, 2)], group[i].req.OrderID, group[i].req.OrderID)},
			dumpRows(t, db, `SELECT CONCAT_WS('|', r.id, r.user_coupon_id, r.order_id, c.status, c.order_id) FROM redemption_log r
				JOIN user_coupon c ON c.id = r.user_coupon_id WHERE r.idempotency_key = ?`, group[i].key),
			"request %d: its redemption row, its coupon USED by its order", i)
	}
	assert.Equal(t, []string{"1"}, dumpRows(t, db, `SELECT COUNT(*) FROM redemption_log WHERE user_coupon_id = ?`, ids[0]))
}

// The rows a group writes are the rows the single path writes for the same
// requests one after the other.
func TestRedeemGroupWritesTheSingleRows(t *testing.T) {
	s, db := groupStore(t)
	single, grouped := groupCoupons(t, s, 6), groupCoupons(t, s, 6)
	orders := []string{"a", "b", "c", "d", "e", "f"}
	var singleCodes []string
	for i, id := range single {
		_, code := redeemCode(s.redeemOne(context.Background(), RedeemRequest{id, orders[i]}))
		singleCodes = append(singleCodes, code)
	}
	_, groupCodes := runRedemptions(s, redeemCalls(t, grouped, orders))
	assert.Equal(t, singleCodes, groupCodes)
	rows := func(ids []int64) []string {
		return dumpRows(t, db, `SELECT CONCAT_WS('|', c.status, c.order_id, c.version, c.redeemed_at, r.channel,
			r.order_id, r.redeemed_at, SUBSTRING_INDEX(r.idempotency_key, '/', 1)) FROM user_coupon c JOIN redemption_log r ON r.user_coupon_id = c.id
			WHERE c.id BETWEEN ? AND ? ORDER BY c.id`, ids[0], ids[len(ids)-1])
	}
	assert.Equal(t, rows(single), rows(grouped))
	assert.Len(t, rows(grouped), 6)
	assert.Zero(t, s.RedemptionFallbacks())
}

// A database error on the group rolls it back and every request runs alone
// on the single path, with the same answers.
func TestRedeemGroupFallsBack(t *testing.T) {
	s, db := groupStore(t)
	ids := groupCoupons(t, s, 3)
	s.groupFault = func(string, int) error { return errors.New("injected: deadlock") }
	_, codes := runRedemptions(s, redeemCalls(t, []int64{ids[0], ids[1], ids[2], ids[1]}, []string{"a", "b", "c", "b"}))
	assert.Equal(t, []string{"ok", "ok", "ok", "replay"}, codes)
	assert.EqualValues(t, 1, s.RedemptionFallbacks())
	assert.Equal(t, []string{"3"}, dumpRows(t, db, `SELECT COUNT(*) FROM redemption_log`))
}

// Another process redeems a coupon of the group, by another order, after
// the group read it: the coupon's version guard refuses the group's
// UPDATE, the group rolls back and falls back, and the single path answers
// that request already_used. Nothing is redeemed twice.
func TestRedeemGroupVersionRace(t *testing.T) {
	s, db := groupStore(t)
	ids := groupCoupons(t, s, 3)
	other, err := New(Config{DB: db, Now: s.now, Logger: s.log})
	require.NoError(t, err)
	s.groupFault = func(stage string, _ int) error {
		if stage != "read" {
			return nil
		}
		s.groupFault = nil
		_, err := other.Redeem(context.Background(), RedeemRequest{ids[1], "elsewhere"})
		return err
	}
	_, codes := runRedemptions(s, redeemCalls(t, ids, []string{"a", "b", "c"}))
	assert.Equal(t, []string{"ok", "already_used", "ok"}, codes)
	assert.EqualValues(t, 1, s.RedemptionFallbacks(), "the version guard failed the group")
	assert.Equal(t, []string{"elsewhere"}, dumpRows(t, db, `SELECT order_id FROM redemption_log WHERE user_coupon_id = ?`, ids[1]))
	assert.Equal(t, []string{"2|elsewhere|2"}, dumpRows(t, db,
		`SELECT CONCAT_WS('|', status, order_id, version) FROM user_coupon WHERE id = ?`, ids[1]))
	assert.Equal(t, []string{"3"}, dumpRows(t, db, `SELECT COUNT(*) FROM redemption_log`))
}
