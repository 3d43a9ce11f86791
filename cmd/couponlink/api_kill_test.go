package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/internal/cdcenv"
	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/reconcile"
)

// kill -9 of `couponlink api` (both combiners on, as by default) during a
// load of claims (one hot bucket, eight buckets) and redemptions: every
// acknowledged request is in the ledger with the ids it was answered,
// every group committed whole or not at all, and the cdc (in process,
// through the kills) and the reconciler find nothing wrong.
func TestAPIKilledDuringCombinedLoad(t *testing.T) {
	e := cdcenv.New(t)
	cdc := e.StartCDC(nil)
	e.WaitCheckpoint()
	hot := e.Template(map[string]int64{"hot": 1_000_000}, time.Hour)
	spread := map[string]int64{}
	for i := range 8 {
		spread[fmt.Sprintf("c%d", i)] = 1_000_000
	}
	wide := e.Template(spread, time.Hour)
	var pool []int64
	for i := range 3000 {
		c, err := e.Store.Claim(e.Ctx, coupon.ClaimRequest{TemplateID: wide, UserID: fmt.Sprintf("p%d", i%50), Channel: "c0",
			RequestID: fmt.Sprintf("pool-%d", i)})
		require.NoError(t, err)
		pool = append(pool, c.UserCouponID)
	}
	api := newAPIRunner(t, e.DSN)
	l := &killLoad{t: t, api: api, hot: hot, wide: wide, pool: pool}
	stop := l.run(24)
	const kills = 3
	for k := 1; k <= kills; k++ {
		cdctest.WaitFor(t, 60*time.Second, "acknowledged requests before the next kill", func() bool {
			return l.acked.Load() >= int64(k*400)
		})
		api.kill()
		api.start()
	}
	cdctest.WaitFor(t, 60*time.Second, "acknowledged requests after the last restart", func() bool {
		return l.acked.Load() >= (kills+1)*400
	})
	stop()
	t.Logf("%d acknowledged, %d unknown (sent to a process that was killed); groups > 1 seen: claims %v, redemptions %v",
		l.acked.Load(), l.unknown.Load(), api.claimGrouped, api.redeemGrouped)
	require.GreaterOrEqual(t, l.unknown.Load(), int64(kills), "no request was in flight at a kill: the test proves little")
	require.True(t, api.claimGrouped && api.redeemGrouped, "the combiners ran groups of more than one request")

	l.assertAcknowledged(e)
	assertGroupsWhole(t, e)
	e.WaitCheckpoint()
	require.Equal(t, e.Truth(), e.Counters(), "the cdc's counters differ from GROUP BY user_coupon")
	cdctest.WaitFor(t, 60*time.Second, "no pending redemption checks", func() bool {
		v, ok := cdctest.Metric(t, cdc.Reg, "couponlink_cdc_pending_redemption_checks", nil)
		return ok && v == 0
	})
	assert.Zero(t, count(t, e, `SELECT COUNT(*) FROM cdc_anomaly`), "anomalies found by the cdc")
	binlog, err := canal.ConfigFromDSN(e.DSN)
	require.NoError(t, err)
	r, err := reconcile.New(reconcile.Config{DB: e.DB, Redis: e.RDB, Keys: e.Keys, QuietWindow: 300 * time.Millisecond,
		CatchUpWait: 20 * time.Second, AbsThreshold: 5, RelThreshold: 0.05, Logger: testenv.QuietLogger(), Binlog: binlog})
	require.NoError(t, err)
	rep, err := r.Pass(e.Ctx)
	require.NoError(t, err)
	assert.Equal(t, "clean", rep.Status, "reconcile: %s", rep.Summary())
}

// assertGroupsWhole checks what a half-committed group would break: each
// bucket's claimed is its coupons, each user's count its coupons, each
// USED coupon has exactly its one redemption row and each row's coupon is
// USED by its order.
func assertGroupsWhole(t *testing.T, e *cdcenv.Env) {
	t.Helper()
	for _, q := range []string{
		`SELECT COUNT(*) FROM channel_quota q WHERE claimed <> (SELECT COUNT(*) FROM user_coupon c
			WHERE c.template_id = q.template_id AND c.channel = q.channel)`,
		`SELECT COUNT(*) FROM user_claim u WHERE claimed <> (SELECT COUNT(*) FROM user_coupon c
			WHERE c.template_id = u.template_id AND c.user_id = u.user_id)`,
		`SELECT COUNT(*) FROM user_coupon c WHERE status = 2 AND 1 <> (SELECT COUNT(*) FROM redemption_log r
			WHERE r.user_coupon_id = c.id AND r.order_id = c.order_id)`,
		`SELECT COUNT(*) FROM redemption_log r JOIN user_coupon c ON c.id = r.user_coupon_id
			WHERE c.status <> 2 OR c.order_id <> r.order_id`,
		`SELECT COUNT(*) - COUNT(DISTINCT user_coupon_id) FROM redemption_log`,
	} {
		assert.Zero(t, count(t, e, q), q)
	}
}

func count(t *testing.T, e *cdcenv.Env, q string, args ...any) int64 {
	t.Helper()
	var n int64
	require.NoError(t, e.DB.QueryRow(q, args...).Scan(&n), q)
	return n
}

// killLoad is the load: claims and redemptions from workers, each
// acknowledged answer kept.
type killLoad struct {
	t          *testing.T
	api        *apiRunner
	hot, wide  int64
	pool       []int64
	seq, next  atomic.Int64
	acked      atomic.Int64
	unknown    atomic.Int64
	mu         sync.Mutex
	claims     map[string]int64 // request_id -> the coupon id answered
	claimsOf   map[string][2]any
	redeemed   map[int64]int64 // redemption id answered -> its coupon
	redeemedBy map[int64]string
}

// run starts the workers; the returned func stops them and waits.
func (l *killLoad) run(workers int) func() {
	l.claims, l.claimsOf, l.redeemed, l.redeemedBy = map[string]int64{}, map[string][2]any{}, map[int64]int64{}, map[int64]string{}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				l.one(ctx)
			}
		})
	}
	return func() { cancel(); wg.Wait() }
}

// one sends one request: a claim of the hot bucket, a claim of one of the
// eight, or a redemption of the next pool coupon (every fifth of them a
// coupon sent before, by its own order again or by another one).
func (l *killLoad) one(ctx context.Context) {
	i := l.seq.Add(1)
	switch i % 3 {
	case 0, 1:
		tpl, ch := l.hot, "hot"
		if i%3 == 1 {
			tpl, ch = l.wide, fmt.Sprintf("c%d", i%8)
		}
		rid := fmt.Sprintf("k%d", i)
		var out struct {
			UserCouponID int64 `json:"user_coupon_id"`
		}
		if l.post(ctx, "/v1/claims", map[string]any{"template_id": tpl, "user_id": fmt.Sprintf("u%d", i%500), "channel": ch,
			"request_id": rid}, &out) {
			l.mu.Lock()
			l.claims[rid], l.claimsOf[rid] = out.UserCouponID, [2]any{tpl, ch}
			l.mu.Unlock()
		}
	default:
		k := l.next.Add(1) - 1
		if k >= int64(len(l.pool)) {
			return
		}
		id, order := l.pool[k], fmt.Sprintf("o%d", k)
		if k%5 == 4 {
			id, order = l.pool[k-1-k%3], fmt.Sprintf("o%d", k-1-k%3+(k%2)*100_000)
		}
		var out struct {
			RedemptionID int64 `json:"redemption_id"`
		}
		if l.post(ctx, "/v1/redemptions", map[string]any{"user_coupon_id": id, "order_id": order}, &out) {
			l.mu.Lock()
			l.redeemed[out.RedemptionID], l.redeemedBy[out.RedemptionID] = id, order
			l.mu.Unlock()
		}
	}
}

// post sends a request and decodes a 2xx answer: true when acknowledged.
// A 409 (already_used) is an answer too, not acknowledged; a transport
// error or a 5xx is an unknown outcome.
func (l *killLoad) post(ctx context.Context, path string, body, out any) bool {
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.api.base()+path, bytes.NewReader(b))
	require.NoError(l.t, err)
	req.Header.Set("Content-Type", "application/json")
	res, err := l.api.client.Do(req)
	if err != nil {
		if ctx.Err() == nil && !errors.Is(err, syscall.ECONNREFUSED) {
			l.unknown.Add(1) // sent to a process that died: committed or not
		}
		return false
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	switch {
	case err != nil || res.StatusCode >= 500:
		l.unknown.Add(1)
		return false
	case res.StatusCode == http.StatusConflict:
		assert.Contains(l.t, string(data), `"already_used"`, path)
		return false
	case res.StatusCode != http.StatusCreated && res.StatusCode != http.StatusOK:
		l.t.Errorf("%s: unexpected answer %d %s", path, res.StatusCode, data)
		return false
	}
	require.NoError(l.t, json.Unmarshal(data, out))
	l.acked.Add(1)
	return true
}

// assertAcknowledged checks every acknowledged answer against the ledger.
func (l *killLoad) assertAcknowledged(e *cdcenv.Env) {
	t := l.t
	for rid, id := range l.claims {
		of := l.claimsOf[rid]
		assert.EqualValues(t, 1, count(t, e, `SELECT COUNT(*) FROM user_coupon WHERE id = ? AND request_id = ? AND template_id = ? AND channel = ?`,
			id, rid, of[0], of[1]), "claim %s answered coupon %d", rid, id)
	}
	for rid, id := range l.redeemed {
		assert.EqualValues(t, 1, count(t, e, `SELECT COUNT(*) FROM redemption_log r JOIN user_coupon c ON c.id = r.user_coupon_id
			WHERE r.id = ? AND r.user_coupon_id = ? AND r.order_id = ? AND c.status = 2 AND c.order_id = r.order_id`,
			rid, id, l.redeemedBy[rid]), "redemption %d of coupon %d", rid, id)
	}
	t.Logf("%d claims and %d redemptions acknowledged and found", len(l.claims), len(l.redeemed))
}

// apiRunner runs `couponlink api` processes one after the other.
type apiRunner struct {
	t                           *testing.T
	bin, dsn                    string
	client                      *http.Client
	addr                        atomic.Pointer[string]
	cmd                         *exec.Cmd
	out                         *testenv.Output
	claimGrouped, redeemGrouped bool
}

func newAPIRunner(t *testing.T, dsn string) *apiRunner {
	a := &apiRunner{t: t, bin: testenv.BuildCouponlink(t), dsn: dsn, out: &testenv.Output{},
		client: &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	t.Cleanup(func() {
		if a.cmd != nil {
			_ = a.cmd.Process.Kill()
			_ = a.cmd.Wait()
		}
		if t.Failed() {
			t.Logf("couponlink api output:\n%s", a.out.String())
		}
	})
	a.start()
	return a
}

func (a *apiRunner) base() string { return "http://" + *a.addr.Load() }

// start starts the api (both combiners on by default) and waits until it answers.
func (a *apiRunner) start() {
	addr := testenv.FreeAddr(a.t)
	a.cmd = exec.Command(a.bin, "api", "-dsn", a.dsn, "-addr", addr, "-expire-interval", "0", "-log-level", "warn")
	a.cmd.Stdout, a.cmd.Stderr = a.out, a.out
	require.NoError(a.t, a.cmd.Start())
	cdctest.WaitFor(a.t, 30*time.Second, "couponlink api answers /healthz", func() bool {
		res, err := a.client.Get("http://" + addr + "/healthz")
		if err != nil {
			return false
		}
		_ = res.Body.Close()
		return res.StatusCode == http.StatusOK
	})
	a.addr.Store(&addr)
}

var groupSums = regexp.MustCompile(`(?m)^couponlink_api_(claim|redemption)_group_size_(sum|count) (\S+)$`)

// kill notes whether the process ran groups of more than one request, and
// kills it with SIGKILL.
func (a *apiRunner) kill() {
	if res, err := a.client.Get(a.base() + "/metrics"); err == nil {
		body, _ := io.ReadAll(res.Body)
		_ = res.Body.Close()
		v := map[string]float64{}
		for _, m := range groupSums.FindAllStringSubmatch(string(body), -1) {
			v[m[1]+m[2]], _ = strconv.ParseFloat(m[3], 64)
		}
		a.claimGrouped = a.claimGrouped || v["claimsum"] > v["claimcount"]
		a.redeemGrouped = a.redeemGrouped || v["redemptionsum"] > v["redemptioncount"]
	}
	require.NoError(a.t, a.cmd.Process.Signal(syscall.SIGKILL))
	_ = a.cmd.Wait()
	a.cmd = nil
}
