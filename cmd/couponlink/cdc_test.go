package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/internal/testenv"
)

// The cdc's ops server answers GET /status with what `couponlink status
// -json` prints, and every line the cdc logs names its component (cdc,
// leader, canal, ...), so an operator can filter one.
func TestCDCStatusRouteAndComponents(t *testing.T) {
	db, dsn := testenv.MySQL(t)
	tpl := mustInt(t, newTemplate(t, db))
	store, err := coupon.New(coupon.Config{DB: db, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	claim := func(user string) {
		t.Helper()
		_, err := store.Claim(context.Background(), coupon.ClaimRequest{TemplateID: tpl, UserID: user, Channel: "app", RequestID: user})
		require.NoError(t, err)
	}
	claim("u1") // counted by the bootstrap

	c := startCDC(t, "-dsn", dsn, "-redis", "", "-log-level", "debug")
	statusURL := c.url + "/status"

	get := func() map[string]any {
		t.Helper()
		res, err := http.Get(statusURL)
		require.NoError(t, err)
		defer res.Body.Close()
		require.Equal(t, http.StatusOK, res.StatusCode)
		assert.Equal(t, "application/json", res.Header.Get("Content-Type"))
		var v map[string]any
		require.NoError(t, json.NewDecoder(res.Body).Decode(&v))
		return v
	}
	claim("u2") // streamed
	cdctest.WaitFor(t, 30*time.Second, "GET /status shows the streamed claim", func() bool {
		pairs, _ := get()["pairs"].([]any)
		return len(pairs) == 1 && pairs[0].(map[string]any)["held"] == 2.0
	})
	served := get()
	code, out, errs := cli(t, "status", "-dsn", dsn, "-json")
	require.Equal(t, 0, code, errs)
	var printed map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &printed), out)
	// what moves on its own: the checkpoint follows other databases' binlog
	for _, k := range []string{"position", "server_position", "lag_seconds", "saved_at", "event_time", "batches", "events_applied"} {
		assert.Contains(t, served, k)
		delete(served, k)
		delete(printed, k)
	}
	assert.Equal(t, printed, served)
	assert.Equal(t, true, served["found"])
	assert.Equal(t, "default", served["checkpoint"])
	assert.Equal(t, []any{map[string]any{"template": float64(tpl), "channel": "app", "quota": 60.0, "claimable": 48.0,
		"held": 2.0, "used": 0.0, "expired": 0.0, "returned": 0.0, "released": 0.0, "frozen": 0.0}}, served["pairs"])

	require.Equal(t, 0, c.stop(), c.logs.String())
	lines := strings.Split(strings.TrimSpace(c.logs.String()), "\n")
	for _, l := range lines {
		assert.Equal(t, 1, strings.Count(l, " component="), "a log line needs one component: %s", l)
	}
	for msg, component := range map[string]string{"metrics listening": "cdc", "leader lock taken": "leader",
		"tailing the binlog": "cdc", "cdc stopped": "cdc"} {
		assert.Regexp(t, `msg="`+msg+`".* component=`+component+`( |$)`, c.logs.String())
	}
}

// runningCDC is a cdc run in this process by startCDC.
type runningCDC = inProcess

// startCDC runs `couponlink cdc` with args (and its ops server on a free
// port) until the test ends or stop is called, and waits until it tails
// the binlog. stop returns its exit code.
func startCDC(t *testing.T, args ...string) *runningCDC {
	t.Helper()
	return startInProcess(t, append([]string{"cdc", "-metrics-addr", "127.0.0.1:0"}, args...),
		`msg="metrics listening".* addr=(\S+)`, "tailing the binlog")
}

// inProcess is a command run in this process by startInProcess.
type inProcess struct {
	logs testenv.Output
	url  string // http://host:port it listens on
	stop func() int
}

// startInProcess runs the command of args until the test ends or stop is
// called, and waits until its log has a line matching listening (whose
// first group is the address it serves) and, if ready is not empty, a
// line containing ready. stop returns its exit code.
func startInProcess(t *testing.T, args []string, listening, ready string) *inProcess {
	t.Helper()
	c := &inProcess{}
	ctx, cancel := context.WithCancel(context.Background())
	exit := make(chan int, 1)
	go func() { exit <- runContext(ctx, args, io.Discard, &c.logs) }()
	var once sync.Once
	code := 0
	c.stop = func() int {
		once.Do(func() {
			cancel()
			code = <-exit
		})
		return code
	}
	t.Cleanup(func() { c.stop() })
	addr := regexp.MustCompile(listening)
	cdctest.WaitFor(t, 30*time.Second, "couponlink "+args[0]+" serves", func() bool {
		return strings.Contains(c.logs.String(), ready) && addr.MatchString(c.logs.String())
	})
	c.url = "http://" + addr.FindStringSubmatch(c.logs.String())[1]
	return c
}
