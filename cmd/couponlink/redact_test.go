package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/internal/testenv"
)

// runUntil runs the binary with env added to the test's environment. A
// command that ends by itself is waited for; one that runs on (api, cdc,
// the reconcile daemon) gets SIGTERM once its output matches until. It
// returns the combined output and whether the process ended by itself.
func runUntil(t *testing.T, bin string, env []string, args []string, until *regexp.Regexp) (string, bool) {
	t.Helper()
	var out testenv.Output
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-done:
			return out.String(), true
		default:
		}
		if until != nil && until.MatchString(out.String()) {
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-done
			t.Fatalf("couponlink %s: neither ended nor printed %v within 60 s:\n%s", strings.Join(args, " "), until, out.String())
		}
		time.Sleep(10 * time.Millisecond) // polling a condition
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Errorf("couponlink %s did not stop within 60 s of SIGTERM", strings.Join(args, " "))
	}
	return out.String(), false
}

// No command prints the DSN's password, whatever the DSN: malformed,
// well-formed to a closed port, with a wrong password, or right (the
// commands then work). Every command runs as a built binary with the DSN in
// COUPONLINK_MYSQL_DSN (so -h shows it as the default) and debug logs; its
// stdout and stderr are searched for the password and for its pieces.
func TestNoCommandPrintsThePassword(t *testing.T) {
	_, rootDSN := testenv.MySQL(t)
	cfg, err := mysql.ParseDSN(rootDSN)
	require.NoError(t, err)
	suffix := randomHex(4)
	head, tail := "Pw"+randomHex(5), "Sx"+randomHex(5)
	pw := head + "-" + tail
	user := "cl_redact_" + suffix

	// a user with that password, for the runs that work
	root, err := openMySQL(rootDSN, 1)
	require.NoError(t, err)
	defer root.Close()
	_, err = root.Exec("CREATE USER '" + user + "'@'%' IDENTIFIED BY '" + pw + "'")
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = root.Exec("DROP USER IF EXISTS '" + user + "'@'%'") })
	_, err = root.Exec("GRANT ALL PRIVILEGES ON *.* TO '" + user + "'@'%'")
	require.NoError(t, err)
	good := *cfg
	good.User, good.Passwd = user, pw
	wrong := *cfg
	wrong.User, wrong.Passwd = "root", pw

	closed := testenv.FreeAddr(t)

	dsns := map[string]string{
		"no closing brace":         user + ":" + pw + "@tcp(" + cfg.Addr,
		"slash in the password":    user + ":" + pw + "/x@tcp(" + cfg.Addr + ")",
		"bad parameter":            user + ":" + pw + "@tcp(" + cfg.Addr + ")/" + cfg.DBName + "?parseTime=maybe",
		"closed port":              user + ":" + pw + "@tcp(" + closed + ")/" + cfg.DBName,
		"wrong password":           wrong.FormatDSN(),
		"right password (it runs)": good.FormatDSN(),
	}
	bin := testenv.BuildCouponlink(t)
	// the long-running commands are stopped once they have shown what they do
	cdcTries := regexp.MustCompile(`(?s)tailing the binlog|cdc interrupted.*cdc interrupted`)
	commands := []struct {
		args  []string
		until *regexp.Regexp
		works string // what it prints with the right password
	}{
		{[]string{"migrate"}, nil, "is at schema version"},
		{[]string{"api", "-addr", "127.0.0.1:0", "-expire-interval", "0"}, regexp.MustCompile(`api listening`), "api listening"},
		{[]string{"expire"}, nil, "expired 0 coupon(s)"},
		{[]string{"cdc", "-metrics-addr", "", "-redis", ""}, cdcTries, "tailing the binlog"},
		{[]string{"reconcile", "-once", "-redis", "", "-catch-up-wait", "1s"}, nil, "reconcile task"},
		{[]string{"reconcile", "-metrics-addr", "", "-redis", "", "-catch-up-wait", "1s"}, regexp.MustCompile(`reconcile pass`), "reconcile pass"},
		{[]string{"reconcile", "-list"}, nil, "open items"},
		{[]string{"status"}, nil, "checkpoint"},
		{[]string{"quota", "policy", "show", "-template", "1"}, nil, "template 1"},
		{[]string{"quota", "policy", "audit", "-template", "1"}, nil, "template 1"},
	}
	pieces := []string{pw, head, tail}
	check := func(what, out string) {
		t.Helper()
		for _, p := range pieces {
			assert.NotContains(t, out, p, "%s printed (a piece of) the password:\n%s", what, out)
		}
	}
	for name, dsn := range dsns {
		env := []string{"COUPONLINK_MYSQL_DSN=" + dsn, "COUPONLINK_LOG_LEVEL=debug"}
		for _, c := range commands {
			what := fmt.Sprintf("couponlink %s with a DSN (%s)", strings.Join(c.args, " "), name)
			out, ended := runUntil(t, bin, env, c.args, c.until)
			check(what, out)
			if c.args[0] == "cdc" && name == "closed port" {
				assert.False(t, ended, "%s exited instead of waiting for MySQL:\n%s", what, out)
			}
			if dsn == good.FormatDSN() {
				assert.Contains(t, out, c.works, "%s did not work", what)
			}
		}
		for _, c := range commands[:8] {
			out, _ := runUntil(t, bin, env, append(c.args[:1:1], "-h"), nil)
			check(fmt.Sprintf("couponlink %s -h with a DSN (%s)", c.args[0], name), out)
		}
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// passwords gives each name a random password of its own ("Pw" and 12 hex
// digits) and token a random API token (64 hex digits: a token must be
// strong to be taken): values that can only be found in what a command
// printed if it leaked them.
func passwords(token string, names ...string) map[string]string {
	pw := map[string]string{token: randomHex(32)}
	for _, s := range names {
		pw[s] = "Pw" + randomHex(6)
	}
	return pw
}

// No command prints a secret of any setting that can hold one: the
// binlog DSN, the webhook URL and secret, the event sinks' URLs, the API
// token, a Redis URL, the Redis password (a Redis that refuses it, or a
// URL's), a primaries list's DSN. Every command runs as a
// built binary with all of them in its environment (so -h shows them as
// defaults) and debug logs, the binlog server, the webhook receiver and
// the sinks closed (so their errors are printed too); its stdout and
// stderr are searched for each password.
func TestNoCommandPrintsAnySecret(t *testing.T) {
	_, dsn := testenv.MySQL(t)
	closed := testenv.FreeAddr(t)
	pw := passwords("token", "binlog", "hook", "hooksecret", "sink", "redis", "redispw")
	secretEnv := []string{
		"COUPONLINK_MYSQL_DSN=" + dsn, "COUPONLINK_LOG_LEVEL=debug",
		"COUPONLINK_BINLOG_DSN=repl:" + pw["binlog"] + "@tcp(" + closed + ")/couponlink",
		"COUPONLINK_WEBHOOK_URL=http://hook:" + pw["hook"] + "@" + closed + "/in",
		"COUPONLINK_WEBHOOK_SECRET=" + pw["hooksecret"],
		"COUPONLINK_EVENT_SINKS=redis://:" + pw["sink"] + "@" + closed + "/0?stream=couponlink-events",
		"COUPONLINK_API_TOKEN=" + pw["token"],
		"COUPONLINK_REDIS_PASSWORD=" + pw["redispw"],
	}
	locked := testenv.OwnRedis(t, "--requirepass", "Pw"+randomHex(6)) // refuses both passwords
	bin := testenv.BuildCouponlink(t)
	check := func(what, out string) {
		t.Helper()
		for name, p := range pw {
			assert.NotContains(t, out, p, "%s printed the %s secret:\n%s", what, name, out)
		}
	}
	runs := []struct {
		args  []string
		until *regexp.Regexp
	}{
		{[]string{"migrate"}, nil},
		{[]string{"api", "-addr", "127.0.0.1:0", "-expire-interval", "0"}, regexp.MustCompile(`api listening`)},
		{[]string{"expire"}, nil},
		{[]string{"cdc", "-metrics-addr", "", "-redis", ""}, regexp.MustCompile(`(?s)level=(WARN|ERROR).*level=(WARN|ERROR)|tailing the binlog`)},
		{[]string{"reconcile", "-once", "-redis", "", "-catch-up-wait", "1s"}, nil},
		{[]string{"reconcile", "-list"}, nil},
		{[]string{"status"}, nil},
		{[]string{"anomalies", "list"}, nil},
		{[]string{"quota", "policy", "show", "-template", "1"}, nil},
	}
	for _, c := range runs {
		out, _ := runUntil(t, bin, secretEnv, c.args, c.until)
		check("couponlink "+strings.Join(c.args, " "), out)
	}
	// a Redis that refuses the password (the setting's, a URL's): refused,
	// the settings named, the password not
	for _, args := range [][]string{
		{"reconcile", "-once", "-redis", locked.Addr, "-catch-up-wait", "1s"},
		{"cdc", "-metrics-addr", "", "-redis", "redis://u:" + pw["redis"] + "@" + locked.Addr},
	} {
		out, _ := runUntil(t, bin, secretEnv, args, nil)
		check("couponlink "+strings.Join(args, " "), out)
		assert.Contains(t, out, "Redis refuses couponlink's credentials (WRONGPASS", args[0])
	}
	// -h of every command, with a Redis URL too (the default it shows)
	helpEnv := append(secretEnv, "COUPONLINK_REDIS_ADDR=rediss://default:"+pw["redis"]+"@"+closed)
	for _, c := range commands() {
		out, _ := runUntil(t, bin, helpEnv, []string{c.name, "-h"}, nil)
		check("couponlink "+c.name+" -h", out)
		if c.name == "cdc" { // shown, redacted
			for _, shown := range []string{"repl:xxxxx@tcp(", "http://hook:xxxxx@", "rediss://default:xxxxx@"} {
				assert.Contains(t, out, shown, "cdc -h")
			}
		}
	}
	// a primaries list whose DSN names no database: its error
	list := filepath.Join(t.TempDir(), "primaries.yaml")
	require.NoError(t, os.WriteFile(list, []byte("primaries:\n  - name: a\n    dsn: u:"+pw["binlog"]+"@tcp("+closed+")\n"), 0o600))
	out, _ := runUntil(t, bin, secretEnv, []string{"api", "-addr", "127.0.0.1:0", "-primaries", list}, regexp.MustCompile(`api listening`))
	check("couponlink api -primaries", out)
}
