package console_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/console"
)

func TestConsoleServesItsFilesBesideTheAPI(t *testing.T) {
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "api "+r.URL.Path) })
	srv := httptest.NewServer(console.Mount(api))
	t.Cleanup(srv.Close)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	get := func(path string) (*http.Response, string) {
		t.Helper()
		res, err := noRedirect.Get(srv.URL + path)
		require.NoError(t, err)
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res, string(b)
	}
	res, body := get("/console/")
	require.Equal(t, http.StatusOK, res.StatusCode)
	assert.Contains(t, body, `<script type="module" src="app.js"></script>`)
	assert.Contains(t, res.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'")
	assert.Equal(t, "DENY", res.Header.Get("X-Frame-Options"))

	for _, f := range []string{"app.js", "api.js", "ui.js", "campaigns.js", "channels.js", "coupons.js", "operations.js"} {
		res, body = get("/console/" + f)
		require.Equal(t, http.StatusOK, res.StatusCode, f)
		assert.True(t, strings.HasPrefix(res.Header.Get("Content-Type"), "text/javascript"), "%s: %s", f, res.Header.Get("Content-Type"))
		assert.NotContains(t, body, "innerHTML", "%s builds the page with textContent, never by parsing data as HTML", f)
	}
	res, _ = get("/console/app.css")
	assert.True(t, strings.HasPrefix(res.Header.Get("Content-Type"), "text/css"))

	res, _ = get("/console")
	assert.Equal(t, http.StatusMovedPermanently, res.StatusCode)
	assert.Equal(t, "/console/", res.Header.Get("Location"))
	res, _ = get("/console/nothing.js")
	assert.Equal(t, http.StatusNotFound, res.StatusCode)
	res, body = get("/v1/templates")
	assert.Equal(t, http.StatusOK, res.StatusCode)
	assert.Equal(t, "api /v1/templates", body, "every other path is the API's")
	res, body = get("/consoles")
	assert.Equal(t, "api /consoles", body)

	post, err := http.Post(srv.URL+"/console/", "application/json", strings.NewReader("{}"))
	require.NoError(t, err)
	post.Body.Close()
	assert.Equal(t, http.StatusMethodNotAllowed, post.StatusCode)
}

// The token is sent as a header, kept in sessionStorage, never put in a URL.
func TestConsoleSendsTheTokenAsAHeader(t *testing.T) {
	srv := httptest.NewServer(console.Handler())
	t.Cleanup(srv.Close)
	res, err := http.Get(srv.URL + "/console/api.js")
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	js := string(b)
	assert.Contains(t, js, `headers.Authorization = 'Bearer ' + token`)
	assert.Contains(t, js, `sessionStorage`)
	assert.Contains(t, js, `'Content-Type'] = 'application/json'`, "writes are JSON: the API refuses other bodies from a browser")
	assert.NotContains(t, js, "localStorage")
	assert.NotContains(t, js, "token=")
}
