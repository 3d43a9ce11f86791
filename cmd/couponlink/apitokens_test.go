package main

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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
	// loopback without a token: as before, open, no warning
	out, ended = runUntil(t, bin, env, []string{"api", "-addr", "127.0.0.1:0", "-expire-interval", "0"}, listening)
	assert.False(t, ended, out)
	assert.NotContains(t, out, "INSECURE")
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
