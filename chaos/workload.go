package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// acks are the API calls answered 2xx: each must be in the ledger at the
// end. A replay (same request id) must answer the same as the first call.
type acks struct {
	mu          sync.Mutex
	claims      map[string]int64   // request_id -> user coupon id
	redemptions map[string]int64   // order/coupon -> redemption id
	refunds     map[string]string  // order/coupon -> mode
	voids       map[int64]string   // user coupon id -> void request id
	replays     []string           // replays that answered differently
	coupons     []couponRef        // claimed coupons, for the next operations
	redeemed    []redeemRef        // redemptions answered 2xx, not yet refunded by the workload
	templates   map[int64]struct{} // created templates
}

type couponRef struct {
	id, template int64
}

type redeemRef struct {
	coupon int64
	order  string
}

func newAcks() *acks {
	return &acks{claims: map[string]int64{}, redemptions: map[string]int64{}, refunds: map[string]string{},
		voids: map[int64]string{}, templates: map[int64]struct{}{}}
}

func redKey(order string, coupon int64) string { return fmt.Sprintf("%s/%d", order, coupon) }

// workload is the concurrent API clients of one run.
type workload struct {
	api       *apiClient
	acks      *acks
	tally     *tally
	templates []tmpl
	autoTpl   int64
	seed      uint64
	requests  atomic.Int64
	maxReq    int64
}

type tmpl struct {
	id       int64
	channels []string
}

// run runs n clients until ctx ends or the request bound is reached.
func (w *workload) run(ctx context.Context, n int) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &client{w: w, id: i, rng: rand.New(rand.NewPCG(w.seed, uint64(i)+1))}
			c.loop(ctx)
		}()
	}
	wg.Wait()
}

// client is one API client: its own seeded generator and request counter.
type client struct {
	w   *workload
	id  int
	rng *rand.Rand
	n   int
}

func (c *client) loop(ctx context.Context) {
	for ctx.Err() == nil && c.w.requests.Load() < c.w.maxReq {
		c.n++
		switch p := c.rng.IntN(100); {
		case p < 42:
			c.claim(ctx)
		case p < 70:
			c.redeem(ctx)
		case p < 84:
			c.refund(ctx)
		case p < 92:
			c.void(ctx)
		case p < 97:
			c.expire(ctx)
		default:
			c.policy(ctx)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(c.rng.IntN(8)) * time.Millisecond): // pacing, not a wait
		}
	}
}

// send calls the API, again with the same body while there is no answer
// or a 5xx (up to 4 tries) and, one time in four after a 2xx, once more: a
// retry of the same request, which must be answered as a replay (2xx; a
// 4xx is recorded as a violation). It counts each call under kind and
// decodes the first answer into out and the retry's into again (nil: no
// retry); the caller compares them.
func (c *client) send(ctx context.Context, kind, method, path string, in, out, again any) (answer, bool) {
	var first answer
	var ok bool
	for try := 0; try < 4 && ctx.Err() == nil; try++ {
		c.w.requests.Add(1)
		a, err := c.w.api.call(ctx, method, path, in, out)
		if ctx.Err() != nil {
			return a, false // the run stopped: the outcome is unknown, not an error
		}
		c.w.tally.op(kind, a.result(err))
		if err == nil && a.status < 500 {
			first, ok = a, true
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(100+c.rng.IntN(300)) * time.Millisecond): // a client's retry pause
		}
	}
	if ok && first.ok() && again != nil && c.rng.IntN(4) == 0 {
		c.w.requests.Add(1)
		a, err := c.w.api.call(ctx, method, path, in, again)
		if ctx.Err() == nil {
			c.w.tally.op(kind+"_retry", a.result(err))
		}
		if err == nil && a.status >= 400 && a.status < 500 && ctx.Err() == nil {
			// the same request again after a 2xx must be a replay, never refused
			k := c.w.acks
			k.mu.Lock()
			k.replays = append(k.replays, fmt.Sprintf("%s %s %v: first answer %d, the same request again %d %s",
				kind, path, in, first.status, a.status, a.body))
			k.mu.Unlock()
		}
	}
	return first, ok
}

// sendAcked is send for an operation the ledger must then show: on a 2xx
// it runs record with the acks locked.
func (c *client) sendAcked(ctx context.Context, kind, method, path string, in, out, again any, record func(k *acks)) {
	a, ok := c.send(ctx, kind, method, path, in, out, again)
	if !ok || !a.ok() {
		return
	}
	k := c.w.acks
	k.mu.Lock()
	defer k.mu.Unlock()
	record(k)
}

// noteReplay records, with k.mu held, a retry of op on key that answered
// again where the first call answered first (what names the value); again
// equal to none means there was no retry.
func noteReplay[V comparable](k *acks, op, key, what string, first, again, none V) {
	if again != none && again != first {
		k.replays = append(k.replays, fmt.Sprintf("%s %s: %s %v, replay %s %v", op, key, what, first, what, again))
	}
}

func (c *client) claim(ctx context.Context) {
	t := c.w.templates[c.rng.IntN(len(c.w.templates))]
	in := map[string]any{"template_id": t.id, "user_id": fmt.Sprintf("u%d", c.rng.IntN(200)),
		"channel": t.channels[c.rng.IntN(len(t.channels))], "request_id": fmt.Sprintf("c-%d-%d-%d", c.w.seed, c.id, c.n)}
	var out, again struct {
		ID int64 `json:"user_coupon_id"`
	}
	again.ID = -1
	c.sendAcked(ctx, "claim", http.MethodPost, "/v1/claims", in, &out, &again, func(k *acks) {
		req := in["request_id"].(string)
		k.claims[req] = out.ID
		noteReplay(k, "claim", req, "coupon", out.ID, again.ID, -1)
		k.coupons = append(k.coupons, couponRef{id: out.ID, template: t.id})
	})
}

// pickCoupon draws a claimed coupon (false: none yet).
func (c *client) pickCoupon() (couponRef, bool) {
	k := c.w.acks
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.coupons) == 0 {
		return couponRef{}, false
	}
	// mostly recent coupons: they are the ones still AVAILABLE
	n := len(k.coupons)
	i := n - 1 - c.rng.IntN(min(n, 200))
	return k.coupons[i], true
}

func (c *client) redeem(ctx context.Context) {
	cp, ok := c.pickCoupon()
	if !ok {
		return
	}
	order := fmt.Sprintf("o-%d-%d-%d", c.w.seed, c.id, c.n)
	in := map[string]any{"user_coupon_id": cp.id, "order_id": order}
	var out, again struct {
		ID int64 `json:"redemption_id"`
	}
	again.ID = -1
	c.sendAcked(ctx, "redeem", http.MethodPost, "/v1/redemptions", in, &out, &again, func(k *acks) {
		k.redemptions[redKey(order, cp.id)] = out.ID
		noteReplay(k, "redeem", redKey(order, cp.id), "redemption", out.ID, again.ID, -1)
		k.redeemed = append(k.redeemed, redeemRef{coupon: cp.id, order: order})
	})
}

func (c *client) refund(ctx context.Context) {
	k := c.w.acks
	k.mu.Lock()
	if len(k.redeemed) == 0 {
		k.mu.Unlock()
		return
	}
	i := c.rng.IntN(len(k.redeemed))
	r := k.redeemed[i]
	k.redeemed[i] = k.redeemed[len(k.redeemed)-1]
	k.redeemed = k.redeemed[:len(k.redeemed)-1]
	k.mu.Unlock()
	mode := "restore"
	if c.rng.IntN(2) == 0 {
		mode = "recycle"
	}
	in := map[string]any{"user_coupon_id": r.coupon, "order_id": r.order, "mode": mode}
	var out, again struct {
		Mode string `json:"mode"`
	}
	c.sendAcked(ctx, "refund_"+mode, http.MethodPost, "/v1/refunds", in, &out, &again, func(k *acks) {
		k.refunds[redKey(r.order, r.coupon)] = mode
		noteReplay(k, "refund", redKey(r.order, r.coupon), "mode", out.Mode, again.Mode, "")
	})
}

func (c *client) void(ctx context.Context) {
	var ids []int64
	for range 1 + c.rng.IntN(3) {
		if cp, ok := c.pickCoupon(); ok && !slices.Contains(ids, cp.id) {
			ids = append(ids, cp.id)
		}
	}
	if len(ids) == 0 {
		return
	}
	req := fmt.Sprintf("v-%d-%d-%d", c.w.seed, c.id, c.n)
	in := map[string]any{"user_coupon_ids": ids, "reason": "chaos", "operator": "chaos", "request_id": req}
	var out, again struct {
		Results []struct {
			ID     int64  `json:"user_coupon_id"`
			Result string `json:"result"`
		} `json:"results"`
	}
	c.sendAcked(ctx, "void", http.MethodPost, "/v1/voids", in, &out, &again, func(k *acks) {
		for _, r := range out.Results {
			if r.Result == "voided" {
				if _, seen := k.voids[r.ID]; !seen {
					k.voids[r.ID] = req
				}
			}
		}
		if len(again.Results) == 0 {
			return
		}
		replayed := map[int64]string{}
		for _, r := range again.Results {
			replayed[r.ID] = r.Result
		}
		for _, r := range out.Results { // a coupon voided stays voided by this request
			if r.Result == "voided" && replayed[r.ID] != "voided" {
				k.replays = append(k.replays, fmt.Sprintf("void %s: coupon %d voided, replay says %q", req, r.ID, replayed[r.ID]))
			}
		}
	})
}

func (c *client) expire(ctx context.Context) {
	c.send(ctx, "expire_sweep", http.MethodPost, "/v1/expire", map[string]any{"limit": 1000}, nil, nil)
}

func (c *client) policy(ctx context.Context) {
	mode := "auto"
	if c.rng.IntN(3) == 0 {
		mode = "signal"
	}
	in := map[string]any{"mode": mode, "changed_by": "chaos", "reason": fmt.Sprintf("seeded change %d-%d", c.id, c.n)}
	c.send(ctx, "policy_"+mode, http.MethodPut, fmt.Sprintf("/v1/templates/%d/quota-policy", c.w.autoTpl), in, nil, nil)
}
