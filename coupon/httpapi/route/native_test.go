package route_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/coupon/httpapi"
	"github.com/couponlink/couponlink/coupon/primaries"
	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/reconcile"
)

// Templates over two primaries and claims through one API: templates are
// placed by the rule (fewest templates, or ?primary=) and live on their
// primary alone; concurrent claims for templates of both primaries keep
// each primary's guard (channel_quota.claimed = its coupons) and the id
// rule; redemptions, refunds and histories by coupon id reach the owner; a
// void batch over both primaries is answered per coupon in the caller's
// order, idempotent on replay, and refused whole when its request_id is
// reused for another batch; an expiry sweep sums both; one cdc per primary
// keeps that primary's counters and Redis keys equal to its truth, and one
// reconciler per primary proves it and fixes a drift on its primary alone.
func TestNativeOverTwoPrimaries(t *testing.T) {
	e := newNative(t, 2)
	tpls := e.placeTemplates()
	for _, env := range e.envs {
		env.StartCDC(nil)
	}
	coupons := e.claimConcurrently(tpls[:4])
	a0, a1 := coupons[tpls[0]], coupons[tpls[1]] // coupons of p0 and p1
	e.redeemAndRefund(a0[0], a1[0])
	e.voidOverBoth(a0, a1)
	e.expireOverBoth()
	for k, env := range e.envs {
		env.Settle()
		truth := env.Truth()
		require.NotEmpty(t, truth, "primary %d", k)
		for pair := range truth {
			assert.Equal(t, k, primaries.Owner(pair.Template, 2), "template %d counted on primary %d", pair.Template, k)
		}
		assert.Equal(t, truth, env.Counters(), "primary %d: inventory_counter differs from its truth", k)
	}
	e.reconcileEach(tpls[1])
	e.sameErrors()
	// the inventory route reads the owner's counters
	for _, tpl := range tpls[:2] {
		code, body := e.do(request{method: http.MethodGet, path: fmt.Sprintf("/v1/templates/%d/inventory", tpl)})
		require.Equal(t, http.StatusOK, code, "%s", body)
		assert.Contains(t, string(body), fmt.Sprintf(`"template_id":%d`, tpl))
	}
}

type template struct {
	ID int64 `json:"id"`
}

// placeTemplates creates four templates (they alternate: the fewest
// templates wins, the first primary on a tie) and one on ?primary=p1.
func (e *native) placeTemplates() []int64 {
	t := e.t
	body := map[string]any{"name": "spring", "total_quota": 40, "channels": map[string]int64{"app": 20, "web": 20},
		"valid_seconds": 3600}
	var ids []int64
	for range 4 {
		var tpl template
		e.post("/v1/templates", body, http.StatusCreated, &tpl)
		ids = append(ids, tpl.ID)
	}
	var tpl template
	e.post("/v1/templates?primary=p1", body, http.StatusCreated, &tpl)
	ids = append(ids, tpl.ID)
	require.Equal(t, []int64{1, 2, 3, 4, 6}, ids, "p0, p1, p0, p1, then p1 by name")
	for _, id := range ids {
		for k := range e.pools {
			want := int64(0)
			if k == primaries.Owner(id, 2) {
				want = 1
			}
			assert.Equal(t, want, e.count(k, "SELECT COUNT(*) FROM coupon_template WHERE id = ?", id), "template %d on p%d", id, k)
			assert.Equal(t, 2*want, e.count(k, "SELECT COUNT(*) FROM channel_quota WHERE template_id = ?", id), "buckets of %d on p%d", id, k)
		}
	}
	code, got := e.do(request{method: http.MethodPost, path: "/v1/templates?primary=p9", body: `{"name":"x"}`})
	assert.Equal(t, http.StatusBadRequest, code)
	assert.JSONEq(t, `{"error":{"code":"invalid_argument","field":"primary","message":"unknown primary \"p9\"; the primaries are p0, p1"}}`, string(got))
	return ids
}

// claimConcurrently sends 60 claims per template at once (40 slots each:
// 20 per channel) and checks the guards and the rule on each primary. It
// returns the coupons of each template.
func (e *native) claimConcurrently(tpls []int64) map[int64][]int64 {
	t := e.t
	var mu sync.Mutex
	got := map[int64][]int64{}
	var replay map[string]any // a claim that succeeded
	soldOut := map[int64]int{}
	var wg sync.WaitGroup
	for i := range 60 * len(tpls) {
		tpl := tpls[i%len(tpls)]
		channel := []string{"app", "web"}[i/len(tpls)%2]
		wg.Go(func() {
			b, _ := json.Marshal(map[string]any{"template_id": tpl, "user_id": fmt.Sprint("u", i), "channel": channel, "request_id": fmt.Sprint("c", i)})
			code, body := e.do(request{method: http.MethodPost, path: "/v1/claims", body: string(b)})
			mu.Lock()
			defer mu.Unlock()
			switch code {
			case http.StatusCreated:
				var c coupon.Claim
				assert.NoError(t, json.Unmarshal(body, &c))
				got[tpl] = append(got[tpl], c.UserCouponID)
				if tpl == tpls[1] && replay == nil {
					replay = map[string]any{"template_id": tpl, "user_id": fmt.Sprint("u", i), "channel": channel, "request_id": fmt.Sprint("c", i),
						"coupon": c.UserCouponID}
				}
			case http.StatusConflict:
				assert.Contains(t, string(body), `"sold_out"`)
				soldOut[tpl]++
			default:
				t.Errorf("claim: %d %s", code, body)
			}
		})
	}
	wg.Wait()
	for _, tpl := range tpls {
		assert.Len(t, got[tpl], 40, "template %d", tpl)
		assert.Equal(t, 20, soldOut[tpl], "template %d", tpl)
		for _, id := range got[tpl] {
			assert.Equal(t, primaries.Owner(tpl, 2), primaries.Owner(id, 2), "coupon %d of template %d", id, tpl)
		}
	}
	for k := range e.pools {
		claimed := e.count(k, "SELECT COALESCE(SUM(claimed), 0) FROM channel_quota")
		assert.Equal(t, int64(80), claimed, "p%d: two templates of 40", k)
		assert.Equal(t, claimed, e.count(k, "SELECT COUNT(*) FROM user_coupon"), "p%d: claimed = its coupons", k)
		assert.Zero(t, e.count(k, "SELECT COUNT(*) FROM user_coupon WHERE MOD(id - 1, 2) <> ? OR MOD(template_id - 1, 2) <> ?", k, k), "p%d", k)
	}
	// a retried claim answers its coupon again, from the template's primary
	var c coupon.Claim
	want := replay["coupon"]
	delete(replay, "coupon")
	e.post("/v1/claims", replay, http.StatusOK, &c)
	assert.Equal(t, want, c.UserCouponID)
	return got
}

// redeemAndRefund redeems, replays, refunds and redeems again a coupon of
// each primary through the front, then reads their histories.
func (e *native) redeemAndRefund(coupons ...int64) {
	t := e.t
	for _, id := range coupons {
		k := primaries.Owner(id, 2)
		order := fmt.Sprint("o-", id)
		e.post("/v1/redemptions", map[string]any{"user_coupon_id": id, "order_id": order}, http.StatusCreated, nil)
		e.post("/v1/redemptions", map[string]any{"user_coupon_id": id, "order_id": order}, http.StatusOK, nil)
		assert.Equal(t, int64(1), e.count(k, "SELECT COUNT(*) FROM redemption_log WHERE user_coupon_id = ?", id))
		e.post("/v1/refunds", map[string]any{"user_coupon_id": id, "order_id": order, "mode": "restore"}, http.StatusOK, nil)
		assert.Equal(t, "AVAILABLE", e.status(k, id))
		e.post("/v1/redemptions", map[string]any{"user_coupon_id": id, "order_id": order + "-2"}, http.StatusCreated, nil)

		code, body := e.do(request{method: http.MethodGet, path: fmt.Sprintf("/v1/user-coupons/%d/history", id)})
		require.Equal(t, http.StatusOK, code, "%s", body)
		var h coupon.History
		require.NoError(t, json.Unmarshal(body, &h))
		var events []string
		for _, ev := range h.Events {
			events = append(events, ev.Event)
		}
		assert.Equal(t, []string{"claimed", "redeemed", "refunded", "redeemed"}, events, "coupon %d", id)
	}
	for k := range e.pools {
		assert.Equal(t, []int64{coupons[k], coupons[k]}, e.ids(k, "SELECT user_coupon_id FROM redemption_log"), "p%d: its coupon's two redemptions only", k)
	}
}

// voidOverBoth voids a batch naming coupons of both primaries (and ids
// that exist nowhere, and a USED coupon), replays it, and reuses its
// request_id for another batch.
func (e *native) voidOverBoth(a0, a1 []int64) {
	t := e.t
	used := a0[0] // redeemed by redeemAndRefund
	ids := []int64{a1[1], a0[1], used, 1_000_001, 1_000_002, a1[2], a0[2]}
	batch := map[string]any{"user_coupon_ids": ids, "reason": "fraud ring", "operator": "ops-ann", "request_id": "v-17"}
	want := []string{"voided", "voided", "illegal_transition", "not_found", "not_found", "voided", "voided"}
	check := func(replayed bool) {
		var res httpapi.VoidResponse
		e.post("/v1/voids", batch, http.StatusOK, &res)
		assert.Equal(t, "v-17", res.RequestID)
		require.Len(t, res.Results, len(ids))
		for i, r := range res.Results {
			assert.Equal(t, ids[i], r.UserCouponID, "result %d in the caller's order", i)
			assert.Equal(t, want[i], r.Result, "coupon %d", ids[i])
			assert.Equal(t, replayed && want[i] == "voided", r.Replayed, "coupon %d", ids[i])
		}
		assert.Equal(t, map[string]int{"voided": 4, "illegal_transition": 1, "not_found": 2}, res.Counts)
		for k := range e.pools {
			assert.Equal(t, int64(2), e.count(k, "SELECT COUNT(*) FROM inventory_flow WHERE kind = 'void' AND request_id = 'v-17'"), "p%d", k)
		}
	}
	check(false)
	check(true) // a replay writes nothing and answers the same
	for _, id := range []int64{a1[1], a0[1], a1[2], a0[2]} {
		assert.Equal(t, "RETURNED", e.status(primaries.Owner(id, 2), id))
	}
	// the same request_id for another batch, one more coupon on either
	// primary (so once where the batch was recorded, once elsewhere):
	// refused whole, nothing written anywhere
	for _, more := range []int64{a0[3], a1[3]} {
		batch["user_coupon_ids"] = append(slices.Clone(ids), more)
		code, body := e.do(request{method: http.MethodPost, path: "/v1/voids", body: string(must(json.Marshal(batch)))})
		assert.Equal(t, http.StatusConflict, code)
		assert.Contains(t, string(body), `"idempotency_conflict"`)
		assert.Equal(t, "AVAILABLE", e.status(primaries.Owner(more, 2), more), "coupon %d", more)
	}
	// a batch of one primary's coupon alone, its request_id reused for a
	// batch over both primaries: refused, and the primary that never saw
	// the first batch writes nothing. The lone coupon is on the primary
	// that records the request_id (v-18 on p1, v-19 on p0): a batch sent
	// only as parts would replay there and void the new coupon elsewhere.
	for i, alone := range [][]int64{{a1[3], a0[3]}, {a0[4], a1[4]}} {
		one := map[string]any{"user_coupon_ids": alone[:1], "reason": "r", "operator": "o", "request_id": fmt.Sprint("v-", 18+i)}
		e.post("/v1/voids", one, http.StatusOK, nil)
		one["user_coupon_ids"] = alone
		code, body := e.do(request{method: http.MethodPost, path: "/v1/voids", body: string(must(json.Marshal(one)))})
		assert.Equal(t, http.StatusConflict, code)
		assert.Contains(t, string(body), `"idempotency_conflict"`)
		assert.Equal(t, "AVAILABLE", e.status(primaries.Owner(alone[1], 2), alone[1]))
	}
}

// expireOverBoth moves the stores' clock past every coupon's expiry and
// sweeps through the front: with a limit, then the rest.
func (e *native) expireOverBoth() {
	t := e.t
	e.shift.Store(int64(2 * time.Hour))
	due := e.count(0, "SELECT COUNT(*) FROM user_coupon WHERE status = 1") + e.count(1, "SELECT COUNT(*) FROM user_coupon WHERE status = 1")
	require.Greater(t, due, int64(100))
	var res httpapi.ExpireResponse
	e.post("/v1/expire", map[string]any{"limit": 3}, http.StatusOK, &res)
	assert.Equal(t, 3, res.Expired)
	assert.True(t, res.More)
	code, body := e.do(request{method: http.MethodPost, path: "/v1/expire"})
	require.Equal(t, http.StatusOK, code, "%s", body)
	require.NoError(t, json.Unmarshal(body, &res))
	assert.Equal(t, int(due-3), res.Expired, "both primaries swept, the answers summed")
	assert.False(t, res.More)
	for k := range e.pools {
		assert.Zero(t, e.count(k, "SELECT COUNT(*) FROM user_coupon WHERE status = 1"), "p%d", k)
		assert.Positive(t, e.count(k, "SELECT COUNT(*) FROM inventory_flow WHERE kind = 'expire'"), "p%d", k)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// reconcileEach runs one reconciler per primary, each on its own server
// at its own cdc's checkpoint: both clean; then a drift injected in p1's
// counters is found and fixed on p1 alone.
func (e *native) reconcileEach(tpl int64) {
	t := e.t
	pass := func(k int) *reconcile.Report {
		binlog, err := canal.ConfigFromDSN(e.envs[k].DSN)
		require.NoError(t, err)
		r, err := reconcile.New(reconcile.Config{DB: e.envs[k].DB, Binlog: binlog, Redis: e.envs[k].RDB, Keys: e.envs[k].Keys,
			QuietWindow: 100 * time.Millisecond, Logger: testenv.QuietLogger(), Registerer: prometheus.NewRegistry()})
		require.NoError(t, err)
		rep, err := r.Pass(e.ctx)
		require.NoError(t, err)
		return rep
	}
	for k := range e.pools {
		rep := pass(k)
		assert.Equal(t, "clean", rep.Status, "p%d: %s", k, rep.Summary())
		assert.Equal(t, e.count(k, "SELECT COUNT(*) FROM user_coupon"), rep.Coupons, "p%d counts its own coupons", k)
	}
	require.Equal(t, 1, primaries.Owner(tpl, 2))
	_, err := e.envs[1].DB.ExecContext(e.ctx, "UPDATE inventory_counter SET used = used + 3 WHERE template_id = ? AND channel = 'app'", tpl)
	require.NoError(t, err)
	assert.Equal(t, "clean", pass(0).Status, "p0 knows nothing of p1's drift")
	rep := pass(1)
	assert.Equal(t, "auto_fixed", rep.Status, rep.Summary())
	require.Len(t, rep.Differences, 1, rep.Summary())
	assert.Equal(t, tpl, rep.Differences[0].Template)
	e.envs[1].WaitCheckpoint()
	assert.Equal(t, e.envs[1].Truth(), e.envs[1].Counters())
}
