package client_test

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/client"
	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/coupon/httpapi"
)

// flaky serves the real API, except that the first attempts of one route
// fail as fail says; attempts counts the requests of that route.
type flaky struct {
	next     http.Handler
	pattern  string // "POST /v1/claims"
	failures int32  // how many first attempts fail
	fail     func(w http.ResponseWriter, r *http.Request, next http.Handler)
	attempts atomic.Int32
}

// wrap serves next through f.
func (f *flaky) wrap(next http.Handler) http.Handler {
	f.next = next
	return f
}

func (f *flaky) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method+" "+r.URL.Path != f.pattern {
		f.next.ServeHTTP(w, r)
		return
	}
	if n := f.attempts.Add(1); n <= f.failures {
		f.fail(w, r, f.next)
		return
	}
	f.next.ServeHTTP(w, r)
}

// servedThenReset lets the API serve the request (the claim is written),
// then resets the connection before any answer: the client cannot know.
func servedThenReset(w http.ResponseWriter, r *http.Request, next http.Handler) {
	next.ServeHTTP(httptest.NewRecorder(), r)
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(err)
	}
	if tcp, ok := conn.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0) // close with an RST
	}
	_ = conn.Close()
}

// unavailable answers 503 as the API does, without reaching it.
func unavailable(w http.ResponseWriter, _ *http.Request, _ http.Handler) {
	httpapi.WriteError(w, &coupon.Error{Code: "unavailable", Message: "try again"})
}

// TestClaimRetriedAfterConnectionReset: the first attempt claims, its
// answer is lost; the retry carries the same request id and answers the
// same coupon, replayed, and only one coupon exists.
func TestClaimRetriedAfterConnectionReset(t *testing.T) {
	f := &flaky{pattern: "POST /v1/claims", failures: 1, fail: servedThenReset}
	a, c, ctx, tpl := started(t, f.wrap)

	cl, err := c.Claim(ctx, client.ClaimRequest{TemplateID: tpl.ID, UserID: "u1", Channel: "app"})
	require.NoError(t, err)
	assert.EqualValues(t, 2, f.attempts.Load())
	assert.True(t, cl.Replayed, "the second attempt replays the first one's claim")
	var n int
	var id int64
	require.NoError(t, a.db.QueryRow(`SELECT COUNT(*), MAX(id) FROM user_coupon WHERE user_id = 'u1'`).Scan(&n, &id))
	assert.Equal(t, 1, n)
	assert.Equal(t, id, cl.UserCouponID, "the retry returns the coupon the first attempt claimed")
}

// TestRedeemRetriedAfter503: a 503 is retried; the redemption happens once.
func TestRedeemRetriedAfter503(t *testing.T) {
	f := &flaky{pattern: "POST /v1/redemptions", failures: 2, fail: unavailable}
	_, c, ctx, tpl := started(t, f.wrap)
	cl, err := c.Claim(ctx, client.ClaimRequest{TemplateID: tpl.ID, UserID: "u1", Channel: "app"})
	require.NoError(t, err)
	red, err := c.Redeem(ctx, client.RedeemRequest{UserCouponID: cl.UserCouponID, OrderID: "o1"})
	require.NoError(t, err)
	assert.EqualValues(t, 3, f.attempts.Load())
	assert.False(t, red.Replayed)
	assert.Equal(t, "USED", red.Status)
}

// TestRetriesAreBounded: a route that always fails is tried
// DefaultMaxAttempts... here 4 times (WithRetries), and the last error is
// returned with its code.
func TestRetriesAreBounded(t *testing.T) {
	a := newAPI(t)
	f := &flaky{next: a.srv, pattern: "GET /healthz", failures: 100, fail: unavailable}
	c := serve(t, f)
	_, err := c.Health(ctxOf(t))
	require.Error(t, err)
	assert.EqualValues(t, 4, f.attempts.Load())
	assert.Equal(t, client.CodeUnavailable, client.ErrorCode(err))
}

// TestCreateTemplateIsNotRetried: no idempotency key, so a lost answer
// could mean a second template: one attempt only.
func TestCreateTemplateIsNotRetried(t *testing.T) {
	a := newAPI(t)
	f := &flaky{next: a.srv, pattern: "POST /v1/templates", failures: 1, fail: servedThenReset}
	c := serve(t, f)
	_, err := c.CreateTemplate(ctxOf(t), twoChannels("once", 1))
	require.Error(t, err)
	var apiErr *client.Error
	assert.False(t, errors.As(err, &apiErr), "a transport error, not an API answer: %v", err)
	assert.EqualValues(t, 1, f.attempts.Load())
	var n int
	require.NoError(t, a.db.QueryRow(`SELECT COUNT(*) FROM coupon_template`).Scan(&n))
	assert.Equal(t, 1, n, "the one attempt was served; no second template")
}

// TestTypedErrors: the API's codes come back as *client.Error values.
func TestTypedErrors(t *testing.T) {
	a := newAPI(t)
	c := serve(t, a.srv)
	ctx := ctxOf(t)
	tpl, err := c.CreateTemplate(ctx, client.NewTemplate{Name: "one", TotalQuota: 1, Channels: map[string]int64{"app": 1}, ValidSeconds: 60})
	require.NoError(t, err)
	cl, err := c.Claim(ctx, client.ClaimRequest{TemplateID: tpl.ID, UserID: "u1", Channel: "app"})
	require.NoError(t, err)

	_, err = c.Claim(ctx, client.ClaimRequest{TemplateID: tpl.ID, UserID: "u2", Channel: "app"})
	var e *client.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, client.CodeSoldOut, e.Code)
	assert.Equal(t, http.StatusConflict, e.Status)

	_, err = c.GetTemplate(ctx, tpl.ID+1000)
	assert.True(t, client.IsCode(err, client.CodeNotFound), "%v", err)

	_, err = c.Claim(ctx, client.ClaimRequest{TemplateID: tpl.ID, UserID: "", Channel: "app"})
	require.ErrorAs(t, err, &e)
	assert.Equal(t, client.CodeInvalidArgument, e.Code)
	assert.Equal(t, "user_id", e.Field)

	_, err = c.Redeem(ctx, client.RedeemRequest{UserCouponID: cl.UserCouponID, OrderID: "o1"})
	require.NoError(t, err)
	_, err = c.Redeem(ctx, client.RedeemRequest{UserCouponID: cl.UserCouponID, OrderID: "o2"})
	assert.Equal(t, client.CodeAlreadyUsed, client.ErrorCode(err))
	_, err = c.Refund(ctx, client.RefundRequest{UserCouponID: cl.UserCouponID, OrderID: "o2", Mode: client.RefundRestore})
	assert.Equal(t, client.CodeOrderMismatch, client.ErrorCode(err))

	anon := client.New(serveURL(t, a.srv))
	_, err = anon.GetTemplate(ctx, tpl.ID)
	assert.Equal(t, client.CodeUnauthorized, client.ErrorCode(err))
	_, err = anon.OpenAPI(ctx)
	assert.NoError(t, err, "the document is public")
}

func serveURL(t *testing.T, h http.Handler) string {
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts.URL
}

// TestNewRequestID: 32 hex characters, never the same twice.
func TestNewRequestID(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := client.NewRequestID()
		require.Regexp(t, "^[0-9a-f]{32}$", id)
		require.False(t, seen[id])
		seen[id] = true
	}
}
