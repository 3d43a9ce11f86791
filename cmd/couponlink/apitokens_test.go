package main

import (
	"net"
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

	"github.com/couponlink/couponlink/auth"
	"github.com/couponlink/couponlink/internal/testenv"
)

// The api refuses to be open by accident: an address that is not loopback
// without a token, or a weak or placeholder token, ends it non-zero with
// a message naming the setting; -insecure-no-auth starts it with a
// warning.
func TestAPIStartUpRefusals(t *testing.T) {
	_, dsn := testenv.MySQL(t)
	bin := testenv.BuildCouponlink(t)
	env := []string{"COUPONLINK_MYSQL_DSN=" + dsn, "COUPONLINK_API_TOKEN=", "COUPONLINK_API_TOKEN_FILE="}
	listening := regexp.MustCompile(`api listening`)
	cases := []struct {
		name string
		env  []string
		args []string
		says string
	}{
		{"open address, no token", nil, []string{"-addr", "0.0.0.0:0"}, "COUPONLINK_API_TOKEN_FILE"},
		{"placeholder token", []string{"COUPONLINK_API_TOKEN=CHANGE-ME"}, []string{"-addr", "127.0.0.1:0"}, "placeholder"},
		{"short token", []string{"COUPONLINK_API_TOKEN=0123456789abcdef0123456789abcdef"}, []string{"-addr", "127.0.0.1:0"}, "bits of entropy"},
		{"placeholder by flag", nil, []string{"-addr", "0.0.0.0:0", "-token", "changeme-changeme-changeme-changeme-changeme"}, "placeholder"},
	}
	for _, c := range cases {
		cmd := exec.Command(bin, append([]string{"api", "-expire-interval", "0"}, c.args...)...)
		cmd.Env = append(append(os.Environ(), env...), c.env...)
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, "%s: the api started:\n%s", c.name, out)
		assert.NotEqual(t, 0, exit.ExitCode(), c.name)
		assert.Contains(t, string(out), c.says, c.name)
		assert.NotRegexp(t, listening, string(out), c.name)
	}
	out, ended := runUntil(t, bin, env, []string{"api", "-addr", "0.0.0.0:0", "-expire-interval", "0", "-insecure-no-auth"}, listening)
	assert.False(t, ended, out)
	assert.Contains(t, out, "INSECURE")
	// loopback without a token: open, with one WARN saying how to close it
	out, ended = runUntil(t, bin, env, []string{"api", "-addr", "127.0.0.1:0", "-expire-interval", "0"}, listening)
	assert.False(t, ended, out)
	assert.NotContains(t, out, "INSECURE")
	assert.Equal(t, 1, strings.Count(out, `level=WARN msg="the API serves without any token on a loopback address: every process on this host may call it`), out)
	assert.Contains(t, out, "-token-file")
}

// mayServe is the one rule, at start and on each reload: any token may
// serve anywhere; none only on loopback (with a WARN) or with
// -insecure-no-auth (with an INSECURE WARN).
func TestMayServe(t *testing.T) {
	for _, c := range []struct {
		n        int
		addr     string
		insecure bool
		warn     string
		refused  bool
	}{
		{1, "0.0.0.0:8080", false, "", false},
		{2, "127.0.0.1:8080", true, "", false},
		{0, "127.0.0.1:8080", false, "every process on this host", false},
		{0, "[::1]:8080", false, "every process on this host", false},
		{0, "localhost:8080", true, "every process on this host", false},
		{0, "0.0.0.0:8080", true, "INSECURE", false},
		{0, ":8080", true, "INSECURE", false},
		{0, "0.0.0.0:8080", false, "", true},
		{0, ":8080", false, "", true},
		{0, "api.example.com:8080", false, "", true},
	} {
		warn, err := mayServe(c.n, c.addr, c.insecure)
		if c.refused {
			require.Error(t, err, "%+v", c)
			assert.Contains(t, err.Error(), "-insecure-no-auth")
			continue
		}
		require.NoError(t, err, "%+v", c)
		if c.warn == "" {
			assert.Empty(t, warn, "%+v", c)
		} else {
			assert.Contains(t, warn, c.warn, "%+v", c)
		}
	}
}

// A token file with no token, or that its group, everyone or another user
// may write, stops the api at start, on loopback too, with the fix named.
func TestAPITokenFileRefusedAtStart(t *testing.T) {
	_, dsn := testenv.MySQL(t)
	bin := testenv.BuildCouponlink(t)
	env := []string{"COUPONLINK_MYSQL_DSN=" + dsn, "COUPONLINK_API_TOKEN=", "COUPONLINK_API_TOKEN_FILE="}
	good := "alice operator " + auth.Digest(auth.NewToken()) + "\n"
	listening := regexp.MustCompile(`api listening`)
	cases := []struct {
		name    string
		content string
		mode    os.FileMode
		uid     int
		says    []string
	}{
		{"empty", "", 0o600, 0, []string{"holds no token", "couponlink token new", "-insecure-no-auth"}},
		{"comments only", "# nobody yet\n\n  # " + good, 0o600, 0, []string{"holds no token", "couponlink token new", "-insecure-no-auth"}},
		{"world-writable", good, 0o666, 0, []string{"writable by its group or by everyone", "chmod go-w", "chmod 600"}},
		{"group-writable", good, 0o620, 0, []string{"writable by its group or by everyone", "chmod go-w"}},
		{"another user's", good, 0o600, 12345, []string{"owned by uid 12345", "chown "}},
	}
	for _, c := range cases {
		if c.uid != 0 && os.Geteuid() != 0 {
			t.Logf("%s: skipped, giving a file to another user needs root", c.name)
			continue
		}
		file := filepath.Join(t.TempDir(), "tokens")
		require.NoError(t, os.WriteFile(file, []byte(c.content), 0o600))
		require.NoError(t, os.Chmod(file, c.mode))
		require.NoError(t, os.Chown(file, c.uid, 0))
		for _, addr := range []string{"127.0.0.1:0", "0.0.0.0:0"} {
			out, ended := runUntil(t, bin, env, []string{"api", "-expire-interval", "0", "-addr", addr, "-token-file", file}, listening)
			require.True(t, ended, "%s on %s: the api started:\n%s", c.name, addr, out)
			assert.Contains(t, out, "couponlink api: ", "%s on %s", c.name, addr)
			assert.Contains(t, out, file, "%s on %s", c.name, addr)
			for _, say := range c.says {
				assert.Contains(t, out, say, "%s on %s", c.name, addr)
			}
			assert.NotRegexp(t, listening, out, "%s on %s", c.name, addr)
		}
	}
}

// The token file is read again on SIGHUP: a token taken out stops
// working, one added starts, without a restart; a file that does not
// load keeps the tokens in use.
func TestAPITokensReloadOnSIGHUP(t *testing.T) {
	_, dsn := testenv.MySQL(t)
	bin := testenv.BuildCouponlink(t)
	file := filepath.Join(t.TempDir(), "tokens")
	alice, bob := auth.NewToken(), auth.NewToken()
	write := func(s string) { require.NoError(t, os.WriteFile(file, []byte(s), 0o600)) }
	write("alice operator " + auth.Digest(alice) + "\n")
	var out testenv.Output
	cmd := exec.Command(bin, "api", "-addr", "127.0.0.1:0", "-expire-interval", "0", "-token-file", file)
	cmd.Env = append(os.Environ(), "COUPONLINK_MYSQL_DSN="+dsn, "COUPONLINK_API_TOKEN=")
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() })
	addr := regexp.MustCompile(`listening on http://(\S+)`)
	require.Eventually(t, func() bool { return addr.MatchString(out.String()) }, 60*time.Second, 10*time.Millisecond, "%s", &out)
	base := "http://" + addr.FindStringSubmatch(out.String())[1]
	status := func(token string) int {
		req, _ := http.NewRequest("GET", base+"/v1/templates", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		return res.StatusCode
	}
	assert.Equal(t, http.StatusOK, status(alice))
	assert.Equal(t, http.StatusUnauthorized, status(bob))

	reloaded := func(n int) func() bool {
		return func() bool { return len(regexp.MustCompile(`SIGHUP`).FindAllString(out.String(), -1)) >= n }
	}
	write("bob viewer " + auth.Digest(bob) + "\n")
	require.NoError(t, cmd.Process.Signal(syscall.SIGHUP))
	require.Eventually(t, reloaded(1), 30*time.Second, 10*time.Millisecond, "%s", &out)
	assert.Equal(t, http.StatusUnauthorized, status(alice))
	assert.Equal(t, http.StatusOK, status(bob))

	write("bob viewer " + bob + "\n") // the token in clear: refused, bob stays
	require.NoError(t, cmd.Process.Signal(syscall.SIGHUP))
	require.Eventually(t, reloaded(2), 30*time.Second, 10*time.Millisecond, "%s", &out)
	assert.Contains(t, out.String(), "were not reloaded")
	assert.Equal(t, http.StatusOK, status(bob))
	assert.NotContains(t, out.String(), bob, "no token is printed")
	assert.NotContains(t, out.String(), alice, "no token is printed")
}

// A reload never opens the API, on loopback or not: a token file rewritten
// empty, with comments only, malformed, writable by everyone or given to
// another user is refused on SIGHUP with an ERROR; the old tokens stay,
// so a request without a token is still 401 and the old token still 200.
func TestAPITokenReloadFailsClosed(t *testing.T) {
	_, dsn := testenv.MySQL(t)
	bin := testenv.BuildCouponlink(t)
	for _, addr := range []string{"0.0.0.0:0", "127.0.0.1:0"} {
		t.Run(addr, func(t *testing.T) { reloadFailsClosed(t, bin, dsn, addr) })
	}
}

func reloadFailsClosed(t *testing.T, bin, dsn, addr string) {
	file := filepath.Join(t.TempDir(), "tokens")
	alice, bob := auth.NewToken(), auth.NewToken()
	write := func(s string, mode os.FileMode, uid int) {
		require.NoError(t, os.WriteFile(file, []byte(s), 0o600))
		require.NoError(t, os.Chmod(file, mode))
		require.NoError(t, os.Chown(file, uid, 0))
	}
	write("alice operator "+auth.Digest(alice)+"\n", 0o600, 0)
	var out testenv.Output
	cmd := exec.Command(bin, "api", "-addr", addr, "-expire-interval", "0", "-token-file", file)
	cmd.Env = append(os.Environ(), "COUPONLINK_MYSQL_DSN="+dsn, "COUPONLINK_API_TOKEN=", "COUPONLINK_API_INSECURE_NO_AUTH=false")
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() })
	listening := regexp.MustCompile(`listening on http://(\S+)`)
	require.Eventually(t, func() bool { return listening.MatchString(out.String()) }, 60*time.Second, 10*time.Millisecond, "%s", &out)
	_, port, err := net.SplitHostPort(listening.FindStringSubmatch(out.String())[1])
	require.NoError(t, err)
	base := "http://127.0.0.1:" + port
	status := func(token string) int {
		req, _ := http.NewRequest("GET", base+"/v1/templates", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		return res.StatusCode
	}
	require.Equal(t, http.StatusOK, status(alice), "%s", &out)
	require.Equal(t, http.StatusUnauthorized, status(""))

	refused := regexp.MustCompile(`level=ERROR msg="SIGHUP: the tokens were not reloaded; the ones in use stay" component=api tokens="\[alice=operator\]" err=`)
	bobLine := "bob viewer " + auth.Digest(bob) + "\n"
	steps := []struct {
		name, content string
		mode          os.FileMode
		uid           int
		says          string
	}{
		{"empty", "", 0o600, 0, "holds no token"},
		{"comments only", "# bob, soon\n\n   \n# " + bobLine, 0o600, 0, "holds no token"},
		{"malformed", "bob viewer " + bob + "\n", 0o600, 0, "never the token itself"},
		{"world-writable", bobLine, 0o666, 0, "chmod go-w"},
		{"another user's", bobLine, 0o600, 12345, "owned by uid 12345"},
	}
	for i, s := range steps {
		write(s.content, s.mode, s.uid)
		require.NoError(t, cmd.Process.Signal(syscall.SIGHUP))
		require.Eventually(t, func() bool { return len(refused.FindAllString(out.String(), -1)) == i+1 },
			30*time.Second, 10*time.Millisecond, "%s: %s", s.name, &out)
		lines := refused.FindAllStringIndex(out.String(), -1)
		last := out.String()[lines[i][0]:]
		last, _, _ = strings.Cut(last, "\n")
		assert.Contains(t, last, s.says, s.name)
		assert.Equal(t, http.StatusUnauthorized, status(""), "%s: a request without a token", s.name)
		assert.Equal(t, http.StatusUnauthorized, status(bob), s.name)
		assert.Equal(t, http.StatusOK, status(alice), "%s: the old token", s.name)
	}
	assert.NotContains(t, out.String(), "tokens reloaded")

	// a good file still reloads
	write(bobLine, 0o600, 0)
	require.NoError(t, cmd.Process.Signal(syscall.SIGHUP))
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "tokens reloaded") }, 30*time.Second, 10*time.Millisecond, "%s", &out)
	assert.Equal(t, http.StatusOK, status(bob))
	assert.Equal(t, http.StatusUnauthorized, status(alice))
	assert.Equal(t, http.StatusUnauthorized, status(""))
	assert.NotContains(t, out.String(), alice, "no token is printed")
	assert.NotContains(t, out.String(), bob, "no token is printed")
}

// With -metrics-addr the api serves /metrics there alone, and not beside
// the API.
func TestAPIMetricsOnTheirOwnListener(t *testing.T) {
	_, dsn := testenv.MySQL(t)
	bin := testenv.BuildCouponlink(t)
	env := []string{"COUPONLINK_MYSQL_DSN=" + dsn, "COUPONLINK_API_TOKEN="}
	var out testenv.Output
	cmd := exec.Command(bin, "api", "-addr", "127.0.0.1:0", "-expire-interval", "0", "-metrics-addr", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() })
	apiAt := regexp.MustCompile(`listening on http://(\S+)`)
	metricsAt := regexp.MustCompile(`msg="metrics listening".* addr=(\S+)`)
	require.Eventually(t, func() bool { return apiAt.MatchString(out.String()) && metricsAt.MatchString(out.String()) },
		60*time.Second, 10*time.Millisecond, "%s", &out)
	get := func(url string) int {
		res, err := http.Get(url)
		require.NoError(t, err)
		res.Body.Close()
		return res.StatusCode
	}
	assert.Equal(t, http.StatusOK, get("http://"+metricsAt.FindStringSubmatch(out.String())[1]+"/metrics"))
	assert.Equal(t, http.StatusNotFound, get("http://"+apiAt.FindStringSubmatch(out.String())[1]+"/metrics"))
	assert.Equal(t, http.StatusOK, get("http://"+apiAt.FindStringSubmatch(out.String())[1]+"/healthz"))
}
