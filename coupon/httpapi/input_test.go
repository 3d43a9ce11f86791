package httpapi_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/coupon/httpapi"
	"github.com/couponlink/couponlink/internal/testenv"
)

type badCase struct {
	name   string
	method string
	path   string
	body   any
	status int
	code   string
	field  string // "" means the error has no field
}

// Every kind of bad input is refused with its status, code and field, in
// the one error shape, and writes nothing.
func TestBadInput(t *testing.T) {
	e := newEnv(t)
	tpl := e.template(t, nil)
	c := e.claim(t, tpl, "u0", "app")
	e.redeem(t, c.UserCouponID, "o1")

	tmpl := func(kv ...any) rawBody {
		return overridden(t, map[string]any{"name": "x", "total_quota": 10, "channels": map[string]int{"app": 6, "sms": 4}, "valid_seconds": 60}, kv...)
	}
	claim := func(kv ...any) rawBody {
		return overridden(t, map[string]any{"template_id": tpl, "user_id": "u1", "channel": "app", "request_id": "r1"}, kv...)
	}
	id := c.UserCouponID
	tooMany := make([]int64, 1001)
	for i := range tooMany {
		tooMany[i] = int64(i + 1)
	}
	big := rawBody(`{"name": "` + strings.Repeat("x", 1<<20) + `"}`)

	cases := []badCase{
		// templates
		{"template without total_quota", "POST", "/v1/templates", tmpl("total_quota", nil), 400, "invalid_argument", "total_quota"},
		{"template with negative total_quota", "POST", "/v1/templates", tmpl("total_quota", -10), 400, "invalid_argument", "total_quota"},
		{"template without valid_seconds", "POST", "/v1/templates", tmpl("valid_seconds", nil), 400, "invalid_argument", "valid_seconds"},
		{"template with negative valid_seconds", "POST", "/v1/templates", tmpl("valid_seconds", -1), 400, "invalid_argument", "valid_seconds"},
		{"template with negative per_user_limit", "POST", "/v1/templates", tmpl("per_user_limit", -1), 400, "invalid_argument", "per_user_limit"},
		{"template with zero per_user_limit", "POST", "/v1/templates", tmpl("per_user_limit", 0), 400, "invalid_argument", "per_user_limit"},
		{"template whose channels do not add up", "POST", "/v1/templates", tmpl("channels", map[string]int{"app": 6, "sms": 5}), 400, "invalid_argument", "channels"},
		{"template whose channel quotas overflow", "POST", "/v1/templates", tmpl("total_quota", 1, "channels", map[string]int64{"a": 1<<63 - 1, "b": 1<<63 - 1, "c": 3}), 400, "invalid_argument", "channels"},
		{"template whose channel exceeds total_quota", "POST", "/v1/templates", tmpl("channels", map[string]int64{"app": 11, "sms": -1}), 400, "invalid_argument", "channels"},
		{"template with valid_seconds past 100 years", "POST", "/v1/templates", tmpl("valid_seconds", int64(1e11)), 400, "invalid_argument", "valid_seconds"},
		{"template with per_user_limit past an INT", "POST", "/v1/templates", tmpl("per_user_limit", int64(1e10)), 400, "invalid_argument", "per_user_limit"},
		{"template with a cooldown past 100 years", "POST", "/v1/templates", tmpl("release_cooldown_seconds", int64(1e14)), 400, "invalid_argument", "release_cooldown_seconds"},
		{"template with total_quota past an int64", "POST", "/v1/templates", rawBody(`{"name":"x","total_quota":9223372036854775808}`), 400, "invalid_argument", "total_quota"},
		{"template with a negative channel quota", "POST", "/v1/templates", tmpl("total_quota", 2, "channels", map[string]int{"app": 6, "sms": -4}), 400, "invalid_argument", "channels"},
		{"template without channels", "POST", "/v1/templates", tmpl("channels", nil), 400, "invalid_argument", "channels"},
		{"template with an empty channel name", "POST", "/v1/templates", tmpl("channels", map[string]int{"": 10}), 400, "invalid_argument", "channels"},
		{"template without name", "POST", "/v1/templates", tmpl("name", nil), 400, "invalid_argument", "name"},
		{"template with an unknown policy", "POST", "/v1/templates", tmpl("expiry_policy", "burn"), 400, "invalid_argument", "expiry_policy"},
		{"template with a negative cooldown", "POST", "/v1/templates", tmpl("release_cooldown_seconds", -1), 400, "invalid_argument", "release_cooldown_seconds"},
		{"template with an unknown field", "POST", "/v1/templates", tmpl("colour", "red"), 400, "invalid_argument", "colour"},
		{"template with total_quota as a string", "POST", "/v1/templates", tmpl("total_quota", "10"), 400, "invalid_argument", "total_quota"},
		{"template with total_quota as a fraction", "POST", "/v1/templates", rawBody(`{"name":"x","total_quota":1.5}`), 400, "invalid_argument", "total_quota"},
		{"template with channels as a list", "POST", "/v1/templates", tmpl("channels", []string{"app"}), 400, "invalid_argument", "channels"},
		{"template with name as a number", "POST", "/v1/templates", tmpl("name", 7), 400, "invalid_argument", "name"},
		// claims
		{"claim without template_id", "POST", "/v1/claims", claim("template_id", nil), 400, "invalid_argument", "template_id"},
		{"claim with negative template_id", "POST", "/v1/claims", claim("template_id", -1), 400, "invalid_argument", "template_id"},
		{"claim with template_id as a string", "POST", "/v1/claims", claim("template_id", "1"), 400, "invalid_argument", "template_id"},
		{"claim without user_id", "POST", "/v1/claims", claim("user_id", nil), 400, "invalid_argument", "user_id"},
		{"claim with user_id as a number", "POST", "/v1/claims", claim("user_id", 5), 400, "invalid_argument", "user_id"},
		{"claim without channel", "POST", "/v1/claims", claim("channel", nil), 400, "invalid_argument", "channel"},
		{"claim on an unknown channel", "POST", "/v1/claims", claim("channel", "tv"), 400, "invalid_argument", "channel"},
		{"claim without request_id", "POST", "/v1/claims", claim("request_id", nil), 400, "invalid_argument", "request_id"},
		{"claim with an unknown field", "POST", "/v1/claims", claim("coupon", 1), 400, "invalid_argument", "coupon"},
		{"claim of an unknown template", "POST", "/v1/claims", claim("template_id", 424242), 404, "not_found", ""},
		// redemptions
		{"redemption without user_coupon_id", "POST", "/v1/redemptions", rawBody(`{"order_id":"o9"}`), 400, "invalid_argument", "user_coupon_id"},
		{"redemption with negative user_coupon_id", "POST", "/v1/redemptions", rawBody(`{"user_coupon_id":-3,"order_id":"o9"}`), 400, "invalid_argument", "user_coupon_id"},
		{"redemption with user_coupon_id as a string", "POST", "/v1/redemptions", rawBody(fmt.Sprintf(`{"user_coupon_id":"%d","order_id":"o9"}`, id)), 400, "invalid_argument", "user_coupon_id"},
		{"redemption without order_id", "POST", "/v1/redemptions", rawBody(fmt.Sprintf(`{"user_coupon_id":%d}`, id)), 400, "invalid_argument", "order_id"},
		{"redemption with a blank order_id", "POST", "/v1/redemptions", rawBody(fmt.Sprintf(`{"user_coupon_id":%d,"order_id":"  "}`, id)), 400, "invalid_argument", "order_id"},
		{"redemption with a too long order_id", "POST", "/v1/redemptions", rawBody(fmt.Sprintf(`{"user_coupon_id":%d,"order_id":"%s"}`, id, strings.Repeat("o", 65))), 400, "invalid_argument", "order_id"},
		{"redemption of an unknown coupon", "POST", "/v1/redemptions", rawBody(`{"user_coupon_id":424242,"order_id":"o9"}`), 404, "not_found", ""},
		// refunds
		{"refund without mode", "POST", "/v1/refunds", rawBody(fmt.Sprintf(`{"user_coupon_id":%d,"order_id":"o1"}`, id)), 400, "invalid_argument", "mode"},
		{"refund with an unknown mode", "POST", "/v1/refunds", rawBody(fmt.Sprintf(`{"user_coupon_id":%d,"order_id":"o1","mode":"burn"}`, id)), 400, "invalid_argument", "mode"},
		{"refund with negative user_coupon_id", "POST", "/v1/refunds", rawBody(`{"user_coupon_id":-1,"order_id":"o1","mode":"restore"}`), 400, "invalid_argument", "user_coupon_id"},
		{"refund without order_id", "POST", "/v1/refunds", rawBody(fmt.Sprintf(`{"user_coupon_id":%d,"mode":"restore"}`, id)), 400, "invalid_argument", "order_id"},
		{"refund of an unknown coupon", "POST", "/v1/refunds", rawBody(`{"user_coupon_id":424242,"order_id":"o1","mode":"restore"}`), 404, "not_found", ""},
		// voids
		{"void without ids", "POST", "/v1/voids", rawBody(`{"user_coupon_ids":[],"reason":"r","operator":"op","request_id":"v"}`), 400, "invalid_argument", "user_coupon_ids"},
		{"void with a negative id", "POST", "/v1/voids", rawBody(`{"user_coupon_ids":[1,-2],"reason":"r","operator":"op","request_id":"v"}`), 400, "invalid_argument", "user_coupon_ids"},
		{"void with an id twice", "POST", "/v1/voids", rawBody(`{"user_coupon_ids":[1,1],"reason":"r","operator":"op","request_id":"v"}`), 400, "invalid_argument", "user_coupon_ids"},
		{"void of more than 1000 coupons", "POST", "/v1/voids", map[string]any{"user_coupon_ids": tooMany, "reason": "r", "operator": "op", "request_id": "v"}, 400, "invalid_argument", "user_coupon_ids"},
		{"void with ids as strings", "POST", "/v1/voids", rawBody(`{"user_coupon_ids":["1"],"reason":"r","operator":"op","request_id":"v"}`), 400, "invalid_argument", "user_coupon_ids"},
		{"void without reason", "POST", "/v1/voids", rawBody(`{"user_coupon_ids":[1],"operator":"op","request_id":"v"}`), 400, "invalid_argument", "reason"},
		{"void without operator", "POST", "/v1/voids", rawBody(`{"user_coupon_ids":[1],"reason":"r","request_id":"v"}`), 400, "invalid_argument", "operator"},
		{"void without request_id", "POST", "/v1/voids", rawBody(`{"user_coupon_ids":[1],"reason":"r","operator":"op"}`), 400, "invalid_argument", "request_id"},
		// expiry sweep
		{"expire with a negative limit", "POST", "/v1/expire", rawBody(`{"limit":-1}`), 400, "invalid_argument", "limit"},
		{"expire with limit as a string", "POST", "/v1/expire", rawBody(`{"limit":"all"}`), 400, "invalid_argument", "limit"},
		{"expire with an unknown field", "POST", "/v1/expire", rawBody(`{"limt":5}`), 400, "invalid_argument", "limt"},
		// bodies
		{"a body over 1 MiB", "POST", "/v1/templates", big, 400, "invalid_argument", ""},
		{"a body that is not JSON", "POST", "/v1/claims", rawBody(`template_id=1&user_id=u1`), 400, "invalid_argument", ""},
		{"a body cut short", "POST", "/v1/claims", rawBody(`{"template_id": 1, "user_id"`), 400, "invalid_argument", ""},
		{"two JSON objects", "POST", "/v1/claims", rawBody(string(claim()) + `{"template_id":1}`), 400, "invalid_argument", ""},
		{"an object then garbage", "POST", "/v1/redemptions", rawBody(`{"user_coupon_id":1,"order_id":"o"} x`), 400, "invalid_argument", ""},
		{"an empty body", "POST", "/v1/claims", rawBody(``), 400, "invalid_argument", ""},
		{"an array for an object", "POST", "/v1/claims", rawBody(`[1,2]`), 400, "invalid_argument", ""},
		{"a bare string", "POST", "/v1/redemptions", rawBody(`"hello"`), 400, "invalid_argument", ""},
		{"non-JSON to the sweep", "POST", "/v1/expire", rawBody(`now please`), 400, "invalid_argument", ""},
		// ids and routes
		{"inventory of an unknown template", "GET", "/v1/templates/424242/inventory", nil, 404, "not_found", ""},
		{"an unknown template", "GET", "/v1/templates/424242", nil, 404, "not_found", ""},
		{"history of an unknown coupon", "GET", "/v1/user-coupons/424242/history", nil, 404, "not_found", ""},
		{"a path id that is not a number", "GET", "/v1/templates/abc/inventory", nil, 400, "invalid_argument", "id"},
		{"a path id of zero", "GET", "/v1/templates/0/inventory", nil, 400, "invalid_argument", "id"},
		{"a negative path id", "GET", "/v1/templates/-4", nil, 400, "invalid_argument", "id"},
		{"a path id too big", "GET", "/v1/user-coupons/99999999999999999999/history", nil, 400, "invalid_argument", "id"},
		{"a history path id that is not a number", "GET", "/v1/user-coupons/1.5/history", nil, 400, "invalid_argument", "id"},
		{"GET on a POST route", "GET", "/v1/claims", nil, 405, "method_not_allowed", ""},
		{"PUT on a POST route", "PUT", "/v1/redemptions", rawBody(`{}`), 405, "method_not_allowed", ""},
		{"DELETE on a GET route", "DELETE", "/v1/templates/1", nil, 405, "method_not_allowed", ""},
		{"POST on a GET route", "POST", "/v1/templates/1/inventory", rawBody(`{}`), 405, "method_not_allowed", ""},
		{"POST on healthz", "POST", "/healthz", nil, 405, "method_not_allowed", ""},
		{"an unknown route", "GET", "/v1/coupons", nil, 404, "not_found", ""},
		{"an unknown route outside /v1", "GET", "/admin", nil, 404, "not_found", ""},
		{"an unknown sub-route", "GET", "/v1/templates/1/stock", nil, 404, "not_found", ""},
	}
	e.refuseAll(t, cases)
	assert.Equal(t, 0, e.count(t, `SELECT COUNT(*) FROM void_request`))
}

// refuseAll sends every case, checks its refusal (status, code, field, the
// one error shape), and that none of them wrote anything.
func (e *env) refuseAll(t *testing.T, cases []badCase) {
	t.Helper()
	before := e.writeState(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := e.must(t, tc.method, tc.path, tc.body)
			got := expectError(t, r, tc.status, tc.code)
			assert.Equal(t, tc.field, got.Field, "field of %s", r)
			if tc.status == 405 {
				assert.NotEmpty(t, r.Header.Get("Allow"))
			}
		})
	}
	assert.Equal(t, before, e.writeState(t), "a refused request writes nothing")
}

// overridden is body as JSON with each key of kv (key, value pairs) set
// to its value, or removed where the value is nil.
func overridden(t *testing.T, body map[string]any, kv ...any) rawBody {
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(body, kv[i].(string))
		} else {
			body[kv[i].(string)] = kv[i+1]
		}
	}
	return rawBody(mustJSON(t, body))
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// rawRequest sends a request with these headers only (none added), and
// body as it is when a rawBody, else as JSON.
func rawRequest(t *testing.T, base, method, path string, body any, header map[string]string) reply {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case rawBody:
		rd = strings.NewReader(string(b))
	default:
		rd = strings.NewReader(mustJSON(t, body))
	}
	req, err := http.NewRequest(method, base+path, rd)
	require.NoError(t, err)
	for k, v := range header {
		if k == "Host" {
			req.Host = v // Go sends req.Host, never a Host header of req.Header
			continue
		}
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	buf, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return reply{Status: res.StatusCode, Body: buf, Header: res.Header}
}

// With a token, every /v1 route needs it: none or a wrong one is 401 and
// writes nothing; /healthz and /metrics stay open; the right one works.
func TestAuth(t *testing.T) {
	e := newEnv(t, envConfig{token: "s3cret"})
	tpl := e.template(t, nil) // e.api sends the right token

	anon := newClient(e.url, "")
	wrong := newClient(e.url, "s3cret-not")
	routes := []struct {
		method, path string
		body         any
	}{
		{"POST", "/v1/templates", map[string]any{"name": "x", "total_quota": 1, "channels": map[string]int{"app": 1}, "valid_seconds": 1}},
		{"GET", fmt.Sprintf("/v1/templates/%d", tpl), nil},
		{"GET", fmt.Sprintf("/v1/templates/%d/inventory", tpl), nil},
		{"POST", "/v1/claims", map[string]any{"template_id": tpl, "user_id": "u1", "channel": "app", "request_id": "r1"}},
		{"POST", "/v1/redemptions", map[string]any{"user_coupon_id": 1, "order_id": "o1"}},
		{"POST", "/v1/refunds", map[string]any{"user_coupon_id": 1, "order_id": "o1", "mode": "restore"}},
		{"POST", "/v1/voids", map[string]any{"user_coupon_ids": []int{1}, "reason": "r", "operator": "op", "request_id": "v1"}},
		{"POST", "/v1/expire", map[string]any{}},
		{"GET", "/v1/user-coupons/1/history", nil},
	}
	before := e.ledgers(t)
	for _, rt := range routes {
		for _, c := range []*client{anon, wrong} {
			r, err := c.do(rt.method, rt.path, rt.body)
			require.NoError(t, err)
			expectError(t, r, http.StatusUnauthorized, "unauthorized")
		}
		for _, h := range []string{"s3cret", "Basic s3cret", "Bearer ", "Bearer s3cret-not", "Bearer\ts3cret", "Bearers3cret"} {
			r := rawRequest(t, e.url, rt.method, rt.path, rt.body, map[string]string{"Authorization": h})
			expectError(t, r, http.StatusUnauthorized, "unauthorized")
		}
	}
	assert.Equal(t, before, e.ledgers(t), "a refused request writes nothing")
	assert.Equal(t, 0, e.count(t, `SELECT COUNT(*) FROM void_request`))

	for _, path := range []string{"/healthz", "/metrics"} {
		r, err := anon.do("GET", path, nil)
		require.NoError(t, err)
		assert.Equal(t, 200, r.Status, "%s %s", path, r)
	}
	// the right token works on every route
	c := e.claim(t, tpl, "u1", "app")
	e.redeem(t, c.UserCouponID, "o1")
	e.refund(t, c.UserCouponID, "o1", "restore")
	e.void(t, "v1", c.UserCouponID)
	e.expire(t, map[string]any{})
	e.inventory(t, tpl)
	e.expect(t, 200, "GET", fmt.Sprintf("/v1/user-coupons/%d/history", c.UserCouponID), nil, nil)
	assert.Equal(t, coupon.Returned, e.status(t, c.UserCouponID))
}

// Without a token, no header is needed.
func TestAuthOff(t *testing.T) {
	e := newEnv(t)
	anon := newClient(e.url, "")
	r, err := anon.do("POST", "/v1/templates", map[string]any{"name": "x", "total_quota": 1, "channels": map[string]int{"app": 1}, "valid_seconds": 1})
	require.NoError(t, err)
	assert.Equal(t, 201, r.Status, "%s", r)
	r = rawRequest(t, e.url, "GET", "/v1/templates/1/inventory", nil, map[string]string{"Authorization": "Bearer whatever"})
	assert.Equal(t, 200, r.Status, "%s", r)
	assert.Equal(t, 1, e.count(t, `SELECT COUNT(*) FROM coupon_template`))
}

// The scheme name of Authorization is case-insensitive and may be followed
// by more than one space (RFC 9110, RFC 6750).
func TestAuthSchemeCase(t *testing.T) {
	e := newEnv(t, envConfig{token: "s3cret"})
	tpl := e.template(t, nil)
	for _, h := range []string{"Bearer s3cret", "bearer s3cret", "BEARER s3cret", "bEaReR s3cret", "Bearer  s3cret"} {
		r := rawRequest(t, e.url, "GET", fmt.Sprintf("/v1/templates/%d", tpl), nil, map[string]string{"Authorization": h})
		assert.Equal(t, 200, r.Status, "%q: %s", h, r)
		r = rawRequest(t, e.url, "POST", "/v1/claims", map[string]any{"template_id": tpl, "user_id": h, "channel": "app", "request_id": uniq("r")},
			map[string]string{"Authorization": h, "Content-Type": "application/json"})
		assert.Equal(t, 201, r.Status, "%q: %s", h, r)
	}
	assert.Equal(t, 5, e.count(t, `SELECT COUNT(*) FROM user_coupon`))
}

// With a token, nothing under /v1 is answered before the token is checked:
// an unknown path or a wrong method is 401 like a known route, so that a
// caller without the token learns nothing of the routes. Outside /v1 the
// usual 404 and 405 stay.
func TestAuthBeforeRouting(t *testing.T) {
	e := newEnv(t, envConfig{token: "s3cret"})
	anon := newClient(e.url, "")
	cases := []struct {
		method, path string
		status       int // with the token
	}{
		{"GET", "/v1/coupons", 404},
		{"GET", "/v1/templates/1/stock", 404},
		{"GET", "/v1", 404},
		{"POST", "/v1/", 404},
		{"GET", "/v1/claims", 405},
		{"PUT", "/v1/redemptions", 405},
		{"DELETE", "/v1/templates/1", 405},
		{"PATCH", "/v1/templates/1/quota-policy", 405},
	}
	for _, c := range cases {
		r, err := anon.do(c.method, c.path, nil)
		require.NoError(t, err)
		expectError(t, r, http.StatusUnauthorized, "unauthorized")
		assert.Empty(t, r.Header.Get("Allow"), "%s %s: a 401 tells no methods", c.method, c.path)
		r = e.must(t, c.method, c.path, nil)
		assert.Equal(t, c.status, r.Status, "%s %s with the token: %s", c.method, c.path, r)
	}
	r, err := anon.do("POST", "/healthz", nil)
	require.NoError(t, err)
	expectError(t, r, http.StatusMethodNotAllowed, "method_not_allowed")
	r, err = anon.do("GET", "/admin", nil)
	require.NoError(t, err)
	expectError(t, r, http.StatusNotFound, "not_found")
	assert.Equal(t, map[string]float64{
		`couponlink_api_requests_total{code="401",route="/"}`:                               4,
		`couponlink_api_requests_total{code="401",route="/v1/claims"}`:                      1,
		`couponlink_api_requests_total{code="401",route="/v1/redemptions"}`:                 1,
		`couponlink_api_requests_total{code="401",route="/v1/templates/{id}"}`:              1,
		`couponlink_api_requests_total{code="401",route="/v1/templates/{id}/quota-policy"}`: 1,
	}, series(t, e, "couponlink_api_requests_total"), "401s are counted by the pattern they hit")
}

// /healthz answers when MySQL does.
func TestHealthz(t *testing.T) {
	e := newEnv(t)
	var h struct{ Status string }
	e.expect(t, 200, "GET", "/healthz", nil, &h)
	assert.Equal(t, "ok", h.Status)
}

// When MySQL does not answer, /healthz (open to anyone) says so without the
// driver's error, which names the server's address; the log has it.
func TestHealthzMySQLDown(t *testing.T) {
	db, addr := testenv.UnreachableMySQL(t)
	store, err := coupon.New(coupon.Config{DB: db})
	require.NoError(t, err)
	log, logs := testenv.Logger()
	srv := httptest.NewServer(httpapi.New(httpapi.Config{Store: store, Logger: log}))
	t.Cleanup(srv.Close)

	r := rawRequest(t, srv.URL, "GET", "/healthz", nil, nil)
	got := expectError(t, r, http.StatusServiceUnavailable, "unavailable")
	assert.Contains(t, got.Message, "MySQL does not answer")
	_, port, _ := net.SplitHostPort(addr)
	for _, secret := range []string{addr, port, "127.0.0.1", "dial", "tcp", "pw"} {
		assert.NotContains(t, string(r.Body), secret)
	}
	assert.Contains(t, logs(), addr, "the address is logged")
	assert.Equal(t, 1, strings.Count(logs(), "MySQL does not answer"), "logged once per failed check")
}
