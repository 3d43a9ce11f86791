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

// A coupon brought into a state for real, through the API.
type realCoupon struct {
	id        int64
	template  int64
	requestID string // of its claim
	user      string
}

// The states a coupon can reach, each with the path that leads there.
// "o1" is the order that redeemed it, where one did.
var reachedStates = []struct {
	name  string
	state coupon.Status
	setup func(t *testing.T, e *env, c realCoupon)
}{
	{"AVAILABLE", coupon.Available, func(t *testing.T, e *env, c realCoupon) {}},
	{"AVAILABLE_restored", coupon.Available, func(t *testing.T, e *env, c realCoupon) {
		e.redeem(t, c.id, "o1")
		e.refund(t, c.id, "o1", "restore")
	}},
	{"AVAILABLE_due", coupon.Available, func(t *testing.T, e *env, c realCoupon) {
		e.clock.Advance(2 * time.Second) // past expires_at, not swept yet
	}},
	{"USED", coupon.Used, func(t *testing.T, e *env, c realCoupon) {
		e.redeem(t, c.id, "o1")
	}},
	{"EXPIRED", coupon.Expired, func(t *testing.T, e *env, c realCoupon) {
		e.clock.Advance(2 * time.Second)
		require.Equal(t, 1, e.expire(t, map[string]any{}).Expired)
	}},
	{"EXPIRED_restored", coupon.Expired, func(t *testing.T, e *env, c realCoupon) {
		e.redeem(t, c.id, "o1")
		e.refund(t, c.id, "o1", "restore")
		e.clock.Advance(2 * time.Second)
		require.Equal(t, 1, e.expire(t, map[string]any{}).Expired)
	}},
	{"RETURNED_void", coupon.Returned, func(t *testing.T, e *env, c realCoupon) {
		require.Equal(t, coupon.VoidVoided, e.void(t, uniq("void"), c.id).Results[0].Result)
	}},
	{"RETURNED_recycle", coupon.Returned, func(t *testing.T, e *env, c realCoupon) {
		e.redeem(t, c.id, "o1")
		e.refund(t, c.id, "o1", "recycle")
	}},
}

// The actions, as API calls on one coupon.
var apiActions = []struct {
	name   string
	target coupon.Status // where the action leads when legal
	call   func(e *env, c realCoupon) (reply, error)
}{
	{"claim_again", coupon.Available, func(e *env, c realCoupon) (reply, error) {
		return e.api.do("POST", "/v1/claims", map[string]any{"template_id": c.template, "user_id": c.user, "channel": "app", "request_id": c.requestID})
	}},
	{"redeem_new_order", coupon.Used, func(e *env, c realCoupon) (reply, error) {
		return e.api.do("POST", "/v1/redemptions", map[string]any{"user_coupon_id": c.id, "order_id": uniq("order")})
	}},
	{"redeem_o1", coupon.Used, func(e *env, c realCoupon) (reply, error) {
		return e.api.do("POST", "/v1/redemptions", map[string]any{"user_coupon_id": c.id, "order_id": "o1"})
	}},
	{"refund_restore_o1", coupon.Available, func(e *env, c realCoupon) (reply, error) {
		return e.api.do("POST", "/v1/refunds", map[string]any{"user_coupon_id": c.id, "order_id": "o1", "mode": "restore"})
	}},
	{"refund_recycle_o1", coupon.Returned, func(e *env, c realCoupon) (reply, error) {
		return e.api.do("POST", "/v1/refunds", map[string]any{"user_coupon_id": c.id, "order_id": "o1", "mode": "recycle"})
	}},
	{"refund_other_order", coupon.Available, func(e *env, c realCoupon) (reply, error) {
		return e.api.do("POST", "/v1/refunds", map[string]any{"user_coupon_id": c.id, "order_id": "o-other", "mode": "restore"})
	}},
	{"void", coupon.Returned, func(e *env, c realCoupon) (reply, error) {
		return e.api.do("POST", "/v1/voids", map[string]any{"user_coupon_ids": []int64{c.id}, "reason": "r", "operator": "op", "request_id": uniq("void")})
	}},
	{"expire", coupon.Expired, func(e *env, c realCoupon) (reply, error) {
		e.clock.Advance(2 * time.Second)
		return e.api.do("POST", "/v1/expire", map[string]any{})
	}},
}

// outcome is what an action on a state must do.
type outcome struct {
	status int           // HTTP status
	code   string        // the error code of a 409, or the void result
	to     coupon.Status // a legal transition's new state; None: nothing is written
}

var (
	replay        = outcome{status: 200}
	voidIllegal   = outcome{status: 200, code: coupon.VoidIllegalTransition}
	noneDue       = outcome{status: 200}
	illegal       = outcome{status: 409, code: "illegal_transition"}
	orderMismatch = outcome{status: 409, code: "order_mismatch"}
	idemConflict  = outcome{status: 409, code: "idempotency_conflict"}
	refunded      = outcome{status: 409, code: "already_refunded"} // o1's redemption was refunded: final
)

// expected[state][action]; every cell is spelled out.
var expected = map[string]map[string]outcome{
	"AVAILABLE": {
		"claim_again": replay, "redeem_new_order": {201, "", coupon.Used}, "redeem_o1": {201, "", coupon.Used},
		"refund_restore_o1": orderMismatch, "refund_recycle_o1": orderMismatch, "refund_other_order": orderMismatch,
		"void": {200, coupon.VoidVoided, coupon.Returned}, "expire": {200, "", coupon.Expired},
	},
	"AVAILABLE_restored": {
		"claim_again": replay, "redeem_new_order": {201, "", coupon.Used}, "redeem_o1": refunded,
		"refund_restore_o1": replay, "refund_recycle_o1": idemConflict, "refund_other_order": orderMismatch,
		"void": {200, coupon.VoidVoided, coupon.Returned}, "expire": {200, "", coupon.Expired},
	},
	"AVAILABLE_due": {
		"claim_again": replay, "redeem_new_order": {409, "coupon_expired", coupon.None}, "redeem_o1": {409, "coupon_expired", coupon.None},
		"refund_restore_o1": orderMismatch, "refund_recycle_o1": orderMismatch, "refund_other_order": orderMismatch,
		"void": {200, coupon.VoidVoided, coupon.Returned}, "expire": {200, "", coupon.Expired},
	},
	"USED": {
		"claim_again": replay, "redeem_new_order": {409, "already_used", coupon.None}, "redeem_o1": replay,
		"refund_restore_o1": {200, "", coupon.Available}, "refund_recycle_o1": {200, "", coupon.Returned}, "refund_other_order": orderMismatch,
		"void": voidIllegal, "expire": noneDue,
	},
	"EXPIRED": {
		"claim_again": replay, "redeem_new_order": illegal, "redeem_o1": illegal,
		"refund_restore_o1": orderMismatch, "refund_recycle_o1": orderMismatch, "refund_other_order": orderMismatch,
		"void": voidIllegal, "expire": noneDue,
	},
	"EXPIRED_restored": {
		"claim_again": replay, "redeem_new_order": illegal, "redeem_o1": refunded,
		"refund_restore_o1": replay, "refund_recycle_o1": idemConflict, "refund_other_order": orderMismatch,
		"void": voidIllegal, "expire": noneDue,
	},
	"RETURNED_void": {
		"claim_again": replay, "redeem_new_order": illegal, "redeem_o1": illegal,
		"refund_restore_o1": orderMismatch, "refund_recycle_o1": orderMismatch, "refund_other_order": orderMismatch,
		"void": {200, coupon.VoidAlreadyVoided, coupon.None}, "expire": noneDue,
	},
	"RETURNED_recycle": {
		"claim_again": replay, "redeem_new_order": illegal, "redeem_o1": refunded,
		"refund_restore_o1": idemConflict, "refund_recycle_o1": replay, "refund_other_order": orderMismatch,
		"void": voidIllegal, "expire": noneDue,
	},
}

// The inventory_flow kind each reverse movement writes.
var flowKind = map[string]string{"void": "void", "expire": "expire", "refund_restore_o1": "refund", "refund_recycle_o1": "refund"}

// The quota effect of each legal transition, as inventory deltas
// (held, used, expired, returned); claimable never moves after the claim.
var inventoryDelta = map[coupon.Status]map[coupon.Status][4]int64{
	coupon.Available: {coupon.Used: {-1, 1, 0, 0}, coupon.Expired: {-1, 0, 1, 0}, coupon.Returned: {-1, 0, 0, 1}},
	coupon.Used:      {coupon.Available: {1, -1, 0, 0}, coupon.Returned: {0, -1, 0, 1}},
}

// For every state reached for real, every action through the API: a legal
// one makes its transition with its ledger row and quota effect; any other
// is refused with its code (or replays) and writes nothing at all.
func TestEveryActionOnEveryReachedState(t *testing.T) { everyActionOnEveryReachedState(t, newEnv(t)) }

func everyActionOnEveryReachedState(t *testing.T, e *env) {
	tpl := e.template(t, map[string]any{"total_quota": 10000, "channels": map[string]int{"app": 10000}, "valid_seconds": 1})
	for _, st := range reachedStates {
		for _, act := range apiActions {
			t.Run(st.name+"/"+act.name, func(t *testing.T) {
				want, ok := expected[st.name][act.name]
				require.True(t, ok, "no expectation for this cell")
				// nothing else is due: this coupon is the only one a sweep may touch
				e.clock.Advance(2 * time.Second)
				e.expire(t, map[string]any{})

				c := realCoupon{template: tpl, requestID: uniq("claim"), user: uniq("user")}
				var cl claimReply
				e.expect(t, 201, "POST", "/v1/claims", map[string]any{"template_id": tpl, "user_id": c.user, "channel": "app", "request_id": c.requestID}, &cl)
				c.id = cl.UserCouponID
				st.setup(t, e, c)
				require.Equal(t, st.state, e.status(t, c.id), "setup")

				before, beforeOne, inv := e.ledgers(t), e.couponLedgers(t, c.id), e.inventory(t, tpl)
				var version int64
				require.NoError(t, e.db.QueryRow(`SELECT version FROM user_coupon WHERE id = ?`, c.id).Scan(&version))

				r, err := act.call(e, c)
				require.NoError(t, err)
				require.Equal(t, want.status, r.Status, "reply %s", r)

				if want.status == 409 {
					ae := expectError(t, r, 409, want.code)
					if want.code == "illegal_transition" {
						assert.Contains(t, ae.Message, fmt.Sprintf("%s -> %s", st.state, act.target))
					}
				}
				switch act.name {
				case "void":
					var v voidReply
					require.NoError(t, r.decode(&v))
					require.Len(t, v.Results, 1)
					assert.Equal(t, want.code, v.Results[0].Result)
					if want.code == coupon.VoidIllegalTransition {
						assert.Contains(t, v.Results[0].Message, fmt.Sprintf("%s -> %s", st.state, act.target))
					}
				case "expire":
					var x expireReply
					require.NoError(t, r.decode(&x))
					assert.Equal(t, map[bool]int{true: 1, false: 0}[want.to == coupon.Expired], x.Expired)
				}
				if want.status == 200 && want.to == coupon.None && act.name != "void" && act.name != "expire" {
					// a claim or redemption replay answers with the coupon's state
					// as it is now; a refund replay with the state the refund made
					var s struct{ Status string }
					require.NoError(t, r.decode(&s))
					if flowKind[act.name] == "refund" {
						assert.Equal(t, act.target.String(), s.Status)
					} else {
						assert.Equal(t, st.state.String(), s.Status)
					}
				}

				if want.to == coupon.None {
					assert.Equal(t, before, e.ledgers(t), "nothing may be written")
					assert.Equal(t, st.state, e.status(t, c.id))
					return
				}
				// the legal transition, with its ledger row and quota effect
				after := e.couponLedgers(t, c.id)
				assert.Equal(t, want.to, e.status(t, c.id))
				var v2 int64
				require.NoError(t, e.db.QueryRow(`SELECT version FROM user_coupon WHERE id = ?`, c.id).Scan(&v2))
				assert.Equal(t, version+1, v2, "one version step")
				newRedemptions, newFlows := len(after.Redemptions)-len(beforeOne.Redemptions), len(after.Flows)-len(beforeOne.Flows)
				if want.to == coupon.Used {
					assert.Equal(t, [2]int{1, 0}, [2]int{newRedemptions, newFlows})
				} else {
					assert.Equal(t, [2]int{0, 1}, [2]int{newRedemptions, newFlows})
					var kind string
					var from, to coupon.Status
					require.NoError(t, e.db.QueryRow(`SELECT kind, from_status, to_status FROM inventory_flow
						WHERE user_coupon_id = ? ORDER BY id DESC LIMIT 1`, c.id).Scan(&kind, &from, &to))
					assert.Equal(t, [2]coupon.Status{st.state, want.to}, [2]coupon.Status{from, to})
					assert.Equal(t, flowKind[act.name], kind)
				}
				d := inventoryDelta[st.state][want.to]
				inv2 := e.inventory(t, tpl)
				assert.Equal(t, [5]int64{inv.Claimable, inv.Held + d[0], inv.Used + d[1], inv.Expired + d[2], inv.Returned + d[3]},
					[5]int64{inv2.Claimable, inv2.Held, inv2.Used, inv2.Expired, inv2.Returned})
				assert.True(t, inv2.Conserved)
			})
		}
	}
}

// A claim is the one transition from no row: it reserves a slot.
func TestClaimReservesASlot(t *testing.T) { claimReservesASlot(t, newEnv(t)) }

func claimReservesASlot(t *testing.T, e *env) {
	tpl := e.template(t, map[string]any{"total_quota": 3, "channels": map[string]int{"app": 2, "sms": 1}})
	inv := e.inventory(t, tpl)
	assert.Equal(t, [3]int64{3, 3, 0}, [3]int64{inv.TotalQuota, inv.Claimable, inv.Held})
	c := e.claim(t, tpl, "u1", "sms")
	assert.Equal(t, coupon.Available, e.status(t, c.UserCouponID))
	assert.Equal(t, e.clock.Now().Add(time.Hour), c.ExpiresAt)
	inv = e.inventory(t, tpl)
	assert.Equal(t, [2]int64{2, 1}, [2]int64{inv.Claimable, inv.Held})
	assert.Equal(t, view.Counts{Quota: 1, Claimed: 1, Held: 1}, inv.Channels["sms"])
	assert.Equal(t, view.Counts{Quota: 2}, inv.Channels["app"])
	assert.Equal(t, 1, e.count(t, `SELECT claimed FROM channel_quota WHERE template_id = ? AND channel = 'sms'`, tpl))

	// the sms bucket is empty now, app is not
	before := e.ledgers(t)
	r := e.must(t, "POST", "/v1/claims", map[string]any{"template_id": tpl, "user_id": "u2", "channel": "sms", "request_id": "r-sold"})
	expectError(t, r, http.StatusConflict, "sold_out")
	assert.Equal(t, before, e.ledgers(t), "a refused claim writes nothing (not even the per-user count)")
	e.claim(t, tpl, "u2", "app")

	// the per-user limit (default 1)
	before = e.ledgers(t)
	r = e.must(t, "POST", "/v1/claims", map[string]any{"template_id": tpl, "user_id": "u1", "channel": "app", "request_id": "r-limit"})
	expectError(t, r, http.StatusConflict, "limit_reached")
	assert.Equal(t, before, e.ledgers(t))
}
