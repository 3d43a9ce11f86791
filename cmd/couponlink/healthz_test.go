package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/internal/testenv"
)

// The cdc's and reconciler's /healthz and /status (the ops server) are
// unauthenticated: when MySQL does not answer they say so without the
// driver's error, which names the server's address; the log has it.
func TestOpsHealthzHidesAddress(t *testing.T) {
	db, mysqlAddr := testenv.UnreachableMySQL(t)
	log, logs := testenv.Logger()
	ops, err := listenOps("127.0.0.1:0", prometheus.NewRegistry(), db, "default", nil, nil, log)
	require.NoError(t, err)
	serveOps(t, ops)
	m := regexp.MustCompile(`msg="metrics listening" addr=(\S+)`).FindStringSubmatch(logs())
	require.NotNil(t, m, "log: %s", logs())

	for path, says := range map[string]string{"/healthz": "MySQL does not answer", "/status": "the status cannot be read now"} {
		res, err := http.Get("http://" + m[1] + path)
		require.NoError(t, err)
		body, err := io.ReadAll(res.Body)
		require.NoError(t, res.Body.Close())
		require.NoError(t, err)
		assert.Equal(t, http.StatusServiceUnavailable, res.StatusCode, path)
		assert.Contains(t, string(body), says)
		_, port, _ := net.SplitHostPort(mysqlAddr)
		for _, secret := range []string{mysqlAddr, port, "127.0.0.1", "dial", "tcp", "pw"} {
			assert.NotContains(t, string(body), secret, path)
		}
	}
	assert.Contains(t, logs(), mysqlAddr, "the address is logged")
	assert.Equal(t, 1, strings.Count(logs(), "MySQL does not answer"), "logged once per failed check")
	assert.Equal(t, 1, strings.Count(logs(), "status: cannot read"), "logged once per failed request")
}

// serveOps runs ops until the test ends.
func serveOps(t *testing.T, ops *opsServer) {
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- ops.Run(ctx) }()
	t.Cleanup(func() {
		stop()
		require.NoError(t, <-served)
	})
}

// A malformed -allowed-origins stops the api before it opens anything.
func TestAPIAllowedOriginsFlag(t *testing.T) {
	requireAPIFlagRefused(t, "-allowed-origins", "https://ok.example,", "COUPONLINK_API_ALLOWED_ORIGINS=console.example",
		"console.example", "https://console.example/app")
}

// A malformed -allowed-hosts stops the api before it opens anything.
func TestAPIAllowedHostsFlag(t *testing.T) {
	requireAPIFlagRefused(t, "-allowed-hosts", "ok.example,", "COUPONLINK_API_ALLOWED_HOSTS=api.example:8080",
		"http://api.example", "api.example:8080", "api.example/x")
}

// requireAPIFlagRefused requires that each bad value of flag (after a good
// one in the list) stops the api with an error naming the flag and the
// value, and so does the flag's environment variable set as env
// (NAME=value).
func requireAPIFlagRefused(t *testing.T, flag, good, env string, bad ...string) {
	t.Helper()
	for _, b := range bad {
		code, _, errs := cli(t, "api", "-dsn", "nobody@tcp(127.0.0.1:1)/x", flag, good+b)
		assert.NotEqual(t, 0, code)
		assert.Contains(t, errs, flag)
		assert.Contains(t, errs, b)
	}
	name, value, _ := strings.Cut(env, "=")
	t.Setenv(name, value)
	code, _, errs := cli(t, "api", "-dsn", "nobody@tcp(127.0.0.1:1)/x")
	assert.NotEqual(t, 0, code)
	assert.Contains(t, errs, flag)
}

// The ops server runs as a part of its command's group: a failure to
// serve (here its listener breaks) ends Run with the error, which stops
// the command, instead of leaving it without /metrics and /healthz.
func TestOpsServeFailureIsReturned(t *testing.T) {
	db, _ := testenv.UnreachableMySQL(t)
	log, _ := testenv.Logger()
	ops, err := listenOps("127.0.0.1:0", prometheus.NewRegistry(), db, "default", nil, nil, log)
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- ops.Run(context.Background()) }()
	require.NoError(t, ops.ln.Close())
	select {
	case err := <-served:
		require.ErrorContains(t, err, "ops server: serve:")
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return when serving failed")
	}
}

// A stalled cdc's /healthz answers 503, saying so without the details (in
// the log), and 200 again once it advances.
func TestOpsHealthzStalled(t *testing.T) {
	db, _ := testenv.MySQL(t)
	log, logs := testenv.Logger()
	var stalled atomic.Pointer[error]
	health := func() error {
		if e := stalled.Load(); e != nil {
			return *e
		}
		return nil
	}
	ops, err := listenOps("127.0.0.1:0", prometheus.NewRegistry(), db, "default", nil, health, log)
	require.NoError(t, err)
	serveOps(t, ops)
	get := func() (int, string) {
		res, err := http.Get("http://" + ops.ln.Addr().String() + "/healthz")
		require.NoError(t, err)
		body, err := io.ReadAll(res.Body)
		require.NoError(t, res.Body.Close())
		require.NoError(t, err)
		return res.StatusCode, string(body)
	}
	code, _ := get()
	require.Equal(t, http.StatusOK, code)
	e := errors.New("the checkpoint mysql-bin.000001:4 has not moved for 1m0s")
	stalled.Store(&e)
	code, body := get()
	require.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, "the cdc is stalled")
	assert.NotContains(t, body, "mysql-bin")
	assert.Contains(t, logs(), "mysql-bin.000001:4 has not moved", "the log has the details")
	stalled.Store(nil)
	code, _ = get()
	require.Equal(t, http.StatusOK, code)
}
