package console_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/internal/testenv"
)

// The browser test: the real couponlink api and cdc (built from this
// tree, on the private MariaDB and Redis, as `make run` starts them), a
// seeded campaign, and headless Chromium driven by e2e/console.test.mjs
// (playwright-core, the system's /usr/bin/chromium). Its screenshots go to
// e2e/out/ (or $COUPONLINK_E2E_OUT).
//
// It needs node, e2e/node_modules (npm ci in e2e/) and chromium, which
// .ci/run installs; without them it fails, unless COUPONLINK_SKIP_BROWSER=1.

const chromium = "/usr/bin/chromium"

func TestConsoleInABrowser(t *testing.T) {
	if os.Getenv("COUPONLINK_SKIP_BROWSER") == "1" {
		t.Skip("COUPONLINK_SKIP_BROWSER=1")
	}
	node, err := exec.LookPath("node")
	require.NoError(t, err, "node is needed for the browser test (.ci/run installs it; COUPONLINK_SKIP_BROWSER=1 skips)")
	_, err = os.Stat(chromium)
	require.NoError(t, err, "Debian's chromium is needed for the browser test: apt-get install chromium")
	_, err = os.Stat(filepath.Join("e2e", "node_modules", "playwright-core"))
	require.NoError(t, err, "run `npm ci` in console/e2e first (make test does)")

	bin := testenv.BuildCouponlink(t)
	_, dsn := testenv.MySQL(t)
	metrics, apiAddr := testenv.FreeAddr(t), testenv.FreeAddr(t)
	const token = "e2e0c0ffee5eed0123456789abcdef0123456789abcdef0123456789abcdef01" // 32 bytes in hex: a weak token is refused
	logs := t.TempDir()
	start(t, bin, filepath.Join(logs, "cdc.log"), "cdc", "-dsn", dsn, "-redis", testenv.RedisAddr(t), "-key-prefix", testenv.KeyPrefix(t),
		"-metrics-addr", metrics, "-batch-wait", "5ms")
	start(t, bin, filepath.Join(logs, "api.log"), "api", "-dsn", dsn, "-addr", apiAddr, "-token", token,
		"-cdc-metrics-url", "http://"+metrics+"/metrics", "-expire-interval", "0")
	base := "http://" + apiAddr
	cdctest.WaitFor(t, 30*time.Second, "the api answers", func() bool {
		res, err := http.Get(base + "/healthz")
		if err == nil {
			res.Body.Close()
		}
		return err == nil && res.StatusCode == http.StatusOK
	})

	tpl := seed(t, base, token)
	out := os.Getenv("COUPONLINK_E2E_OUT")
	if out == "" {
		out, err = filepath.Abs(filepath.Join("e2e", "out"))
		require.NoError(t, err)
	}
	require.NoError(t, os.MkdirAll(out, 0o755))
	cmd := exec.Command(node, "console.test.mjs")
	cmd.Dir = "e2e"
	cmd.Env = append(os.Environ(), "CONSOLE_BASE="+base, "CONSOLE_TOKEN="+token, fmt.Sprintf("CONSOLE_TEMPLATE=%d", tpl),
		"CONSOLE_OUT="+out, "CHROMIUM="+chromium)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err = cmd.Run()
	t.Logf("node console.test.mjs:\n%s", buf.String())
	if err != nil {
		for _, f := range []string{"cdc.log", "api.log"} {
			b, _ := os.ReadFile(filepath.Join(logs, f))
			t.Logf("%s:\n%s", f, tail(b, 8<<10))
		}
	}
	require.NoError(t, err, "the browser test failed; see its output above")
	for _, f := range []string{"campaigns.png", "channels.png"} {
		st, err := os.Stat(filepath.Join(out, f))
		require.NoError(t, err, "screenshot %s", f)
		require.Positive(t, st.Size())
	}
}

// start runs bin with args until the test ends, its output in logFile.
func start(t *testing.T, bin, logFile string, args ...string) {
	t.Helper()
	f, err := os.Create(logFile)
	require.NoError(t, err)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		_ = f.Close()
	})
}

// seed creates the campaign the browser test reads: three channels (one
// sold out), claims, redemptions; it returns the template's id.
func seed(t *testing.T, base, token string) int64 {
	t.Helper()
	var tpl struct{ ID int64 }
	call(t, base, token, "POST", "/v1/templates", map[string]any{"name": "e2e spring sale", "total_quota": 100,
		"channels": map[string]int{"app": 60, "sms": 30, "partner": 10}, "valid_seconds": 86400}, &tpl)
	for i := range 34 {
		ch := "app"
		switch {
		case i >= 24:
			ch = "partner" // its 10: sold out
		case i%3 == 2:
			ch = "sms"
		}
		var c struct {
			UserCouponID int64 `json:"user_coupon_id"`
		}
		call(t, base, token, "POST", "/v1/claims", map[string]any{"template_id": tpl.ID, "user_id": fmt.Sprintf("user-%d", i),
			"channel": ch, "request_id": fmt.Sprintf("seed-claim-%d", i)}, &c)
		if i%2 == 0 {
			call(t, base, token, "POST", "/v1/redemptions", map[string]any{"user_coupon_id": c.UserCouponID, "order_id": fmt.Sprintf("order-%d", i)}, nil)
		}
	}
	return tpl.ID
}

func call(t *testing.T, base, token, method, path string, body, out any) {
	t.Helper()
	b, err := json.Marshal(body)
	require.NoError(t, err)
	req, err := http.NewRequest(method, base+path, bytes.NewReader(b))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	var raw json.RawMessage
	require.NoError(t, json.NewDecoder(res.Body).Decode(&raw))
	require.Less(t, res.StatusCode, 300, "%s %s: %d %s", method, path, res.StatusCode, raw)
	if out != nil {
		require.NoError(t, json.Unmarshal(raw, out))
	}
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.TrimSpace(string(b))
}
