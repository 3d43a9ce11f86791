package docs_test

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/internal/testenv"
)

// demoAPI is the API's address as the README's demo writes it (make run's).
const demoAPI = "http://127.0.0.1:8080"

// demoExpect is what each command of the README's demo must print, keyed
// by a part of the command that names it. A command of the block that
// none names fails the test: add its expectation here.
var demoExpect = []struct {
	command string
	output  []string
}{
	{"/v1/templates -H", []string{`"id":1,`, `"name":"demo"`}},
	{"/v1/claims", []string{`"user_coupon_id":1,`, `"status":"AVAILABLE"`}},
	{"/v1/redemptions", []string{`"redemption_id":1,`, `"status":"USED"`}},
	{"/v1/refunds", []string{`"mode":"restore"`, `"status":"AVAILABLE"`}},
	{"/v1/templates/1/inventory", []string{`"claimable":99`, `"held":1`, `"conserved":true`}},
	{"/console/", []string{"<title>couponlink console</title>"}},
	{"couponlink status", []string{"checkpoint", "leader", "anomalies"}},
	{"couponlink reconcile -once", []string{"reconcile task 1: "}}, // exit 0: clean, or fixed (a key the cdc had not written yet)
}

var assignment = regexp.MustCompile(`^[A-Za-z_][A-Za-z_0-9]*=`)

// demoBlock is the README's local demo: the settings (lines that only
// assign variables) and the commands, one a line, as the README shows them.
func demoBlock(t *testing.T) (settings, commands []string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	_, after, ok := strings.Cut(string(b), "<!-- demo:start")
	require.True(t, ok, "README.md has no <!-- demo:start --> mark")
	block, _, ok := strings.Cut(after, "<!-- demo:end -->")
	require.True(t, ok, "README.md has no <!-- demo:end --> mark")
	_, code, ok := strings.Cut(block, "```sh\n")
	require.True(t, ok, "the demo is not a ```sh block")
	code, _, _ = strings.Cut(code, "```")
	for _, l := range strings.Split(code, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case l == "" || strings.HasPrefix(l, "#"):
		case assignment.MatchString(l) && !strings.Contains(l, "curl") && !strings.Contains(l, "couponlink "):
			settings = append(settings, l)
		default:
			commands = append(commands, l)
		}
	}
	require.NotEmpty(t, commands)
	return settings, commands
}

// demoEnv is the processes' environment: this one without couponlink's
// own settings, plus env.
func demoEnv(env []string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "COUPONLINK_") {
			out = append(out, kv)
		}
	}
	return append(out, env...)
}

// startDemo runs `bin/couponlink args...` in dir until the test ends
// (SIGTERM, killed 20 s later if still running); its output is returned.
func startDemo(t *testing.T, dir string, env []string, args ...string) *testenv.Output {
	t.Helper()
	out := &testenv.Output{}
	ctx, stop := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "bin", "couponlink"), args...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, demoEnv(env), out, out
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 20 * time.Second
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		stop()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("couponlink %s:\n%s", strings.Join(args, " "), out.String())
		}
	})
	return out
}

// runDemo runs one line of the demo with bash in dir, after the settings.
func runDemo(t *testing.T, dir string, env, settings []string, line string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	script := "set -euo pipefail\n" + strings.Join(settings, "\n") + "\n" + line + "\n"
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.Dir, cmd.Env = dir, demoEnv(env)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// demoServers builds the binary as bin/couponlink of a fresh directory,
// migrates a fresh database and starts the cdc and the API on free ports,
// as `make run` does; it returns the directory and the environment.
func demoServers(t *testing.T) (dir string, env []string) {
	t.Helper()
	dir = t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "bin"), 0o755))
	require.NoError(t, os.Symlink(testenv.BuildCouponlink(t), filepath.Join(dir, "bin", "couponlink")))
	_, dsn := testenv.MySQL(t)
	apiAddr, cdcAddr := testenv.FreeAddr(t), testenv.FreeAddr(t)
	env = []string{
		"COUPONLINK_MYSQL_DSN=" + dsn,
		"COUPONLINK_REDIS_ADDR=" + testenv.RedisAddr(t),
		"COUPONLINK_KEY_PREFIX=" + testenv.KeyPrefix(t),
		"COUPONLINK_API_ADDR=" + apiAddr,
		"COUPONLINK_CDC_METRICS_ADDR=" + cdcAddr,
		"COUPONLINK_CDC_METRICS_URL=http://" + cdcAddr + "/metrics",
		"COUPONLINK_RECONCILE_METRICS_ADDR=",
	}
	out, err := runDemo(t, dir, env, nil, "bin/couponlink migrate")
	require.NoError(t, err, out)

	cdc := startDemo(t, dir, env, "cdc")
	cdctest.WaitFor(t, time.Minute, "the cdc tails the binlog", func() bool {
		return strings.Contains(cdc.String(), "tailing the binlog")
	})
	startDemo(t, dir, env, "api")
	cdctest.WaitFor(t, time.Minute, "the API answers /healthz", func() bool {
		res, err := http.Get("http://" + apiAddr + "/healthz")
		if err != nil {
			return false
		}
		_ = res.Body.Close()
		return res.StatusCode == http.StatusOK
	})
	return dir, append(env, "DEMO_API=http://"+apiAddr)
}

// TestREADMEDemo runs the README's local demo, command by command, against
// the real binary on the private servers: each command must succeed and
// print what the README says it does.
func TestREADMEDemo(t *testing.T) {
	settings, commands := demoBlock(t)
	dir, env := demoServers(t)
	api := strings.TrimPrefix(env[len(env)-1], "DEMO_API=")
	for i, s := range settings {
		settings[i] = strings.ReplaceAll(s, demoAPI, api)
	}
	used := map[string]bool{}
	for _, line := range commands {
		var want []string
		for _, e := range demoExpect {
			if strings.Contains(line, e.command) {
				require.Nil(t, want, "two expectations name %q", line)
				want, used[e.command] = e.output, true
			}
		}
		require.NotNil(t, want, "the README's demo command %q has no expectation in demoExpect", line)
		out, err := runDemo(t, dir, env, settings, strings.ReplaceAll(line, demoAPI, api))
		require.NoError(t, err, "%s\n%s", line, out)
		t.Logf("$ %s\n%s", line, out)
		for _, w := range want {
			assert.Contains(t, out, w, line)
		}
	}
	for _, e := range demoExpect {
		assert.True(t, used[e.command], "no command of the README's demo runs %q: remove its expectation", e.command)
	}
}
