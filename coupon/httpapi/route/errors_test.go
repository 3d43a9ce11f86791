package route_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/coupon/httpapi/route"
)

// sameErrors sends requests the front cannot route by an id (malformed
// ids and bodies, unknown routes, wrong methods, no token, a body too
// large) and ids that exist nowhere, to the front and to the first
// primary's own server: the answers are the same, status and body.
func (e *native) sameErrors() {
	t := e.t
	big := `{"template_id": 1, "user_id": "` + strings.Repeat("x", 1<<20) + `"}`
	for _, r := range []request{
		{method: http.MethodGet, path: "/v1/templates/abc"},
		{method: http.MethodGet, path: "/v1/templates/0"},
		{method: http.MethodGet, path: "/v1/templates/-4/channels"},
		{method: http.MethodGet, path: "/v1/templates/999"},
		{method: http.MethodGet, path: "/v1/templates/1000/channels"}, // p1's id, on no primary
		{method: http.MethodGet, path: "/v1/templates/1/nope"},
		{method: http.MethodPost, path: "/v1/templates/1", body: `{}`},
		{method: http.MethodGet, path: "/v1/user-coupons/x/history"},
		{method: http.MethodGet, path: "/v1/user-coupons/99998/history"},
		{method: http.MethodGet, path: "/v1/user-coupons/99999/history"},
		{method: http.MethodPost, path: "/v1/claims", body: `not json`},
		{method: http.MethodPost, path: "/v1/claims", body: `{"template_id": "2"}`},
		{method: http.MethodPost, path: "/v1/claims", body: `{"template_id": 2, "template_id": 2, "user_id": "u", "channel": "app", "request_id": "r"}`},
		{method: http.MethodPost, path: "/v1/claims", body: `{"TEMPLATE_ID": 2, "user_id": "u", "channel": "app", "request_id": "r"}`},
		{method: http.MethodPost, path: "/v1/claims", body: `{"template_id": 1000, "user_id": "u", "channel": "app", "request_id": "r"}`},
		{method: http.MethodPost, path: "/v1/claims", body: `{"template_id": 3, "user_id": "u", "channel": "nope", "request_id": "r"}`},
		{method: http.MethodPost, path: "/v1/claims", body: big},
		{method: http.MethodPost, path: "/v1/claims", body: `{"template_id": 2}`, header: map[string]string{"Content-Type": "text/plain"}},
		{method: http.MethodPost, path: "/v1/claims", body: `{"template_id": 2}`, noToken: true},
		{method: http.MethodPost, path: "/v1/claims", body: `{"template_id": 2}`, header: map[string]string{"Authorization": "Bearer wrong"}},
		{method: http.MethodGet, path: "/v1/nope", noToken: true},
		{method: http.MethodPost, path: "/v1/redemptions", body: `{"user_coupon_id": 0, "order_id": "o"}`},
		{method: http.MethodPost, path: "/v1/redemptions", body: `{"user_coupon_id": 1000002, "order_id": "o"}`},
		{method: http.MethodPost, path: "/v1/refunds", body: `{"user_coupon_id": 1000001, "order_id": "o", "mode": "restore"}`},
		{method: http.MethodPost, path: "/v1/refunds", body: `[]`},
		{method: http.MethodPost, path: "/v1/voids", body: `{}`},
		{method: http.MethodPost, path: "/v1/voids", body: `{"user_coupon_ids": [1, 1], "reason": "r", "operator": "o", "request_id": "v"}`},
		{method: http.MethodPost, path: "/v1/voids", body: `{"user_coupon_ids": [1, 2], "reason": "", "operator": "o", "request_id": "v"}`},
		{method: http.MethodPost, path: "/v1/voids", body: `{"user_coupon_ids": "1"}`},
		{method: http.MethodPost, path: "/v1/expire", body: `{"limit": -1}`},
		{method: http.MethodPost, path: "/v1/expire", body: `{"LIMIT": 1}`},
		{method: http.MethodPost, path: "/v1/expire", body: `{"limit": 1, "x": 2}`},
		{method: http.MethodPost, path: "/v1/templates", body: `{"name": ""}`},
		{method: http.MethodGet, path: "/v1/claims"},
		{method: http.MethodDelete, path: "/v1/templates"},
		{method: http.MethodPut, path: "/v1/expire", body: `{}`},
		{method: http.MethodGet, path: "/nope"},
	} {
		what := r.method + " " + r.path + " " + r.body[:min(len(r.body), 80)]
		code, body := e.do(r)
		wantCode, wantBody := e.direct(0, r)
		assert.GreaterOrEqual(t, code, 400, what)
		assert.Equal(t, wantCode, code, what)
		assert.Equal(t, string(wantBody), string(body), what)
	}
}

// stub is a primary's API that answers every request with its status, and
// counts what reached it.
type stub struct {
	status int
	calls  int
}

func (s *stub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.calls++
	w.WriteHeader(s.status)
}

func (s *stub) Authorized(r *http.Request) bool { return r.Header.Get("Authorization") == "ok" }

// /healthz is ok only when every primary is, and names the ones that are
// not; a request without the token goes to the first primary before the
// front reads or places anything.
func TestFrontHealthAndToken(t *testing.T) {
	p0, p1 := &stub{status: http.StatusOK}, &stub{status: http.StatusServiceUnavailable}
	placed := 0
	front, err := route.New(route.Config{Primaries: []route.Primary{{Name: "p0", API: p0}, {Name: "p1", API: p1}},
		Place: func(context.Context) (int, error) { placed++; return 1, nil }})
	require.NoError(t, err)

	rec := httptest.NewRecorder()
	front.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.JSONEq(t, `{"error":{"code":"unavailable","message":"MySQL of primary p1 does not answer; the reason is in the server log"}}`, rec.Body.String())
	p1.status = http.StatusOK
	rec = httptest.NewRecorder()
	front.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	assert.Equal(t, http.StatusOK, rec.Code)
	assert.Contains(t, rec.Body.String(), `"primaries":{"p0":"ok","p1":"ok"}`)

	p0.calls, p1.calls = 0, 0
	for _, path := range []string{"/v1/templates", "/v1/voids", "/v1/expire", "/v1/claims"} {
		front.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, path, strings.NewReader(`{"template_id": 2, "request_id": "x"}`)))
	}
	assert.Equal(t, 4, p0.calls, "every request without the token goes to the first primary")
	assert.Zero(t, p1.calls)
	assert.Zero(t, placed, "nothing placed for a caller without the token")

	req := httptest.NewRequest(http.MethodPost, "/v1/templates", strings.NewReader(`{}`))
	req.Header.Set("Authorization", "ok")
	front.ServeHTTP(httptest.NewRecorder(), req)
	assert.Equal(t, 1, placed)
	assert.Equal(t, 1, p1.calls, "placed on the primary Place picked")
}
