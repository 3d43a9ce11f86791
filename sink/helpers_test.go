package sink_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/internal/cdcenv"
	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/inventory"
)

// checkpoint reads the default checkpoint.
func (e *env) checkpoint() inventory.Checkpoint {
	e.T.Helper()
	cp, found, err := inventory.LoadCheckpoint(context.Background(), e.DB, "default")
	require.NoError(e.T, err)
	require.True(e.T, found, "no checkpoint row")
	return cp
}

// waitSettled waits until every write made before the call is applied and
// every USED coupon awaiting its redemption row has been judged: the
// checkpoint reached the binlog end, two more batches (heartbeats) were
// saved after it — so the metrics of the batch that reached it are set —
// and couponlink_cdc_pending_redemption_checks is 0.
func (e *env) waitSettled(c *cdcenv.CDC, within time.Duration) {
	e.T.Helper()
	e.WaitCheckpoint()
	batches := e.checkpoint().Batches
	cdctest.WaitFor(e.T, within, "two batches after the checkpoint reached the binlog end", func() bool {
		return e.checkpoint().Batches >= batches+2
	})
	cdctest.WaitFor(e.T, within, "no pending redemption checks", func() bool {
		v, ok := cdctest.Metric(e.T, c.Reg, "couponlink_cdc_pending_redemption_checks", nil)
		return ok && v == 0
	})
}

// assertTemplateCaches checks coupon_template's issued/used/expired counts
// against the truth of user_coupon, for every template.
func (e *env) assertTemplateCaches() {
	e.T.Helper()
	want := map[int64][3]int64{}
	for id := range e.TemplateCaches() {
		want[id] = [3]int64{}
	}
	for p, c := range e.Truth() {
		v := want[p.Template]
		v[0] += c.Held + c.Used + c.Expired + c.Returned
		v[1] += c.Used
		v[2] += c.Expired
		want[p.Template] = v
	}
	require.Equal(e.T, want, e.TemplateCaches(), "coupon_template cached counts (issued, used, expired) differ from the truth")
}

// privateRedis is a redis-server of this test alone, which it may flush,
// kill and restart.
type privateRedis struct {
	t    *testing.T
	port int
	dir  string
	addr string
}

func startPrivateRedis(t *testing.T) *privateRedis {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	r := &privateRedis{t: t, port: port, dir: t.TempDir(), addr: fmt.Sprintf("127.0.0.1:%d", port)}
	r.start()
	t.Cleanup(r.kill)
	return r
}

func (r *privateRedis) pidfile() string { return filepath.Join(r.dir, "redis.pid") }

// start runs redis-server on the port and waits until it answers PING.
func (r *privateRedis) start() {
	r.t.Helper()
	out, err := exec.Command("redis-server", "--bind", "127.0.0.1", "--port", strconv.Itoa(r.port), "--save", "",
		"--appendonly", "no", "--dir", r.dir, "--daemonize", "yes", "--pidfile", r.pidfile(),
		"--logfile", filepath.Join(r.dir, "redis.log")).CombinedOutput()
	require.NoError(r.t, err, "start redis-server: %s", out)
	c := redis.NewClient(&redis.Options{Addr: r.addr})
	defer c.Close()
	cdctest.WaitFor(r.t, 10*time.Second, "private redis-server answers PING", func() bool {
		return c.Ping(context.Background()).Err() == nil
	})
}

// kill stops the server by its PID (SIGKILL: no chance to save anything)
// and waits until it is gone.
func (r *privateRedis) kill() {
	data, err := os.ReadFile(r.pidfile())
	if err != nil {
		return // not running
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		return
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	_ = os.Remove(r.pidfile())
}

// alive reports whether a process exists and is not a zombie (a daemon's
// parent is PID 1, which may be slow to reap it; a zombie holds no socket).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(stat), ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}

// client is a client with the short timeouts the cdc command uses.
func (r *privateRedis) client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: r.addr, DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second})
	r.t.Cleanup(func() { _ = c.Close() })
	return c
}
