package reconcile_test

import (
	"bytes"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/internal/testenv"
)

// cli runs `couponlink reconcile args...` and returns its exit code and output.
func cli(t *testing.T, bin string, args ...string) (int, string, string) {
	t.Helper()
	return command(t, bin, append([]string{"reconcile"}, args...)...)
}

// passFlags are the flags of the CLI tests' commands on e: its database
// and Redis, short waits, and an absolute threshold of 5.
func passFlags(t *testing.T, e *env) []string {
	return []string{"-dsn", e.DSN, "-redis", testenv.RedisAddr(t), "-key-prefix", e.Keys.Prefix,
		"-quiet", testQuiet.String(), "-catch-up-wait", testCatchUp.String(), "-abs-threshold", "5", "-log-level", "error"}
}

// command runs `couponlink args...` and returns its exit code and output.
func command(t *testing.T, bin string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "COUPONLINK_") { // flags only
			cmd.Env = append(cmd.Env, kv)
		}
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	t.Logf("%s -> %d\n%s%s", strings.Join(args, " "), code, stdout.String(), stderr.String())
	return code, stdout.String(), stderr.String()
}

// Exit codes of `couponlink reconcile -once`: 0 clean, 0 auto-fixed,
// 1 needs review, 2 error; -list shows the open item, -resolve ID -note
// closes it with a record, and -list then shows none.
func TestCLIOnceExitCodesListResolve(t *testing.T) {
	t.Parallel()
	bin := testenv.BuildCouponlink(t)
	e, tpl := driftEnv(t)
	flags := passFlags(t, e)
	once := append([]string{"-once"}, flags...)

	code, out, _ := cli(t, bin, once...)
	require.Equal(t, 0, code)
	require.Contains(t, out, "reconcile task 1: clean")
	require.Contains(t, out, "no differences")

	e.exec(`UPDATE inventory_counter SET held = held + 2 WHERE template_id = ? AND channel = 'app'`, tpl)
	code, out, _ = cli(t, bin, once...)
	require.Equal(t, 0, code)
	require.Contains(t, out, "reconcile task 2: auto_fixed")
	require.Contains(t, out, target(tpl, "app", "held"))
	require.Equal(t, []string{"counter " + target(tpl, "app", "held") + " 9->7"}, e.correctionsOf(2))

	e.exec(`UPDATE channel_quota SET claimed = claimed + 1 WHERE template_id = ? AND channel = 'web'`, tpl)
	e.Settle()
	code, out, _ = cli(t, bin, once...)
	require.Equal(t, 1, code)
	require.Contains(t, out, "reconcile task 3: needs_review")
	require.Contains(t, out, target(tpl, "web", "claimed"))

	listAndResolve(t, bin, e, flags, tpl)

	// a stock key that holds no integer is drift, fixed with the rest: 0
	e.exec(`UPDATE channel_quota SET claimed = claimed - 1 WHERE template_id = ? AND channel = 'web'`, tpl)
	e.Settle()
	app := e.Keys.Stock(tpl, "app")
	require.NoError(t, e.RDB.Set(e.Ctx, app, "garbage", 0).Err())
	e.exec(`UPDATE inventory_counter SET used = used + 1 WHERE template_id = ? AND channel = 'app'`, tpl)
	code, out, _ = cli(t, bin, once...)
	require.Equal(t, 0, code)
	require.Contains(t, out, "reconcile task 4: auto_fixed")
	require.Regexp(t, `redis +`+regexp.QuoteMeta(app)+` +40 +"garbage" +fixed`, out)
	require.ElementsMatch(t, []string{"counter " + target(tpl, "app", "used") + " 4->3", "redis " + app + " nil->40"}, e.correctionsOf(4))

	// -no-fix: any difference is exit 1, nothing written
	e.exec(`UPDATE inventory_counter SET held = held + 1 WHERE template_id = ? AND channel = 'app'`, tpl)
	code, out, _ = cli(t, bin, append(once, "-no-fix")...)
	require.Equal(t, 1, code)
	require.Contains(t, out, "reconcile task 5: needs_review")
	require.Regexp(t, `counter +`+target(tpl, "app", "held")+` +7 +8 +reported`, out)
	require.Empty(t, e.correctionsOf(5))

	// errors: 2
	cfg, err := mysql.ParseDSN(e.DSN)
	require.NoError(t, err)
	empty := cfg.DBName + "_empty"
	e.exec("CREATE DATABASE `" + empty + "`")
	t.Cleanup(func() { _, _ = e.DB.Exec("DROP DATABASE IF EXISTS `" + empty + "`") })
	cfg.DBName = empty
	code, _, errOut := cli(t, bin, append(once, "-dsn", cfg.FormatDSN())...)
	require.Equal(t, 2, code, "a database without the schema")
	require.Contains(t, errOut, "reconcile_task")

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := ln.Addr().String()
	require.NoError(t, ln.Close())
	code, _, _ = cli(t, bin, append(once, "-dsn", "root@tcp("+closed+")/couponlink")...)
	require.Equal(t, 2, code, "MySQL on a closed port")

	code, out, _ = cli(t, bin, append(once, "-redis", closed)...)
	require.Equal(t, 2, code, "Redis on a closed port")
	require.Contains(t, out, "reconcile task 6: error", "a failed pass prints what it did before")
	require.Contains(t, out, target(tpl, "app", "held"), "the counter fixed before Redis failed")
	require.Equal(t, []string{"counter " + target(tpl, "app", "held") + " 8->7"}, e.correctionsOf(6))

	code, _, _ = cli(t, bin, append(once, "-rel-threshold", "lots")...)
	require.Equal(t, 2, code, "a bad threshold")

	code, _, _ = cli(t, bin, append(once, "-mapping", filepath.Join(t.TempDir(), "missing.yaml"))...)
	require.Equal(t, 2, code, "a mapping file that cannot be read")
}

// listAndResolve checks -list and -resolve on task 3, the open item of
// TestCLIOnceExitCodesListResolve: -list shows it; -resolve without -note
// fails and leaves it open; with a note it is closed with a manual
// correction; -list then shows none, and it cannot be resolved again.
func listAndResolve(t *testing.T, bin string, e *env, flags []string, tpl int64) {
	t.Helper()
	code, out, _ := cli(t, bin, append([]string{"-list"}, flags...)...)
	require.Equal(t, 0, code)
	require.Contains(t, out, "task 3 at ")
	require.Contains(t, out, target(tpl, "web", "claimed"))
	require.Contains(t, out, "-resolve 3")
	require.NotContains(t, out, "task 2 at ")

	code, _, errOut := cli(t, bin, append([]string{"-resolve", "3"}, flags...)...)
	require.NotEqual(t, 0, code, "-resolve without -note fails")
	require.Contains(t, errOut, "a note is required")
	code, out, _ = cli(t, bin, append([]string{"-list"}, flags...)...)
	require.Equal(t, 0, code)
	require.Contains(t, out, "task 3 at ", "still open")

	code, out, _ = cli(t, bin, append([]string{"-resolve", "3", "-note", "claimed bumped by the test"}, flags...)...)
	require.Equal(t, 0, code)
	require.Contains(t, out, "task 3 resolved")
	var manual []correction
	for _, c := range e.corrections() {
		if c.Mode == "manual" {
			manual = append(manual, c)
		}
	}
	require.Len(t, manual, 1)
	require.Equal(t, int64(3), manual[0].TaskID)
	require.Equal(t, "claimed bumped by the test", manual[0].Reason)
	require.NotEmpty(t, manual[0].Actor)
	code, out, _ = cli(t, bin, append([]string{"-list"}, flags...)...)
	require.Equal(t, 0, code)
	require.Contains(t, out, "no open items")
	code, _, errOut = cli(t, bin, append([]string{"-resolve", "3", "-note", "again"}, flags...)...)
	require.NotEqual(t, 0, code, "a closed item cannot be resolved again")
	require.Contains(t, errOut, "no open reconcile task")
}
