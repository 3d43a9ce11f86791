package httpapi_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/inventory/view"
)

// Refund restore puts the coupon back in the wallet; a new order redeems it
// again; only the order that redeemed it may refund it; a refund replays;
// the other mode is a conflict; recycle returns it.
func TestRefundRestoreRedeemAgainThenRecycle(t *testing.T) {
	e := newEnv(t)
	tpl := e.template(t, nil)
	c := e.claim(t, tpl, "u1", "app")
	id := c.UserCouponID

	r1 := e.redeem(t, id, "o1")
	refund1 := e.refund(t, id, "o1", "restore")
	assert.Equal(t, refundReply{FlowID: refund1.FlowID, UserCouponID: id, RedemptionID: r1.RedemptionID, OrderID: "o1",
		Mode: "restore", Status: "AVAILABLE"}, refund1)
	assert.Equal(t, 1, e.count(t, `SELECT COUNT(*) FROM user_coupon WHERE id = ? AND status = 1 AND order_id IS NULL AND redeemed_at IS NULL`, id))
	inv := e.inventory(t, tpl)
	assert.Equal(t, [2]int64{1, 0}, [2]int64{inv.Held, inv.Used}, "restore: the slot stays held")

	r2 := e.redeem(t, id, "o2")
	assert.NotEqual(t, r1.RedemptionID, r2.RedemptionID)
	assert.Equal(t, []string{"o1", "o2"}, e.strings(t, `SELECT order_id FROM redemption_log WHERE user_coupon_id = ? ORDER BY id`, id),
		"two redemption_log rows")
	assert.Equal(t, 1, e.count(t, `SELECT COUNT(*) FROM user_coupon WHERE id = ? AND status = 2 AND order_id = 'o2'`, id))

	// o1's refund is done: a replay answers it, the other mode is a conflict
	before := e.ledgers(t)
	var again refundReply
	e.expect(t, 200, "POST", "/v1/refunds", map[string]any{"user_coupon_id": id, "order_id": "o1", "mode": "restore"}, &again)
	assert.Equal(t, refund1.FlowID, again.FlowID)
	assert.True(t, again.Replayed)
	r := e.must(t, "POST", "/v1/refunds", map[string]any{"user_coupon_id": id, "order_id": "o1", "mode": "recycle"})
	expectError(t, r, 409, "idempotency_conflict")
	// an order that never redeemed it
	r = e.must(t, "POST", "/v1/refunds", map[string]any{"user_coupon_id": id, "order_id": "o3", "mode": "restore"})
	expectError(t, r, 409, "order_mismatch")
	assert.Equal(t, before, e.ledgers(t), "refused refunds and replays write nothing")

	// recycle: USED -> RETURNED, released to the pool
	refund2 := e.refund(t, id, "o2", "recycle")
	assert.Equal(t, r2.RedemptionID, refund2.RedemptionID)
	assert.Equal(t, "RETURNED", refund2.Status)
	assert.Equal(t, coupon.Returned, e.status(t, id))
	assert.Equal(t, []string{
		fmt.Sprintf("refund seq=%d 2->1 mode=restore order=o1", r1.RedemptionID),
		fmt.Sprintf("refund seq=%d 2->4 mode=recycle order=o2", r2.RedemptionID),
	}, e.strings(t, `SELECT CONCAT(kind, ' seq=', seq, ' ', from_status, '->', to_status, ' mode=', mode, ' order=', order_id)
		FROM inventory_flow WHERE user_coupon_id = ? ORDER BY id`, id))
	inv = e.inventory(t, tpl)
	assert.Equal(t, [4]int64{0, 0, 1, 1}, [4]int64{inv.Held, inv.Used, inv.Returned, inv.Frozen})
	assert.True(t, inv.Conserved)

	before = e.ledgers(t)
	e.expect(t, 200, "POST", "/v1/refunds", map[string]any{"user_coupon_id": id, "order_id": "o2", "mode": "recycle"}, &again)
	assert.Equal(t, refund2.FlowID, again.FlowID)
	assert.True(t, again.Replayed)
	r = e.must(t, "POST", "/v1/refunds", map[string]any{"user_coupon_id": id, "order_id": "o2", "mode": "restore"})
	expectError(t, r, 409, "idempotency_conflict")
	r = e.must(t, "POST", "/v1/redemptions", map[string]any{"user_coupon_id": id, "order_id": "o4"})
	assert.Contains(t, expectError(t, r, 409, "illegal_transition").Message, "RETURNED -> USED")
	assert.Equal(t, before, e.ledgers(t))
}

// A refund is only for the order that redeemed the coupon now.
func TestRefundByAnotherOrder(t *testing.T) {
	e := newEnv(t)
	_, c := e.usedCoupon(t)
	before := e.ledgers(t)
	for _, mode := range []string{"restore", "recycle"} {
		r := e.must(t, "POST", "/v1/refunds", map[string]any{"user_coupon_id": c.UserCouponID, "order_id": "o2", "mode": mode})
		expectError(t, r, 409, "order_mismatch")
	}
	r := e.must(t, "POST", "/v1/refunds", map[string]any{"user_coupon_id": 999999, "order_id": "o1", "mode": "restore"})
	expectError(t, r, 404, "not_found")
	assert.Equal(t, before, e.ledgers(t))
}

// A coupon moved by a write outside the API (a legacy app, a person) to a
// state the refund cannot leave: illegal_transition naming both states,
// and nothing written.
func TestRefundOfACouponMovedUnderneath(t *testing.T) {
	e := newEnv(t)
	_, c := e.usedCoupon(t)
	_, err := e.db.Exec(`UPDATE user_coupon SET status = 3 WHERE id = ?`, c.UserCouponID)
	require.NoError(t, err)
	before := e.ledgers(t)
	r := e.must(t, "POST", "/v1/refunds", map[string]any{"user_coupon_id": c.UserCouponID, "order_id": "o1", "mode": "recycle"})
	assert.Contains(t, expectError(t, r, 409, "illegal_transition").Message, "EXPIRED -> RETURNED")
	r = e.must(t, "POST", "/v1/refunds", map[string]any{"user_coupon_id": c.UserCouponID, "order_id": "o1", "mode": "restore"})
	assert.Contains(t, expectError(t, r, 409, "illegal_transition").Message, "EXPIRED -> AVAILABLE")
	assert.Equal(t, before, e.ledgers(t))
}

// A void batch over every kind of coupon: each gets its own result, only
// the AVAILABLE ones move, each with its flow row (reason, operator,
// request_id); a replay answers the same and writes nothing; the same
// request_id with another payload is a conflict.
func TestVoidBatchWithMixedStates(t *testing.T) {
	e := newEnv(t)
	tpl := e.template(t, map[string]any{"valid_seconds": 60})
	var ids []int64
	for i := 0; i < 6; i++ {
		ids = append(ids, e.claim(t, tpl, fmt.Sprintf("u%d", i), "app").UserCouponID)
	}
	avail1, avail2, used, voided, recycled, expired := ids[0], ids[1], ids[2], ids[3], ids[4], ids[5]
	e.redeem(t, used, "o-used")
	require.Equal(t, coupon.VoidVoided, e.void(t, "v-earlier", voided).Results[0].Result)
	e.redeem(t, recycled, "o-rec")
	e.refund(t, recycled, "o-rec", "recycle")
	// expire only `expired`: the others are claimed later
	_, err := e.db.Exec(`UPDATE user_coupon SET expires_at = ? WHERE id = ?`, e.clock.Now(), expired)
	require.NoError(t, err)
	require.Equal(t, 1, e.expire(t, map[string]any{}).Expired)
	const missing = 999999

	batch := []int64{avail1, used, voided, recycled, expired, missing, avail2}
	before := e.ledgers(t)
	beforeOthers := map[int64]couponLedgers{}
	for _, id := range []int64{used, voided, recycled, expired} {
		beforeOthers[id] = e.couponLedgers(t, id)
	}
	var out voidReply
	body := map[string]any{"user_coupon_ids": batch, "reason": "fraud ring", "operator": "alice", "request_id": "v-1"}
	e.expect(t, 200, "POST", "/v1/voids", body, &out)
	type res struct {
		ID             int64
		Result, Status string
	}
	var got []res
	for _, r := range out.Results {
		got = append(got, res{r.UserCouponID, r.Result, r.Status})
	}
	want := []res{
		{avail1, "voided", "RETURNED"},
		{used, "illegal_transition", "USED"},
		{voided, "already_voided", "RETURNED"},
		{recycled, "illegal_transition", "RETURNED"},
		{expired, "illegal_transition", "EXPIRED"},
		{missing, "not_found", ""},
		{avail2, "voided", "RETURNED"},
	}
	assert.Equal(t, want, got)
	assert.Equal(t, map[string]int{"voided": 2, "illegal_transition": 3, "already_voided": 1, "not_found": 1}, out.Counts)
	assert.Equal(t, "v-1", out.RequestID)
	assert.Contains(t, out.Results[2].Message, "v-earlier")

	// the database: two voids with their flow rows, nothing else moved
	for _, id := range []int64{avail1, avail2} {
		assert.Equal(t, coupon.Returned, e.status(t, id))
		assert.Equal(t, []string{"void 1->4 fraud ring alice v-1"}, e.strings(t, `SELECT CONCAT_WS(' ', kind,
			CONCAT(from_status, '->', to_status), reason, operator, request_id) FROM inventory_flow WHERE user_coupon_id = ?`, id))
	}
	for id, b := range beforeOthers {
		assert.Equal(t, b, e.couponLedgers(t, id), "coupon %d is untouched", id)
	}
	assert.Equal(t, len(before.Flows)+2, e.count(t, `SELECT COUNT(*) FROM inventory_flow`))
	assert.Equal(t, before.Redemptions, e.ledgers(t).Redemptions)
	inv := e.inventory(t, tpl)
	assert.Equal(t, int64(4), inv.Returned)
	assert.True(t, inv.Conserved)

	// a replay, ids in another order: the same results, nothing written
	after := e.ledgers(t)
	var replay voidReply
	body["user_coupon_ids"] = []int64{avail2, missing, expired, recycled, voided, used, avail1}
	e.expect(t, 200, "POST", "/v1/voids", body, &replay)
	byID := map[int64]res{}
	for _, r := range replay.Results {
		byID[r.UserCouponID] = res{r.UserCouponID, r.Result, r.Status}
	}
	for _, w := range want {
		assert.Equal(t, w, byID[w.ID])
	}
	for i, r := range replay.Results {
		assert.Equal(t, r.Result == "voided", r.Replayed, "a voided result of a replay says so")
		assert.False(t, out.Results[i].Replayed)
	}
	assert.Equal(t, out.Counts, replay.Counts)
	assert.Equal(t, after, e.ledgers(t), "a replay writes nothing")

	// the same request_id with another payload
	for name, change := range map[string]func(map[string]any){
		"other ids":      func(b map[string]any) { b["user_coupon_ids"] = []int64{avail1} },
		"other reason":   func(b map[string]any) { b["reason"] = "typo" },
		"other operator": func(b map[string]any) { b["operator"] = "bob" },
	} {
		other := map[string]any{}
		for k, v := range body {
			other[k] = v
		}
		change(other)
		r := e.must(t, "POST", "/v1/voids", other)
		expectError(t, r, 409, "idempotency_conflict")
		assert.Equal(t, after, e.ledgers(t), name)
	}
	assert.Equal(t, 2, e.count(t, `SELECT COUNT(*) FROM void_request`))
}

// The sweep expires exactly the AVAILABLE coupons past expires_at, each
// with its flow row; `limit` bounds one sweep; coupons not yet due, and
// coupons in other states, stay as they are.
func TestExpirySweep(t *testing.T) {
	e := newEnv(t)
	short := e.template(t, map[string]any{"valid_seconds": 1})
	long := e.template(t, map[string]any{"valid_seconds": 100})
	var shortIDs, longIDs []int64
	for i := 0; i < 5; i++ {
		shortIDs = append(shortIDs, e.claim(t, short, fmt.Sprintf("u%d", i), "app").UserCouponID)
	}
	for i := 0; i < 3; i++ {
		longIDs = append(longIDs, e.claim(t, long, fmt.Sprintf("u%d", i), "sms").UserCouponID)
	}
	usedShort := e.claim(t, short, "u-used", "app").UserCouponID
	e.redeem(t, usedShort, "o1")

	// nothing is due yet (expires_at is not in the past)
	e.clock.Advance(time.Second - time.Microsecond)
	assert.Equal(t, expireReply{}, e.expire(t, map[string]any{}))
	assert.Equal(t, 0, e.count(t, `SELECT COUNT(*) FROM inventory_flow`))

	e.clock.Advance(time.Microsecond) // now == expires_at of the short ones: due
	assert.Equal(t, expireReply{Expired: 2, More: true}, e.expire(t, map[string]any{"limit": 2}))
	assert.Equal(t, 2, e.count(t, `SELECT COUNT(*) FROM user_coupon WHERE status = 3`))
	assert.Equal(t, expireReply{Expired: 3, More: false}, e.expire(t, rawBody(`{"limit": 10}`)))
	assert.Equal(t, expireReply{}, e.expire(t, nil), "an empty body is a sweep with no limit")

	for _, id := range shortIDs {
		assert.Equal(t, coupon.Expired, e.status(t, id))
		// seq is the version the coupon expired from: a fresh claim is version 1
		assert.Equal(t, []string{"expire 1 1->3"}, e.strings(t, `SELECT CONCAT_WS(' ', kind, seq, CONCAT(from_status, '->', to_status))
			FROM inventory_flow WHERE user_coupon_id = ?`, id))
	}
	for _, id := range longIDs {
		assert.Equal(t, coupon.Available, e.status(t, id), "not due yet")
	}
	assert.Equal(t, coupon.Used, e.status(t, usedShort), "a USED coupon never expires")
	inv := e.inventory(t, short)
	assert.Equal(t, [5]int64{100 - 6, 0, 1, 5, 5}, [5]int64{inv.Claimable, inv.Held, inv.Used, inv.Expired, inv.Frozen})
	assert.True(t, inv.Conserved)

	// a due coupon cannot be redeemed even before the sweep
	e.clock.Advance(100 * time.Second)
	before := e.ledgers(t)
	r := e.must(t, "POST", "/v1/redemptions", map[string]any{"user_coupon_id": longIDs[0], "order_id": "late"})
	expectError(t, r, 409, "coupon_expired")
	assert.Equal(t, before, e.ledgers(t))
	assert.Equal(t, expireReply{Expired: 3}, e.expire(t, map[string]any{}))
	for _, id := range longIDs {
		assert.Equal(t, coupon.Expired, e.status(t, id))
	}
	assert.Equal(t, 8, e.count(t, `SELECT COUNT(*) FROM inventory_flow WHERE kind = 'expire'`))
}

// A claim's request_id is bound to its payload: a replay is the same
// coupon (200, nothing written), any other template, user or channel is
// idempotency_conflict.
func TestClaimIdempotency(t *testing.T) { claimIdempotency(t, newEnv(t)) }

func claimIdempotency(t *testing.T, e *env) {
	tpl := e.template(t, map[string]any{"per_user_limit": 5})
	other := e.template(t, nil)
	body := map[string]any{"template_id": tpl, "user_id": "u1", "channel": "app", "request_id": "req-1"}
	var first, again claimReply
	e.expect(t, 201, "POST", "/v1/claims", body, &first)
	assert.False(t, first.Replayed)
	before := e.ledgers(t)
	e.expect(t, 200, "POST", "/v1/claims", body, &again)
	assert.True(t, again.Replayed)
	assert.Equal(t, first.UserCouponID, again.UserCouponID)
	assert.True(t, first.ExpiresAt.Equal(again.ExpiresAt))
	assert.Equal(t, before, e.ledgers(t))

	for name, change := range map[string][2]any{
		"another user":     {"user_id", "u2"},
		"another channel":  {"channel", "sms"},
		"another template": {"template_id", other},
	} {
		b := map[string]any{}
		for k, v := range body {
			b[k] = v
		}
		b[change[0].(string)] = change[1]
		r := e.must(t, "POST", "/v1/claims", b)
		assert.Contains(t, expectError(t, r, 409, "idempotency_conflict").Message, "req-1", name)
		assert.Equal(t, before, e.ledgers(t), name)
	}
}

// The redemption key is (order, coupon): the same pair is a replay of the
// first redemption, and writes nothing.
func TestRedemptionReplay(t *testing.T) { redemptionReplay(t, newEnv(t)) }

func redemptionReplay(t *testing.T, e *env) {
	tpl := e.template(t, nil)
	c := e.claim(t, tpl, "u1", "app")
	first := e.redeem(t, c.UserCouponID, "o1")
	before := e.ledgers(t)
	var again redeemReply
	e.expect(t, 200, "POST", "/v1/redemptions", map[string]any{"user_coupon_id": c.UserCouponID, "order_id": "o1"}, &again)
	assert.Equal(t, first.RedemptionID, again.RedemptionID)
	assert.True(t, again.Replayed)
	assert.Equal(t, before, e.ledgers(t))
	assert.Equal(t, 1, e.count(t, `SELECT COUNT(*) FROM redemption_log WHERE idempotency_key = ?`, fmt.Sprintf("o1/%d", c.UserCouponID)))
}

type historyEvent struct {
	At           time.Time `json:"at"`
	Event        string    `json:"event"`
	From         string    `json:"from"`
	To           string    `json:"to"`
	OrderID      string    `json:"order_id"`
	RedemptionID int64     `json:"redemption_id"`
	Mode         string    `json:"mode"`
	Reason       string    `json:"reason"`
	Operator     string    `json:"operator"`
}

type historyReply struct {
	UserCouponID int64          `json:"user_coupon_id"`
	Status       string         `json:"status"`
	Events       []historyEvent `json:"events"`
}

// The life of one coupon, claim -> redeem -> refund restore -> redeem ->
// refund recycle, told from the ledgers oldest first, with orders and modes.
func TestHistory(t *testing.T) {
	for _, clock := range []string{"ticking", "frozen"} {
		t.Run(clock, func(t *testing.T) {
			e := newEnv(t)
			step := time.Second
			if clock == "frozen" {
				step = 0 // every event at the same instant: the ledgers still tell the order
			}
			start := e.clock.Now()
			tpl := e.template(t, nil)
			c := e.claim(t, tpl, "u1", "app")
			e.clock.Advance(step)
			r1 := e.redeem(t, c.UserCouponID, "o1")
			e.clock.Advance(step)
			e.refund(t, c.UserCouponID, "o1", "restore")
			e.clock.Advance(step)
			r2 := e.redeem(t, c.UserCouponID, "o2")
			e.clock.Advance(step)
			e.refund(t, c.UserCouponID, "o2", "recycle")

			var h historyReply
			e.expect(t, 200, "GET", fmt.Sprintf("/v1/user-coupons/%d/history", c.UserCouponID), nil, &h)
			assert.Equal(t, "RETURNED", h.Status)
			at := func(i int) time.Time { return start.Add(time.Duration(i) * step) }
			assert.Equal(t, []historyEvent{
				{At: at(0), Event: "claimed", From: "NONE", To: "AVAILABLE"},
				{At: at(1), Event: "redeemed", From: "AVAILABLE", To: "USED", OrderID: "o1", RedemptionID: r1.RedemptionID},
				{At: at(2), Event: "refunded", From: "USED", To: "AVAILABLE", OrderID: "o1", RedemptionID: r1.RedemptionID, Mode: "restore"},
				{At: at(3), Event: "redeemed", From: "AVAILABLE", To: "USED", OrderID: "o2", RedemptionID: r2.RedemptionID},
				{At: at(4), Event: "refunded", From: "USED", To: "RETURNED", OrderID: "o2", RedemptionID: r2.RedemptionID, Mode: "recycle"},
			}, h.Events)
		})
	}
}

// Expiry and void are told too, with the operator and the reason.
func TestHistoryOfExpiryAndVoid(t *testing.T) {
	e := newEnv(t)
	tpl := e.template(t, map[string]any{"valid_seconds": 10})
	a := e.claim(t, tpl, "u1", "app")
	b := e.claim(t, tpl, "u2", "app")
	e.void(t, "v-1", b.UserCouponID)
	e.clock.Advance(time.Minute)
	e.expire(t, nil)
	var h historyReply
	e.expect(t, 200, "GET", fmt.Sprintf("/v1/user-coupons/%d/history", a.UserCouponID), nil, &h)
	require.Len(t, h.Events, 2)
	assert.Equal(t, [3]string{"expired", "AVAILABLE", "EXPIRED"}, [3]string{h.Events[1].Event, h.Events[1].From, h.Events[1].To})
	e.expect(t, 200, "GET", fmt.Sprintf("/v1/user-coupons/%d/history", b.UserCouponID), nil, &h)
	require.Len(t, h.Events, 2)
	assert.Equal(t, historyEvent{At: e.clock.Now().Add(-time.Minute), Event: "voided", From: "AVAILABLE", To: "RETURNED",
		Reason: "fraud", Operator: "ops-1"}, h.Events[1])
	r := e.must(t, "GET", "/v1/user-coupons/424242/history", nil)
	expectError(t, r, http.StatusNotFound, "not_found")
}

// A release (written by the cdc, not the API: the slot of an expired coupon
// goes back to its bucket) counts in the inventory: claimable goes up,
// frozen goes down, conservation holds, and the slot can be claimed again.
func TestInventoryCountsReleases(t *testing.T) {
	e := newEnv(t)
	tpl := e.template(t, map[string]any{"total_quota": 2, "channels": map[string]int{"app": 2}, "valid_seconds": 1, "expiry_policy": "release"})
	a := e.claim(t, tpl, "u1", "app")
	e.claim(t, tpl, "u2", "app")
	e.clock.Advance(2 * time.Second)
	require.Equal(t, 2, e.expire(t, nil).Expired)
	r := e.must(t, "POST", "/v1/claims", map[string]any{"template_id": tpl, "user_id": "u3", "channel": "app", "request_id": "r-3"})
	expectError(t, r, 409, "sold_out")
	inv := e.inventory(t, tpl)
	assert.Equal(t, view.Counts{Quota: 2, Claimed: 2, Expired: 2}, inv.Channels["app"])

	// what the cdc does for a release, in one transaction
	tx, err := e.db.Begin()
	require.NoError(t, err)
	_, err = tx.Exec(`UPDATE channel_quota SET claimed = claimed - 1 WHERE template_id = ? AND channel = 'app'`, tpl)
	require.NoError(t, err)
	_, err = tx.Exec(`INSERT INTO inventory_flow (user_coupon_id, kind, seq, template_id, channel, from_status, to_status, reason, created_at)
		VALUES (?, 'release', 0, ?, 'app', 3, 3, 'cooldown over', ?)`, a.UserCouponID, tpl, e.clock.Now())
	require.NoError(t, err)
	require.NoError(t, tx.Commit())

	inv = e.inventory(t, tpl)
	assert.Equal(t, view.Counts{Quota: 2, Claimed: 1, Expired: 2, Released: 1}, inv.Channels["app"])
	assert.Equal(t, inv.Channels["app"], inv.Counts)
	assert.True(t, inv.Conserved)
	e.claim(t, tpl, "u3", "app")
	inv = e.inventory(t, tpl)
	assert.Equal(t, view.Counts{Quota: 2, Claimed: 2, Held: 1, Expired: 2, Released: 1}, inv.Channels["app"])
	assert.True(t, inv.Conserved)

	var h historyReply
	e.expect(t, 200, "GET", fmt.Sprintf("/v1/user-coupons/%d/history", a.UserCouponID), nil, &h)
	require.Len(t, h.Events, 3)
	assert.Equal(t, [2]string{"expired", "released"}, [2]string{h.Events[1].Event, h.Events[2].Event})
	assert.Equal(t, "cooldown over", h.Events[2].Reason)
}
