package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// -pprof serves the profiler on the -metrics-addr listener only: alone it
// is refused before anything opens.
func TestAPIPprofNeedsMetricsAddr(t *testing.T) {
	code, _, errs := cli(t, "api", "-dsn", "nobody@tcp(127.0.0.1:1)/x", "-pprof")
	assert.NotEqual(t, 0, code)
	assert.Contains(t, errs, "-pprof")
	assert.Contains(t, errs, "-metrics-addr")
}

// The ops handler serves /metrics either way, the profiler's index and
// profiles only with -pprof, and never the command line.
func TestAPIPprofOnOpsHandler(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "pprof_test_total", Help: "a counter"}))
	get := func(h http.Handler, path string) (int, string) {
		srv := httptest.NewServer(h)
		defer srv.Close()
		resp, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, on := range []bool{false, true} {
		code, body := get(opsHandler(reg, on), "/metrics")
		assert.Equal(t, http.StatusOK, code)
		assert.Contains(t, body, "pprof_test_total")
		_, body = get(opsHandler(reg, on), "/debug/pprof/")
		assert.Equal(t, on, strings.Contains(body, "Types of profiles"), "pprof index with -pprof=%v", on)
		_, body = get(opsHandler(reg, on), "/debug/pprof/goroutine?debug=1")
		assert.Equal(t, on, strings.Contains(body, "goroutine profile:"), "goroutine profile with -pprof=%v", on)
		_, body = get(opsHandler(reg, on), "/debug/pprof/cmdline")
		assert.NotContains(t, body, "couponlink.test", "the command line is never served")
	}
}
