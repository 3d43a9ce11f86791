package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/internal/redisconn"
	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/internal/tlsconf"
	"github.com/couponlink/couponlink/webhook"
)

// tlsEnv runs the built couponlink with the environment of a deployment
// whose MySQL and Redis take TLS alone.
type tlsEnv struct {
	t   *testing.T
	bin string
	env []string
}

// run runs a one-shot command with e's environment and extra variables,
// and returns its exit code and output.
func (e *tlsEnv) run(extra []string, args ...string) (int, string) {
	e.t.Helper()
	cmd := exec.Command(e.bin, args...)
	cmd.Env = append(append(os.Environ(), e.env...), extra...)
	out, err := cmd.CombinedOutput()
	if x, ok := err.(*exec.ExitError); ok {
		return x.ExitCode(), string(out)
	}
	require.NoError(e.t, err)
	return 0, string(out)
}

// start runs a daemon with e's environment and extra variables, killed
// when the test ends.
func (e *tlsEnv) start(extra []string, args ...string) *testenv.Output {
	e.t.Helper()
	out := &testenv.Output{}
	cmd := exec.Command(e.bin, args...)
	cmd.Env = append(append(os.Environ(), e.env...), extra...)
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(e.t, cmd.Start())
	e.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if e.t.Failed() {
			e.t.Logf("couponlink %s:\n%s", args[0], out.String())
		}
	})
	return out
}

// TestTLSEveryProcess: a MariaDB with require_secure_transport=ON and a
// Redis serving TLS alone (client certificates required) with requirepass
// and an ACL user, both with certificates of a CA made here; the built
// binary, configured once by the environment (COUPONLINK_MYSQL_TLS*,
// COUPONLINK_REDIS_TLS*, the ACL user's COUPONLINK_REDIS_USERNAME and
// COUPONLINK_REDIS_PASSWORD, the cdc's password from
// COUPONLINK_REDIS_PASSWORD_FILE instead, a rediss:// event sink with TLS
// files of its own, which receives the events): migrate
// creates the schema, the api claims, the cdc bootstraps and streams the
// binlog (a claim made after it started moves its counters and the Redis
// stock key), status reads them, a reconcile pass is clean and anomalies
// lists the findings. The same
// commands in clear are refused by the server (so TLS was used), with
// another CA refused by the client with a message naming it, with a wrong
// Redis password refused naming the setting, and no message shows a
// password.
func TestTLSEveryProcess(t *testing.T) {
	ca, other := testenv.NewCA(t, "test"), testenv.NewCA(t, "other")
	m := testenv.OwnMariaDBTLS(t, ca)
	const redisAdminPw, redisPw = "Redis-admin-Secret7", "Redis-app-Secret8"
	r := testenv.OwnRedisTLS(t, ca, "--requirepass", redisAdminPw)
	cert, key := ca.Issue("couponlink")
	const password = "Tls-pw-Secret9"
	rc, err := tlsconf.Settings{Mode: tlsconf.Verify, CA: ca.File, Cert: cert, Key: key}.Load()
	require.NoError(t, err)
	rdb, err := redisconn.Open(redisconn.Options{Addr: r.Addr, TLS: rc, Password: redisAdminPw})
	require.NoError(t, err)
	defer rdb.Close()
	require.NoError(t, rdb.Do(context.Background(), "ACL", "SETUSER", "couponlink", "on", ">"+redisPw, "~*", "&*", "+@all").Err())
	pwFile := filepath.Join(t.TempDir(), "redis-password")
	require.NoError(t, os.WriteFile(pwFile, []byte(redisPw+"\n"), 0o600))
	root, err := sql.Open("mysql", m.SocketDSN)
	require.NoError(t, err)
	defer root.Close()
	for _, q := range []string{"CREATE USER 'app'@'127.0.0.1' IDENTIFIED BY '" + password + "'", "GRANT ALL ON *.* TO 'app'@'127.0.0.1'"} {
		_, err := root.Exec(q)
		require.NoError(t, err, q)
	}
	e := &tlsEnv{t: t, bin: testenv.BuildCouponlink(t), env: []string{
		"COUPONLINK_MYSQL_DSN=app:" + password + "@tcp(" + m.Addr + ")/couponlink",
		"COUPONLINK_MYSQL_TLS=verify", "COUPONLINK_MYSQL_TLS_CA=" + ca.File,
		"COUPONLINK_REDIS_ADDR=" + r.Addr, "COUPONLINK_REDIS_TLS=verify", "COUPONLINK_REDIS_TLS_CA=" + ca.File,
		"COUPONLINK_REDIS_TLS_CERT=" + cert, "COUPONLINK_REDIS_TLS_KEY=" + key,
		"COUPONLINK_REDIS_USERNAME=couponlink", "COUPONLINK_REDIS_PASSWORD=" + redisPw,
		"COUPONLINK_KEY_PREFIX=tls:", "COUPONLINK_LOG_LEVEL=info",
	}}

	code, out := e.run(nil, "migrate")
	require.Equal(t, 0, code, out)
	db, err := sql.Open("mysql", m.SocketDSN+"couponlink")
	require.NoError(t, err)
	defer db.Close()
	res, err := db.Exec(`INSERT INTO coupon_template (name, total_quota, valid_seconds) VALUES ('campaign', 60, 3600)`)
	require.NoError(t, err)
	id, _ := res.LastInsertId()
	tpl := strconv.FormatInt(id, 10)
	_, err = db.Exec(`INSERT INTO channel_quota (template_id, channel, quota, claimed) VALUES (?, 'app', 60, 0)`, id)
	require.NoError(t, err)

	apiAddr := testenv.FreeAddr(t)
	e.start(nil, "api", "-addr", apiAddr, "-expire-interval", "0")
	claim := func(user string) {
		t.Helper()
		var res *http.Response
		cdctest.WaitFor(t, 30*time.Second, "the api answers a claim", func() bool {
			res, err = http.Post("http://"+apiAddr+"/v1/claims", "application/json",
				strings.NewReader(`{"template_id": `+tpl+`, "user_id": "`+user+`", "channel": "app", "request_id": "`+user+`"}`))
			return err == nil
		})
		defer res.Body.Close()
		require.Equal(t, http.StatusCreated, res.StatusCode)
	}
	claim("u1") // counted by the bootstrap

	metricsAddr := testenv.FreeAddr(t)
	sink := "rediss://couponlink:" + redisPw + "@" + r.Addr + "?stream=tls:events&tls_ca=" + ca.File + "&tls_cert=" + cert + "&tls_key=" + key
	cdcOut := e.start([]string{"COUPONLINK_REDIS_PASSWORD=", "COUPONLINK_REDIS_PASSWORD_FILE=" + pwFile, "COUPONLINK_EVENT_SINKS=" + sink},
		"cdc", "-metrics-addr", metricsAddr)
	cdctest.WaitFor(t, 60*time.Second, "the cdc tails the binlog", func() bool { return strings.Contains(cdcOut.String(), "tailing the binlog") })
	claim("u2") // streamed over the binlog connection, in TLS
	held := func() float64 {
		res, err := http.Get("http://" + metricsAddr + "/status")
		if err != nil {
			return -1
		}
		defer res.Body.Close()
		var v struct{ Pairs []struct{ Held float64 } }
		if json.NewDecoder(res.Body).Decode(&v) != nil || len(v.Pairs) != 1 {
			return -1
		}
		return v.Pairs[0].Held
	}
	cdctest.WaitFor(t, 30*time.Second, "the cdc counts the streamed claim", func() bool { return held() == 2 })
	stockKey := "tls:stock:{" + tpl + "}:app"
	cdctest.WaitFor(t, 30*time.Second, "the cdc writes the Redis stock key", func() bool {
		return rdb.Get(context.Background(), stockKey).Val() == "58" // 60 - 2
	})

	tx, err := db.Begin()
	require.NoError(t, err)
	require.NoError(t, webhook.Enqueue(context.Background(), tx, webhook.Event{Type: webhook.QuotaReleased, Template: id, Channel: "app",
		Data: map[string]any{"released": 1}}))
	require.NoError(t, tx.Commit())
	cdctest.WaitFor(t, 30*time.Second, "the rediss:// event sink receives the event", func() bool {
		return rdb.XLen(context.Background(), "tls:events").Val() > 0
	})

	code, out = e.run(nil, "status", "-json")
	require.Equal(t, 0, code, out)
	var st map[string]any
	require.NoError(t, json.Unmarshal([]byte(out[strings.IndexByte(out, '{'):]), &st), out)
	assert.Equal(t, true, st["found"])
	code, out = e.run(nil, "reconcile", "-once")
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "clean")
	code, out = e.run(nil, "anomalies", "list")
	require.Equal(t, 0, code, out)

	refused := map[string]struct {
		extra []string
		args  []string
		want  string
	}{
		"MySQL in clear": {[]string{"COUPONLINK_MYSQL_TLS=off", "COUPONLINK_MYSQL_TLS_CA="}, []string{"status"},
			"Access denied for user 'app'@'127.0.0.1'"},
		"MySQL's DSN tls=false": {[]string{"COUPONLINK_MYSQL_DSN=app:" + password + "@tcp(" + m.Addr + ")/couponlink?tls=false"}, []string{"migrate"},
			"Access denied for user 'app'@'127.0.0.1'"},
		"MySQL, another CA": {[]string{"COUPONLINK_MYSQL_TLS_CA=" + other.File}, []string{"status"},
			"the server's TLS certificate is refused (TLS mode verify, checked against the CA file " + other.File + ")"},
		"cdc, another CA": {[]string{"COUPONLINK_MYSQL_TLS_CA=" + other.File}, []string{"cdc", "-metrics-addr", ""},
			"the server's TLS certificate is refused (TLS mode verify, checked against the CA file " + other.File + ")"},
		"Redis in clear": {[]string{"COUPONLINK_REDIS_TLS=off", "COUPONLINK_REDIS_TLS_CA=", "COUPONLINK_REDIS_TLS_CERT=", "COUPONLINK_REDIS_TLS_KEY="},
			[]string{"reconcile", "-once"}, "stock keys: tls:stock:{" + tpl + "}: EOF"}, // a TLS port closes a connection in clear
		"Redis, another CA": {[]string{"COUPONLINK_REDIS_TLS_CA=" + other.File}, []string{"reconcile", "-once"},
			"TLS to Redis " + r.Addr + ": the server's TLS certificate is refused (TLS mode verify, checked against the CA file " + other.File + ")"},
		"a mode that is not one": {[]string{"COUPONLINK_MYSQL_TLS=on"}, []string{"status"},
			`MySQL TLS (-mysql-tls* [COUPONLINK_MYSQL_TLS*]): TLS mode "on": want off, verify, verify-ca or skip-verify`},
		"Redis, a wrong password": {[]string{"COUPONLINK_REDIS_PASSWORD=Wrong-redis-pw1"}, []string{"reconcile", "-once"},
			"Redis refuses couponlink's credentials (WRONGPASS"},
		"Redis, no password": {[]string{"COUPONLINK_REDIS_USERNAME=", "COUPONLINK_REDIS_PASSWORD="}, []string{"cdc", "-metrics-addr", ""},
			"-redis-password [COUPONLINK_REDIS_PASSWORD, or its file COUPONLINK_REDIS_PASSWORD_FILE]"},
		"Redis, the password and its file": {[]string{"COUPONLINK_REDIS_PASSWORD_FILE=" + pwFile}, []string{"reconcile", "-once"},
			"both COUPONLINK_REDIS_PASSWORD and COUPONLINK_REDIS_PASSWORD_FILE are set"},
		"a CA with TLS off": {[]string{"COUPONLINK_REDIS_TLS=off"}, []string{"reconcile", "-once"},
			"Redis TLS (-redis-tls* [COUPONLINK_REDIS_TLS*]): a TLS CA, certificate or key file is set but the TLS mode is off"},
	}
	for name, c := range refused {
		code, out := e.run(c.extra, c.args...)
		assert.NotEqual(t, 0, code, "%s: %s", name, out)
		assert.Contains(t, out, c.want, name)
		for _, pw := range []string{password, redisPw, redisAdminPw, "Wrong-redis-pw1"} {
			assert.NotContains(t, out, pw, name)
		}
	}
	assert.NotContains(t, cdcOut.String(), password)
	assert.NotContains(t, cdcOut.String(), redisPw)
	assert.Equal(t, 2.0, held(), "the refused cdc changed nothing")
}
