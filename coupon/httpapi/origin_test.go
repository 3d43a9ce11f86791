package httpapi_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/coupon/httpapi"
)

// writeRoute is one write route with a body that it accepts.
type writeRoute struct {
	method, path string
	body         rawBody // "" sends no body
}

// writeFixture is a template with a policy override, a coupon redeemed by
// o1 (a), an AVAILABLE one (b) and one past its expiry (d), so that every
// write route has something to change.
type writeFixture struct{ tpl, a, b, d int64 }

func newWriteFixture(t *testing.T, e *env) writeFixture {
	t.Helper()
	var f writeFixture
	f.tpl = e.template(t, map[string]any{"valid_seconds": 10})
	f.d = e.claim(t, f.tpl, "u-d", "app").UserCouponID
	f.a = e.claim(t, f.tpl, "u-a", "app").UserCouponID
	e.redeem(t, f.a, "o1")
	e.expect(t, 200, "PUT", fmt.Sprintf("/v1/templates/%d/quota-policy", f.tpl), map[string]any{"mode": "signal", "changed_by": "ann", "reason": "r"}, nil)
	e.clock.Advance(time.Minute)
	f.b = e.claim(t, f.tpl, "u-b", "app").UserCouponID
	return f
}

// routes is every write route, each with a request that changes something.
func (f writeFixture) routes(t *testing.T) []writeRoute {
	tpl, id := f.tpl, f.a
	policy := fmt.Sprintf("/v1/templates/%d/quota-policy", tpl)
	return []writeRoute{
		{"POST", "/v1/templates", `{"name":"x","total_quota":1,"channels":{"app":1},"valid_seconds":60}`},
		{"POST", "/v1/claims", rawBody(mustJSON(t, map[string]any{"template_id": tpl, "user_id": "evil", "channel": "app", "request_id": "evil-1"}))},
		{"POST", "/v1/redemptions", rawBody(fmt.Sprintf(`{"user_coupon_id":%d,"order_id":"evil"}`, f.b))},
		{"POST", "/v1/refunds", rawBody(fmt.Sprintf(`{"user_coupon_id":%d,"order_id":"o1","mode":"recycle"}`, id))},
		{"POST", "/v1/voids", rawBody(fmt.Sprintf(`{"user_coupon_ids":[%d],"reason":"r","operator":"evil","request_id":"evil-v"}`, f.b))},
		{"POST", "/v1/expire", `{"limit":10}`},
		{"POST", "/v1/expire", ""},
		{"PUT", policy, `{"mode":"auto","changed_by":"evil","reason":"r"}`},
		{"DELETE", policy + "?changed_by=evil&reason=r", ""},
	}
}

// A browser's cross-site write — the kind a page sends without a CORS
// preflight (text/plain, a form) or any other — is refused on every write
// route, and writes nothing; so is a body not declared JSON.
func TestCrossSiteWritesRefused(t *testing.T) {
	e := newEnv(t)
	f := newWriteFixture(t, e)
	before := e.writeState(t)
	const evil = "http://evil.example"
	for _, rt := range f.routes(t) {
		name := rt.method + " " + rt.path
		for _, h := range []map[string]string{
			{"Origin": evil, "Content-Type": "text/plain"},
			{"Origin": evil, "Content-Type": "application/x-www-form-urlencoded"},
			{"Origin": evil, "Content-Type": "text/plain", "Sec-Fetch-Site": "cross-site"},
			{"Origin": evil, "Content-Type": "application/json"},
			{"Origin": "null", "Content-Type": "text/plain"},
			{"Origin": e.url + ".evil.example", "Content-Type": "application/json"},
			{"Sec-Fetch-Site": "cross-site", "Content-Type": "application/json"},
			{"Sec-Fetch-Site": "same-site", "Content-Type": "application/json"}, // another port of 127.0.0.1 is the same site
			{"Origin": e.url, "Sec-Fetch-Site": "cross-site", "Content-Type": "application/json"},
		} {
			r := rawRequest(t, e.url, rt.method, rt.path, rt.body, h)
			got := expectError(t, r, http.StatusForbidden, "forbidden_origin")
			assert.Contains(t, got.Message, "nothing was written", "%s %v", name, h)
		}
		if rt.body == "" {
			continue
		}
		for _, ct := range []string{"", "text/plain", "text/plain; charset=utf-8", "application/x-www-form-urlencoded",
			"multipart/form-data; boundary=x", "application/jsonp", "application/json-patch+json", "text/json", "json", ";"} {
			h := map[string]string{}
			if ct != "" {
				h["Content-Type"] = ct
			}
			r := rawRequest(t, e.url, rt.method, rt.path, rt.body, h)
			expectError(t, r, http.StatusUnsupportedMediaType, "unsupported_media_type")
		}
	}
	assert.Equal(t, before, e.writeState(t), "a refused write writes nothing")
	assert.Equal(t, []coupon.Status{coupon.Used, coupon.Available, coupon.Available}, []coupon.Status{e.status(t, f.a), e.status(t, f.b), e.status(t, f.d)})
}

// The API's own origin (a console it serves), an allowed origin, and
// callers that are not browsers (no Origin) write; a JSON Content-Type may
// carry parameters and any case. Reads are not guarded.
func TestWritesFromAllowedOrigins(t *testing.T) {
	const console = "https://console.example"
	for _, h := range []map[string]string{
		{"Content-Type": "application/json"}, // curl, a service
		{"Content-Type": "application/json; charset=utf-8"},
		{"Content-Type": "Application/JSON"},
		{"Origin": "ORIGIN", "Content-Type": "application/json"},                                  // the API's own, as an older browser says it
		{"Origin": "ORIGIN", "Sec-Fetch-Site": "same-origin", "Content-Type": "application/json"}, // and as a browser says it today
		{"Sec-Fetch-Site": "same-origin", "Content-Type": "application/json"},
		{"Origin": console, "Sec-Fetch-Site": "cross-site", "Content-Type": "application/json"},
		{"Origin": console, "Content-Type": "application/json"},
	} {
		t.Run(fmt.Sprint(h), func(t *testing.T) {
			e := newEnv(t, envConfig{origins: []string{"http://other.example", console}})
			f := newWriteFixture(t, e)
			if h["Origin"] == "ORIGIN" {
				h["Origin"] = e.url
			}
			for _, rt := range f.routes(t) {
				r := rawRequest(t, e.url, rt.method, rt.path, rt.body, h)
				assert.Contains(t, []int{200, 201}, r.Status, "%s %s: %s", rt.method, rt.path, r)
			}
			assert.Equal(t, []coupon.Status{coupon.Returned, coupon.Used, coupon.Expired}, []coupon.Status{e.status(t, f.a), e.status(t, f.b), e.status(t, f.d)})
			assert.Equal(t, 2, e.count(t, `SELECT COUNT(*) FROM coupon_template`))
			assert.Equal(t, 1, e.count(t, `SELECT COUNT(*) FROM user_coupon WHERE user_id = 'evil'`))
			assert.Equal(t, 1, e.count(t, `SELECT COUNT(*) FROM void_request`))
			assert.Equal(t, 0, e.count(t, `SELECT COUNT(*) FROM quota_policy WHERE template_id = ?`, f.tpl), "set, then reset")
		})
	}
	e := newEnv(t)
	tpl := e.template(t, nil)
	r := rawRequest(t, e.url, "GET", fmt.Sprintf("/v1/templates/%d/inventory", tpl), nil,
		map[string]string{"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"})
	assert.Equal(t, 200, r.Status, "a read is not guarded: a page cannot read the answer (no CORS headers): %s", r)
}

func TestParseAllowedOrigins(t *testing.T) {
	got, err := httpapi.ParseAllowedOrigins(" https://console.example, http://127.0.0.1:3000,,")
	require.NoError(t, err)
	assert.Equal(t, []string{"https://console.example", "http://127.0.0.1:3000"}, got)
	got, err = httpapi.ParseAllowedOrigins("")
	require.NoError(t, err)
	assert.Empty(t, got)
	for _, bad := range []string{"console.example", "https://console.example/", "https://console.example/app", "https://", "http://a.example?x=1"} {
		_, err := httpapi.ParseAllowedOrigins("https://ok.example," + bad)
		assert.Error(t, err, "%q", bad)
	}
}
