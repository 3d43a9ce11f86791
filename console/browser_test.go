package console_test

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
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

// browserTools checks what a browser test needs, or skips it with
// COUPONLINK_SKIP_BROWSER=1.
func browserTools(t *testing.T) {
	if os.Getenv("COUPONLINK_SKIP_BROWSER") == "1" {
		t.Skip("COUPONLINK_SKIP_BROWSER=1")
	}
	_, err := exec.LookPath("node")
	require.NoError(t, err, "node is needed for the browser test (.ci/run installs it; COUPONLINK_SKIP_BROWSER=1 skips)")
	_, err = os.Stat(chromium)
	require.NoError(t, err, "Debian's chromium is needed for the browser test: apt-get install chromium")
	_, err = os.Stat(filepath.Join("e2e", "node_modules", "playwright-core"))
	require.NoError(t, err, "run `npm ci` in console/e2e first (make test does)")
}

// runScript runs e2e/script with env (and CONSOLE_OUT, CHROMIUM), shows
// its output, and on a failure the tails of the logs in dir; then checks
// that it took the screenshots shots.
func runScript(t *testing.T, script, dir string, logs, shots []string, env ...string) {
	t.Helper()
	out := os.Getenv("COUPONLINK_E2E_OUT")
	if out == "" {
		var err error
		out, err = filepath.Abs(filepath.Join("e2e", "out"))
		require.NoError(t, err)
	}
	require.NoError(t, os.MkdirAll(out, 0o755))
	cmd := exec.Command("node", script)
	cmd.Dir = "e2e"
	cmd.Env = append(append(os.Environ(), "CONSOLE_OUT="+out, "CHROMIUM="+chromium), env...)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := cmd.Run()
	t.Logf("node %s:\n%s", script, buf.String())
	if err != nil {
		for _, f := range logs {
			b, _ := os.ReadFile(filepath.Join(dir, f))
			t.Logf("%s:\n%s", f, tail(b, 8<<10))
		}
	}
	require.NoError(t, err, "the browser test failed; see its output above")
	for _, f := range shots {
		st, err := os.Stat(filepath.Join(out, f))
		require.NoError(t, err, "screenshot %s", f)
		require.Positive(t, st.Size())
	}
}

func TestConsoleInABrowser(t *testing.T) {
	browserTools(t)
	bin := testenv.BuildCouponlink(t)
	db, dsn := testenv.MySQL(t)
	metrics, apiAddr := testenv.FreeAddr(t), testenv.FreeAddr(t)
	const token = "e2e0c0ffee5eed0123456789abcdef0123456789abcdef0123456789abcdef01" // 32 bytes in hex: a weak token is refused
	logs := t.TempDir()
	start(t, bin, filepath.Join(logs, "cdc.log"), "cdc", "-dsn", dsn, "-redis", testenv.RedisAddr(t), "-key-prefix", testenv.KeyPrefix(t),
		"-metrics-addr", metrics, "-batch-wait", "5ms", "-rebalance-every", "1s")
	// no -cdc-metrics-url: the API finds the cdc's metrics where the cdc
	// recorded them
	start(t, bin, filepath.Join(logs, "api.log"), "api", "-dsn", dsn, "-addr", apiAddr, "-token", token, "-expire-interval", "0")
	base := "http://" + apiAddr
	cdctest.WaitFor(t, 30*time.Second, "the api answers", func() bool {
		res, err := http.Get(base + "/healthz")
		if err == nil {
			res.Body.Close()
		}
		return err == nil && res.StatusCode == http.StatusOK
	})

	tpl := seed(t, base, token)
	anomaly := injectIllegalTransition(t, db, tpl)
	// the script asks for the next occurrence of the same anomaly here
	again := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if err := expireAndRestore(db, anomaly, 2); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(again.Close)
	runScript(t, "console.test.mjs", logs, []string{"cdc.log", "api.log"},
		[]string{"campaigns.png", "channels.png", "policy-preview.png", "anomalies.png", "health.png"},
		"CONSOLE_BASE="+base, "CONSOLE_TOKEN="+token, fmt.Sprintf("CONSOLE_TEMPLATE=%d", tpl),
		fmt.Sprintf("CONSOLE_ANOMALY_COUPON=%d", anomaly), "CONSOLE_ANOMALY_AGAIN="+again.URL,
		"CONSOLE_CDC_METRICS=http://"+metrics+"/metrics")
}

// injectIllegalTransition writes, as a hand in the database would, an
// available coupon of the template's partner channel to EXPIRED and back
// (EXPIRED -> AVAILABLE is illegal), waits until the cdc records it as an
// open finding, and returns the coupon's id.
func injectIllegalTransition(t *testing.T, db *sql.DB, tpl int64) int64 {
	t.Helper()
	var id int64
	cdctest.WaitFor(t, 30*time.Second, "the cdc applied the redemptions of partner", func() bool {
		return db.QueryRow(`SELECT u.id FROM user_coupon u JOIN inventory_counter c ON c.template_id = u.template_id AND c.channel = u.channel
			WHERE u.template_id = ? AND u.channel = 'partner' AND u.status = 1 AND c.used = 5 ORDER BY u.id LIMIT 1`, tpl).Scan(&id) == nil
	})
	require.NoError(t, expireAndRestore(db, id, 1))
	var state string
	require.NoError(t, db.QueryRow(`SELECT state FROM finding WHERE kind = 'illegal_transition' AND subject = ?`, fmt.Sprintf("coupon %d", id)).Scan(&state))
	require.Equal(t, "open", state)
	return id
}

// expireAndRestore sets the coupon EXPIRED and back to AVAILABLE, each
// change in its own statement, and waits until the cdc has seen that
// illegal transition the nth time (its finding seen n times).
func expireAndRestore(db *sql.DB, id int64, n int) error {
	for _, status := range []int{3, 1} {
		if _, err := db.Exec(`UPDATE user_coupon SET status = ? WHERE id = ?`, status, id); err != nil {
			return err
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var seen int
		err := db.QueryRow(`SELECT times_seen FROM finding WHERE kind = 'illegal_transition' AND subject = ?`, fmt.Sprintf("coupon %d", id)).Scan(&seen)
		if err == nil && seen == n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the cdc did not record coupon %d's illegal transition %d times within 30s (seen %d, %v)", id, n, seen, err)
		}
		time.Sleep(10 * time.Millisecond)
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
