package httpapi_test

import (
	"fmt"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/coupon/httpapi"
)

// rebinding is what a browser sends for a page of evil.example:8080 whose
// name now points at the API: Host and Origin its own, so the origin
// check sees a same-origin request.
var rebinding = map[string]string{"Host": "evil.example:8080", "Origin": "http://evil.example:8080", "Sec-Fetch-Site": "same-origin"}

// withHeaders is h with the header of a JSON body added.
func withHeaders(h map[string]string, body rawBody) map[string]string {
	out := map[string]string{}
	for k, v := range h {
		out[k] = v
	}
	if body != "" {
		out["Content-Type"] = "application/json"
	}
	return out
}

// An API without tokens refuses a DNS-rebinding page: every read and
// write under /v1 (an unknown path too) is 403 host_not_allowed, naming
// the Host and the settings that fix it, and nothing is written.
func TestRebindingRefused(t *testing.T) {
	e := newEnv(t)
	f := newWriteFixture(t, e)
	before := e.writeState(t)
	routes := append(f.routes(t),
		writeRoute{"GET", "/v1/templates", ""},
		writeRoute{"GET", fmt.Sprintf("/v1/templates/%d/inventory", f.tpl), ""},
		writeRoute{"GET", "/v1/nowhere", ""})
	for _, rt := range routes {
		r := rawRequest(t, e.url, rt.method, rt.path, rt.body, withHeaders(rebinding, rt.body))
		got := expectError(t, r, http.StatusForbidden, "host_not_allowed")
		assert.Contains(t, got.Message, `"evil.example:8080"`, "%s %s", rt.method, rt.path)
		assert.Contains(t, got.Message, "-allowed-hosts")
		assert.Contains(t, got.Message, "token")
	}
	assert.Equal(t, before, e.writeState(t), "a refused request writes nothing")
	assert.Equal(t, coupon.Available, e.status(t, f.d), "POST /v1/expire did not run")

	// outside /v1, nothing to guard: the public routes answer
	r := rawRequest(t, e.url, "GET", "/healthz", nil, rebinding)
	assert.Equal(t, http.StatusOK, r.Status, "%s", r)
}

// Loopback Hosts, by name or address, with or without a port, are served.
func TestLoopbackHostsServed(t *testing.T) {
	e := newEnv(t)
	u, err := url.Parse(e.url)
	require.NoError(t, err)
	port := u.Port()
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "[::1]:" + port, "LocalHost:" + port, "localhost.:" + port,
		"console.localhost:" + port, "127.0.0.2:" + port, "localhost", "[::1]"} {
		r := rawRequest(t, e.url, "GET", "/v1/templates", nil, map[string]string{"Host": host})
		assert.Equal(t, http.StatusOK, r.Status, "Host %s: %s", host, r)
		h := map[string]string{"Host": host, "Origin": "http://" + host, "Content-Type": "application/json"}
		r = rawRequest(t, e.url, "POST", "/v1/expire", rawBody(`{"limit":10}`), h)
		assert.Equal(t, http.StatusOK, r.Status, "Host %s: %s", host, r)
	}
}

// A host of AllowedHosts is served, in any case and with any port; the
// rebinding page's is served too once it is allowed: the setting is the
// operator's word that the name is theirs.
func TestAllowedHostsServed(t *testing.T) {
	hosts, err := httpapi.ParseAllowedHosts("api.internal, 10.0.0.5,[2001:db8::1],evil.example")
	require.NoError(t, err)
	e := newEnv(t, envConfig{hosts: hosts})
	for _, host := range []string{"api.internal:8080", "API.Internal", "api.internal.", "10.0.0.5:80", "[2001:db8::1]:8080", "evil.example:8080"} {
		r := rawRequest(t, e.url, "GET", "/v1/templates", nil, map[string]string{"Host": host})
		assert.Equal(t, http.StatusOK, r.Status, "Host %s: %s", host, r)
	}
	r := rawRequest(t, e.url, "POST", "/v1/expire", rawBody(`{"limit":10}`), withHeaders(rebinding, "{}"))
	assert.Equal(t, http.StatusOK, r.Status, "%s", r)
	for _, host := range []string{"other.internal:8080", "api.internal.evil.example", "10.0.0.6", "[2001:db8::2]:8080"} {
		r := rawRequest(t, e.url, "GET", "/v1/templates", nil, map[string]string{"Host": host})
		expectError(t, r, http.StatusForbidden, "host_not_allowed")
	}
}

// With tokens the Host is not checked: a valid token is what a rebinding
// page lacks. Without one, the answer is 401 as on any Host.
func TestTokensSkipTheHostCheck(t *testing.T) {
	const token = "s3cret"
	e := newEnv(t, envConfig{token: token})
	withToken := withHeaders(rebinding, "{}")
	withToken["Authorization"] = "Bearer " + token
	r := rawRequest(t, e.url, "GET", "/v1/templates", nil, withToken)
	assert.Equal(t, http.StatusOK, r.Status, "%s", r)
	r = rawRequest(t, e.url, "POST", "/v1/expire", rawBody(`{"limit":10}`), withToken)
	assert.Equal(t, http.StatusOK, r.Status, "%s", r)
	r = rawRequest(t, e.url, "GET", "/v1/templates", nil, rebinding)
	expectError(t, r, http.StatusUnauthorized, "unauthorized")
}

func TestParseAllowedHosts(t *testing.T) {
	got, err := httpapi.ParseAllowedHosts(" API.example, 10.0.0.5,,[::1], 2001:DB8::1 ,api.example.")
	require.NoError(t, err)
	assert.Equal(t, []string{"api.example", "10.0.0.5", "::1", "2001:db8::1", "api.example"}, got)
	got, err = httpapi.ParseAllowedHosts("")
	require.NoError(t, err)
	assert.Empty(t, got)
	for _, bad := range []string{"http://api.example", "api.example:8080", "api.example/x", "*.example", "a..b", "[::1]:8080", "bad host"} {
		_, err := httpapi.ParseAllowedHosts("ok.example," + bad)
		if assert.Error(t, err, "%q", bad) {
			assert.Contains(t, err.Error(), bad)
		}
	}
}
