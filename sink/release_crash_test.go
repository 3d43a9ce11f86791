package sink_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/inventory"
	"github.com/couponlink/couponlink/webhook"
)

// hookReceiver is a webhook receiver that checks signatures and keeps
// each event id once.
type hookReceiver struct {
	mu     sync.Mutex
	ids    map[string]bool
	bad    int
	server *httptest.Server
}

func newHookReceiver(t *testing.T, secret string) *hookReceiver {
	h := &hookReceiver{ids: map[string]bool{}}
	h.server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		defer h.mu.Unlock()
		if !webhook.Verify([]byte(secret), body, r.Header.Get(webhook.HeaderSignature)) {
			h.bad++
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		h.ids[r.Header.Get(webhook.HeaderEventID)] = true
	}))
	t.Cleanup(h.server.Close)
	return h
}

func (h *hookReceiver) has(ids []string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, id := range ids {
		if !h.ids[id] {
			return false
		}
	}
	return true
}

// Voids, refund-recycles and expiries under the release policy each give
// their slot back exactly once, and each release is reported by exactly
// one quota.released count, while `couponlink cdc` is killed with SIGKILL
// after every round of writes. Refund-restore and expiry under the freeze
// policy release nothing.
func TestReleasesExactlyOnceAcrossKills(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const secret = "s3cret"
	hooks := newHookReceiver(t, secret)
	runner := newCDCRunner(t, e, testenv.RedisAddr(t))
	runner.args = append(runner.args, "-release-every", "20ms", "-webhook-url", hooks.server.URL, "-webhook-secret", secret)

	clock := newFakeClock() // the write path's clock, an hour behind: expiries are due for the cdc at once
	clock.Advance(-time.Hour)
	store, err := coupon.New(coupon.Config{DB: e.DB, Now: clock.Now})
	require.NoError(t, err)
	newTemplate := func(policy string, valid int64) int64 {
		zero := int64(0)
		tpl, err := store.CreateTemplate(ctx, coupon.NewTemplate{Name: policy, TotalQuota: 2000, Channels: map[string]int64{"app": 1000, "web": 1000},
			ValidSeconds: valid, PerUserLimit: 1000, ExpiryPolicy: policy, ReleaseCooldownSeconds: &zero})
		require.NoError(t, err)
		return tpl.ID
	}
	long := newTemplate(coupon.PolicyFreeze, 86400) // void, recycle, restore
	release := newTemplate(coupon.PolicyRelease, 60)
	freeze := newTemplate(coupon.PolicyFreeze, 60)

	p := runner.start()
	e.WaitCheckpoint()
	rng := rand.New(rand.NewPCG(rand.Uint64(), 11))
	n := 0
	claim := func(tpl int64) int64 {
		n++
		c, err := store.Claim(ctx, coupon.ClaimRequest{TemplateID: tpl, UserID: fmt.Sprint("u", n%37), Channel: []string{"app", "web"}[n%2], RequestID: fmt.Sprint("r", n)})
		require.NoError(t, err)
		return c.UserCouponID
	}
	const rounds = 5
	for round := range rounds {
		for range 20 {
			claim(release)
		}
		for range 10 {
			claim(freeze)
		}
		var mine []int64
		for range 30 {
			mine = append(mine, claim(long))
		}
		_, err := store.Void(ctx, coupon.VoidRequest{UserCouponIDs: mine[:10], Reason: "test", Operator: "ops", RequestID: fmt.Sprint("v", round)})
		require.NoError(t, err)
		for i, id := range mine[10:] {
			_, err := store.Redeem(ctx, coupon.RedeemRequest{UserCouponID: id, OrderID: fmt.Sprint("o", id)})
			require.NoError(t, err)
			_, err = store.Refund(ctx, coupon.RefundRequest{UserCouponID: id, OrderID: fmt.Sprint("o", id), Mode: []string{coupon.RefundRecycle, coupon.RefundRestore}[i%2]})
			require.NoError(t, err)
		}
		clock.Advance(2 * time.Minute)
		res, err := store.ExpireDue(ctx, 0)
		require.NoError(t, err)
		require.Equal(t, 30, res.Expired)

		time.Sleep(time.Duration(rng.IntN(150)) * time.Millisecond) // a random moment of the kill
		require.False(t, p.exited(), "couponlink cdc exited by itself: %v", p.err)
		_ = p.signal(syscall.SIGKILL)
		p = runner.start()
	}

	const want = rounds * (10 + 10 + 20) // voids + recycles + expiries under release
	releases := func() (rows, coupons int) {
		require.NoError(t, e.DB.QueryRow(`SELECT COUNT(*), COUNT(DISTINCT user_coupon_id) FROM inventory_flow WHERE kind = 'release'`).Scan(&rows, &coupons))
		return
	}
	cdctest.WaitFor(t, 60*time.Second, "every release", func() bool { r, _ := releases(); return r >= want })
	e.WaitCheckpoint()
	rows, coupons := releases()
	require.Equal(t, want, rows)
	require.Equal(t, want, coupons, "a coupon released twice")
	var frozen int
	require.NoError(t, e.DB.QueryRow(`SELECT COUNT(*) FROM inventory_flow f JOIN user_coupon c ON c.id = f.user_coupon_id
		WHERE f.kind = 'release' AND (c.template_id = ? OR (c.template_id = ? AND c.status <> 4))`, freeze, long).Scan(&frozen))
	require.Zero(t, frozen, "a freeze-policy expiry or a refund-restore released its slot")

	// every slot is accounted for once: claimed = coupons issued − released
	e.assertTruth(true)
	truth := e.Truth()
	for _, tpl := range []int64{long, release, freeze} {
		for ch, b := range e.buckets(tpl) {
			c := truth[inventory.Pair{Template: tpl, Channel: ch}]
			require.EqualValues(t, c.Held+c.Used+c.Expired+c.Returned-c.Released, b[1], "template %d channel %s", tpl, ch)
		}
	}

	// each release is in exactly one quota.released event, and every event reaches the receiver, signed
	var reported float64
	var ids []string
	for _, ev := range e.outbox(webhook.QuotaReleased) {
		reported += ev["data"].(map[string]any)["released"].(float64)
		ids = append(ids, ev["id"].(string))
	}
	require.EqualValues(t, want, reported, "releases reported by the quota.released events")
	cdctest.WaitFor(t, 60*time.Second, "the receiver has every event", func() bool { return hooks.has(ids) })
	require.Zero(t, hooks.bad, "an event with a bad signature")
	body, _ := json.Marshal(e.outbox(webhook.QuotaReleased)[0])
	t.Logf("%d release rows, %d quota.released events; first: %s", rows, len(ids), body)
	require.NoError(t, p.signal(syscall.SIGTERM))
}
