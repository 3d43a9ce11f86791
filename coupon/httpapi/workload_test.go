package httpapi_test

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/inventory/view"
)

// workload is the shared memory of the random workload's goroutines: what
// was claimed and redeemed (to pick targets from), and what the API
// answered (to hold against MySQL at the end).
type workload struct {
	e         *env
	templates []wlTemplate

	mu          sync.Mutex
	coupons     []int64
	claims      []map[string]any // bodies of successful claims, for replays
	redemptions [][2]any         // (coupon id, order)

	claimed, redeemed, voided, expired atomic.Int64
	refunded                           [2]atomic.Int64 // restore, recycle
	writes, reads                      atomic.Int64

	bad     sync.Map // "op: reply" -> count of unexpected answers
	refused sync.Map // error code -> count of expected refusals
}

type wlTemplate struct {
	id       int64
	channels []string
	limit    int
}

// refusal counts an expected 409 by its code.
func (w *workload) refusal(r reply) {
	v, _ := w.refused.LoadOrStore(r.errCode(), new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

func (w *workload) unexpected(op string, r reply) {
	v, _ := w.bad.LoadOrStore(op+": "+r.String(), new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

// pick returns a random element, favouring the newest (those most likely
// still AVAILABLE or USED).
func pick[T any](rng *rand.Rand, xs []T) (T, bool) {
	var zero T
	if len(xs) == 0 {
		return zero, false
	}
	if rng.IntN(10) < 7 && len(xs) > 200 {
		return xs[len(xs)-1-rng.IntN(200)], true
	}
	return xs[rng.IntN(len(xs))], true
}

// A random mixed workload of 5,000 write operations on 16 goroutines —
// claims (and replays), redemptions (and replays), refunds in both modes,
// void batches, expiry sweeps on a fake clock — over two templates, five
// channels and 300 users, with inventory and history reads in between.
// Afterwards MySQL must hold exactly what the API answered, and every
// invariant of docs/design.md must hold.
func TestRandomWorkload(t *testing.T) {
	e := newEnv(t)
	w := &workload{e: e, templates: []wlTemplate{
		{channels: []string{"app", "sms", "web"}, limit: 3},
		{channels: []string{"app", "mini"}, limit: 1},
	}}
	w.templates[0].id = e.template(t, map[string]any{"total_quota": 2200, "channels": map[string]int{"app": 1000, "sms": 700, "web": 500},
		"valid_seconds": 240, "per_user_limit": 3})
	w.templates[1].id = e.template(t, map[string]any{"total_quota": 200, "channels": map[string]int{"app": 120, "mini": 80},
		"valid_seconds": 120, "expiry_policy": "release"})

	const writes, workers = 5000, 16
	var wg sync.WaitGroup
	for g := 0; g < workers; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(g)))
			for w.writes.Add(1) <= writes {
				if rng.IntN(10) == 0 {
					w.read(rng)
				}
				w.write(rng)
			}
		}(g)
	}
	wg.Wait()

	w.bad.Range(func(k, v any) bool {
		t.Errorf("unexpected answer x%d: %s", v.(*atomic.Int64).Load(), k)
		return true
	})
	t.Logf("workload: %d claims, %d redemptions, %d restores, %d recycles, %d voids, %d expiries, %d reads",
		w.claimed.Load(), w.redeemed.Load(), w.refunded[0].Load(), w.refunded[1].Load(), w.voided.Load(), w.expired.Load(), w.reads.Load())
	refused := map[string]int64{}
	w.refused.Range(func(k, v any) bool { refused[k.(string)] = v.(*atomic.Int64).Load(); return true })
	t.Logf("refusals: %v", refused)
	// (coupon_expired is rare here: TestEveryActionOnEveryReachedState and TestExpirySweep make it)
	for _, code := range []string{"sold_out", "limit_reached", "already_used", "illegal_transition", "idempotency_conflict", "order_mismatch"} {
		assert.Positive(t, refused[code], "the workload met %s", code)
	}
	for _, n := range []int64{w.claimed.Load(), w.redeemed.Load(), w.refunded[0].Load(), w.refunded[1].Load(), w.voided.Load(), w.expired.Load()} {
		assert.Positive(t, n, "every kind of transition happened")
	}

	// MySQL holds exactly what the API answered
	assert.Equal(t, int(w.claimed.Load()), e.count(t, `SELECT COUNT(*) FROM user_coupon`), "coupons = 201 claims")
	assert.Equal(t, int(w.redeemed.Load()), e.count(t, `SELECT COUNT(*) FROM redemption_log`), "redemptions = 201 redemptions")
	assert.Equal(t, int(w.refunded[0].Load()), e.count(t, `SELECT COUNT(*) FROM inventory_flow WHERE kind = 'refund' AND mode = 'restore'`))
	assert.Equal(t, int(w.refunded[1].Load()), e.count(t, `SELECT COUNT(*) FROM inventory_flow WHERE kind = 'refund' AND mode = 'recycle'`))
	assert.Equal(t, int(w.voided.Load()), e.count(t, `SELECT COUNT(*) FROM inventory_flow WHERE kind = 'void'`))
	assert.Equal(t, int(w.expired.Load()), e.count(t, `SELECT COUNT(*) FROM inventory_flow WHERE kind = 'expire'`))

	for _, tpl := range w.templates {
		checkInventoryIsTruth(t, e, tpl.id)
	}
	checkLedgers(t, e)
	checkHistories(t, w)
}

// write runs one random state-changing request and tallies its answer.
func (w *workload) write(rng *rand.Rand) {
	e := w.e
	switch n := rng.IntN(100); {
	case n < 36: // claim, sometimes a replay
		w.mu.Lock()
		old, ok := pick(rng, w.claims)
		w.mu.Unlock()
		if ok && rng.IntN(20) == 0 {
			r, err := e.api.do("POST", "/v1/claims", old)
			if err != nil || r.Status != 200 {
				w.unexpected("claim replay", r)
			}
			return
		}
		tpl := w.templates[rng.IntN(len(w.templates))]
		body := map[string]any{"template_id": tpl.id, "user_id": fmt.Sprintf("user-%03d", rng.IntN(300)),
			"channel": tpl.channels[rng.IntN(len(tpl.channels))], "request_id": uniq("claim")}
		r, err := e.api.do("POST", "/v1/claims", body)
		var c claimReply
		switch {
		case err == nil && r.Status == 201 && r.decode(&c) == nil:
			w.claimed.Add(1)
			w.mu.Lock()
			w.coupons = append(w.coupons, c.UserCouponID)
			w.claims = append(w.claims, body)
			w.mu.Unlock()
		case r.Status == 409 && (r.errCode() == "sold_out" || r.errCode() == "limit_reached"):
			w.refusal(r)
		default:
			w.unexpected("claim", r)
		}
	case n < 66: // redeem with a new order, sometimes a replay
		w.mu.Lock()
		id, ok := pick(rng, w.coupons)
		old, replay := pick(rng, w.redemptions)
		w.mu.Unlock()
		if replay && rng.IntN(10) == 0 {
			// answered while the redemption is in effect, refused once refunded
			r, err := e.api.do("POST", "/v1/redemptions", map[string]any{"user_coupon_id": old[0], "order_id": old[1]})
			var red redeemReply
			switch {
			case err == nil && r.Status == 200 && r.decode(&red) == nil && red.Status == "USED" && red.Replayed:
			case r.Status == 409 && r.errCode() == "already_refunded":
				w.refusal(r)
			default:
				w.unexpected("redemption replay", r)
			}
			return
		}
		if !ok {
			return
		}
		order := uniq("order")
		r, err := e.api.do("POST", "/v1/redemptions", map[string]any{"user_coupon_id": id, "order_id": order})
		switch code := r.errCode(); {
		case err == nil && r.Status == 201:
			w.redeemed.Add(1)
			w.mu.Lock()
			w.redemptions = append(w.redemptions, [2]any{id, order})
			w.mu.Unlock()
		case r.Status == 409 && (code == "already_used" || code == "illegal_transition" || code == "coupon_expired"):
			w.refusal(r)
		default:
			w.unexpected("redemption", r)
		}
	case n < 85: // refund, either mode; now and then by an order that never redeemed it
		w.mu.Lock()
		red, ok := pick(rng, w.redemptions)
		w.mu.Unlock()
		if !ok {
			return
		}
		modes := []string{"restore", "recycle"}
		m := rng.IntN(2)
		if rng.IntN(20) == 0 {
			r, err := e.api.do("POST", "/v1/refunds", map[string]any{"user_coupon_id": red[0], "order_id": uniq("stranger"), "mode": modes[m]})
			if err != nil || r.errCode() != "order_mismatch" {
				w.unexpected("refund by a stranger", r)
			}
			w.refusal(r)
			return
		}
		r, err := e.api.do("POST", "/v1/refunds", map[string]any{"user_coupon_id": red[0], "order_id": red[1], "mode": modes[m]})
		var ref refundReply
		switch {
		case err == nil && r.Status == 200 && r.decode(&ref) == nil:
			if !ref.Replayed {
				w.refunded[m].Add(1)
			}
		case r.Status == 409 && r.errCode() == "idempotency_conflict": // refunded before in the other mode
			w.refusal(r)
		default:
			w.unexpected("refund", r)
		}
	case n < 95: // a void batch of 1-4 coupons
		w.mu.Lock()
		seen := map[int64]bool{}
		var ids []int64
		for k := 1 + rng.IntN(4); k > 0; k-- {
			if id, ok := pick(rng, w.coupons); ok && !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
		w.mu.Unlock()
		if len(ids) == 0 {
			return
		}
		r, err := e.api.do("POST", "/v1/voids", map[string]any{"user_coupon_ids": ids, "reason": "workload", "operator": "bot", "request_id": uniq("void")})
		var v voidReply
		if err != nil || r.Status != 200 || r.decode(&v) != nil || len(v.Results) != len(ids) {
			w.unexpected("void", r)
			return
		}
		for _, res := range v.Results {
			switch res.Result {
			case coupon.VoidVoided:
				w.voided.Add(1)
			case coupon.VoidIllegalTransition, coupon.VoidAlreadyVoided:
			default:
				w.unexpected("void result "+res.Result, r)
			}
		}
	default: // time passes; now and then a sweep, sometimes bounded
		e.clock.Advance(time.Duration(1+rng.IntN(3)) * time.Second)
		if rng.IntN(2) == 0 {
			return // due coupons wait for a later sweep (meanwhile: coupon_expired)
		}
		body := map[string]any{}
		if rng.IntN(2) == 0 {
			body["limit"] = 1 + rng.IntN(50)
		}
		r, err := e.api.do("POST", "/v1/expire", body)
		var x expireReply
		if err != nil || r.Status != 200 || r.decode(&x) != nil {
			w.unexpected("expire", r)
			return
		}
		w.expired.Add(int64(x.Expired))
	}
}

// read checks a live inventory (conserved mid-flight) or a history.
func (w *workload) read(rng *rand.Rand) {
	w.reads.Add(1)
	if rng.IntN(2) == 0 {
		tpl := w.templates[rng.IntN(len(w.templates))]
		r, err := w.e.api.do("GET", fmt.Sprintf("/v1/templates/%d/inventory", tpl.id), nil)
		var inv inventoryReply
		if err != nil || r.Status != 200 || r.decode(&inv) != nil || !inv.Conserved {
			w.unexpected("inventory", r)
		}
		return
	}
	w.mu.Lock()
	id, ok := pick(rng, w.coupons)
	w.mu.Unlock()
	if !ok {
		return
	}
	r, err := w.e.api.do("GET", fmt.Sprintf("/v1/user-coupons/%d/history", id), nil)
	var h historyReply
	if err != nil || r.Status != 200 || r.decode(&h) != nil || len(h.Events) == 0 || h.Events[0].Event != "claimed" {
		w.unexpected("history", r)
	}
}

// checkInventoryIsTruth holds GET inventory against a direct GROUP BY over
// user_coupon and the channel buckets, and checks conservation.
func checkInventoryIsTruth(t *testing.T, e *env, tpl int64) {
	t.Helper()
	want := map[string]*view.Counts{}
	rows, err := e.db.Query(`SELECT channel, quota, claimed FROM channel_quota WHERE template_id = ?`, tpl)
	require.NoError(t, err)
	for rows.Next() {
		var ch string
		c := &view.Counts{}
		require.NoError(t, rows.Scan(&ch, &c.Quota, &c.Claimed))
		want[ch] = c
	}
	require.NoError(t, rows.Err())
	rows.Close()
	rows, err = e.db.Query(`SELECT channel, status, COUNT(*) FROM user_coupon WHERE template_id = ? GROUP BY channel, status`, tpl)
	require.NoError(t, err)
	for rows.Next() {
		var ch string
		var st coupon.Status
		var n int64
		require.NoError(t, rows.Scan(&ch, &st, &n))
		require.Contains(t, want, ch, "a coupon of a channel without a bucket")
		*map[coupon.Status]*int64{coupon.Available: &want[ch].Held, coupon.Used: &want[ch].Used,
			coupon.Expired: &want[ch].Expired, coupon.Returned: &want[ch].Returned}[st] = n
	}
	require.NoError(t, rows.Err())
	rows.Close()
	for ch, c := range want {
		c.Released = int64(e.count(t, `SELECT COUNT(*) FROM inventory_flow WHERE template_id = ? AND channel = ? AND kind = 'release'`, tpl, ch))
		claimable, frozen := c.Quota-c.Claimed, c.Expired+c.Returned-c.Released
		rowsOf := c.Held + c.Used + c.Expired + c.Returned
		assert.Equal(t, rowsOf-c.Released, c.Claimed, "channel_quota.claimed of %s = its rows - released", ch)
		assert.Equal(t, c.Quota, claimable+c.Held+c.Used+frozen, "conservation in %s", ch)
		for _, v := range []int64{claimable, c.Held, c.Used, frozen} {
			assert.GreaterOrEqual(t, v, int64(0), "every term of %s", ch)
		}
	}

	inv := e.inventory(t, tpl)
	var total view.Counts
	require.Len(t, inv.Channels, len(want))
	for ch, c := range want {
		assert.Equal(t, *c, inv.Channels[ch], "inventory of channel %s = GROUP BY", ch)
		total.Add(*c)
	}
	assert.Equal(t, total, inv.Counts, "inventory totals")
	var quota int64
	require.NoError(t, e.db.QueryRow(`SELECT total_quota FROM coupon_template WHERE id = ?`, tpl).Scan(&quota))
	assert.Equal(t, quota, inv.TotalQuota)
	assert.Equal(t, quota, total.Quota)
	assert.True(t, inv.Conserved)
	t.Logf("template %d: %+v", tpl, total)
}

// checkLedgers: every state has its ledger rows, and nothing more.
func checkLedgers(t *testing.T, e *env) {
	t.Helper()
	// per coupon: un-refunded redemptions, terminal flows, all movements
	rows, err := e.db.Query(`SELECT c.id, c.status, COALESCE(c.order_id, ''), c.version,
		(SELECT COUNT(*) FROM redemption_log r WHERE r.user_coupon_id = c.id AND NOT EXISTS
			(SELECT 1 FROM inventory_flow f WHERE f.user_coupon_id = c.id AND f.kind = 'refund' AND f.seq = r.id)),
		(SELECT COALESCE(GROUP_CONCAT(r.order_id), '') FROM redemption_log r WHERE r.user_coupon_id = c.id AND NOT EXISTS
			(SELECT 1 FROM inventory_flow f WHERE f.user_coupon_id = c.id AND f.kind = 'refund' AND f.seq = r.id)),
		(SELECT COUNT(*) FROM redemption_log r WHERE r.user_coupon_id = c.id),
		(SELECT COUNT(*) FROM inventory_flow f WHERE f.user_coupon_id = c.id),
		(SELECT COUNT(*) FROM inventory_flow f WHERE f.user_coupon_id = c.id AND f.to_status = 3 AND f.kind = 'expire'),
		(SELECT COUNT(*) FROM inventory_flow f WHERE f.user_coupon_id = c.id AND f.to_status = 4 AND f.kind IN ('void', 'refund'))
		FROM user_coupon c`)
	require.NoError(t, err)
	defer rows.Close()
	byStatus := map[coupon.Status]int{}
	bad := 0
	for rows.Next() {
		var id, version, open, redemptions, flows, expiries, returns int64
		var st coupon.Status
		var order, openOrders string
		require.NoError(t, rows.Scan(&id, &st, &order, &version, &open, &openOrders, &redemptions, &flows, &expiries, &returns))
		byStatus[st]++
		var problems []string
		if st == coupon.Used && (open != 1 || openOrders != order) {
			problems = append(problems, fmt.Sprintf("USED with %d un-refunded redemptions (%s), order_id %q", open, openOrders, order))
		}
		if st != coupon.Used && open != 0 {
			problems = append(problems, fmt.Sprintf("%s with %d un-refunded redemptions", st, open))
		}
		if (st == coupon.Available || st == coupon.Expired) && order != "" {
			problems = append(problems, fmt.Sprintf("%s with order_id %q", st, order)) // a recycled coupon keeps its last order
		}
		if want := map[bool]int64{true: 1}[st == coupon.Expired]; expiries != want {
			problems = append(problems, fmt.Sprintf("%s with %d expiry flows", st, expiries))
		}
		if want := map[bool]int64{true: 1}[st == coupon.Returned]; returns != want {
			problems = append(problems, fmt.Sprintf("%s with %d void/recycle flows", st, returns))
		}
		if version != 1+redemptions+flows {
			problems = append(problems, fmt.Sprintf("version %d after %d redemptions and %d movements", version, redemptions, flows))
		}
		if len(problems) > 0 {
			if bad++; bad <= 10 {
				t.Errorf("coupon %d: %v", id, problems)
			}
		}
	}
	require.NoError(t, rows.Err())
	assert.Zero(t, bad, "coupons whose ledgers do not tell their state")
	t.Logf("coupons by status: %v", byStatus)
	for _, s := range coupon.Statuses {
		assert.Positive(t, byStatus[s], "the workload reached %s", s)
	}

	// every refund undoes a redemption of the same coupon by the same order
	assert.Zero(t, e.count(t, `SELECT COUNT(*) FROM inventory_flow f LEFT JOIN redemption_log r
		ON r.id = f.seq AND r.user_coupon_id = f.user_coupon_id AND r.order_id = f.order_id
		WHERE f.kind = 'refund' AND r.id IS NULL`))
	// ledger rows carry their coupon's template and channel
	assert.Zero(t, e.count(t, `SELECT COUNT(*) FROM redemption_log r JOIN user_coupon c ON c.id = r.user_coupon_id
		WHERE r.template_id <> c.template_id OR r.channel <> c.channel`))
	assert.Zero(t, e.count(t, `SELECT COUNT(*) FROM inventory_flow f JOIN user_coupon c ON c.id = f.user_coupon_id
		WHERE f.template_id <> c.template_id OR f.channel <> c.channel`))
	// the per-user count is the truth and within the limit
	assert.Zero(t, e.count(t, `SELECT COUNT(*) FROM user_claim u JOIN coupon_template t ON t.id = u.template_id
		WHERE u.claimed <> (SELECT COUNT(*) FROM user_coupon c WHERE c.template_id = u.template_id AND c.user_id = u.user_id)
		   OR u.claimed > t.per_user_limit`))
	assert.Equal(t, e.count(t, `SELECT COUNT(DISTINCT template_id, user_id) FROM user_coupon`), e.count(t, `SELECT COUNT(*) FROM user_claim`))
}

// checkHistories: for a sample of coupons the history is a chain of legal
// transitions that ends in the stored state.
func checkHistories(t *testing.T, w *workload) {
	t.Helper()
	ids := append([]int64(nil), w.coupons...)
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for i := 0; i < len(ids); i += 1 + len(ids)/150 {
		var h historyReply
		w.e.expect(t, 200, "GET", fmt.Sprintf("/v1/user-coupons/%d/history", ids[i]), nil, &h)
		state := "NONE"
		for _, ev := range h.Events {
			from, err1 := coupon.ParseStatus(ev.From)
			to, err2 := coupon.ParseStatus(ev.To)
			require.NoError(t, err1)
			require.NoError(t, err2)
			assert.Equal(t, state, ev.From, "coupon %d: %s follows %s", ids[i], ev.Event, state)
			assert.True(t, coupon.Legal(from, to), "coupon %d: %s is %s -> %s", ids[i], ev.Event, from, to)
			state = ev.To
		}
		assert.Equal(t, h.Status, state, "coupon %d: the history ends in the stored state", ids[i])
		assert.Equal(t, w.e.status(t, ids[i]).String(), h.Status)
	}
}
