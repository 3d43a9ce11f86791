package sink_test

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/inventory"
)

// haPair is a leader and a standby `couponlink cdc` process on one
// database, each with its own /metrics, and the workload they follow.
type haPair struct {
	leader, standby         *cdcProcess
	leaderOps, standbyOps   string // their ops servers' addresses
	leaderName, standbyName string // as the checkpoint names them (host:pid)

	w         *workload
	stop      atomic.Bool
	wait      func()
	fromEpoch int64 // the epoch the leader took
}

// startLoad starts the random workload (until checkAfterTakeover) and
// waits until the leader applied batches of it.
func (h *haPair) startLoad(t *testing.T, e *env) {
	t.Helper()
	h.w = newWorkload(e, wlConfig{Workers: 4, Ops: 1500, Quota: 400, More: func() bool { return !h.stop.Load() }})
	h.wait = h.w.start()
	start := e.checkpoint()
	h.fromEpoch = start.Epoch
	cdctest.WaitFor(t, 60*time.Second, "the leader applies batches of the load", func() bool { return e.checkpoint().Batches > start.Batches+10 })
}

func processName(p *cdcProcess) string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s:%d", host, p.cmd.Process.Pid)
}

// startHAPair starts the leader (with leaderArgs), waits until it leads,
// then starts the standby and waits until its metrics answer.
func startHAPair(t *testing.T, e *env, r *cdcRunner, leaderArgs ...string) *haPair {
	t.Helper()
	h := &haPair{leaderOps: testenv.FreeAddr(t), standbyOps: testenv.FreeAddr(t)}
	h.leader = r.start(append([]string{"-metrics-addr", h.leaderOps}, leaderArgs...)...)
	h.leaderName = processName(h.leader)
	e.WaitCheckpoint()
	require.Equal(t, h.leaderName, e.checkpoint().Leader)
	h.standby = r.start("-metrics-addr", h.standbyOps)
	h.standbyName = processName(h.standby)
	cdctest.WaitFor(t, 30*time.Second, "the standby's metrics answer", func() bool {
		_, ok := scrape(t, h.standbyOps, "couponlink_cdc_leader")
		return ok
	})
	require.Equal(t, map[string]float64{"couponlink_cdc_leader": 0, "couponlink_cdc_leader_epoch": 0, "couponlink_cdc_leader_terms_total": 0},
		leaderMetrics(t, h.standbyOps), "the standby says it leads")
	return h
}

// scrape reads one unlabelled series from the /metrics of a cdc process.
func scrape(t *testing.T, addr, name string) (float64, bool) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			require.NoError(t, err)
			return f, true
		}
	}
	return 0, false
}

func leaderMetrics(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, n := range []string{"couponlink_cdc_leader", "couponlink_cdc_leader_epoch", "couponlink_cdc_leader_terms_total"} {
		v, ok := scrape(t, addr, n)
		require.True(t, ok, "%s missing from the metrics at %s", n, addr)
		out[n] = v
	}
	return out
}

// awaitTakeover waits until the standby leads the checkpoint and has
// applied a batch, and returns how long that took from since.
func (h *haPair) awaitTakeover(t *testing.T, e *env, since time.Time, within time.Duration) time.Duration {
	t.Helper()
	before := e.checkpoint().Batches
	cdctest.WaitFor(t, within, "the standby takes over and applies", func() bool {
		require.False(t, h.standby.exited(), "the standby exited: %v", h.standby.err)
		cp := e.checkpoint()
		return cp.Leader == h.standbyName && cp.Batches > before
	})
	return time.Since(since)
}

// checkAfterTakeover lets the load run on until the new leader applied
// more batches, stops it, and checks the counters, caches, Redis and
// anomalies against the truth (a batch applied twice or skipped shows as
// a counter or an anomaly count off the truth), and that the metrics and
// `couponlink status` show the new leader under a newer epoch.
func (h *haPair) checkAfterTakeover(t *testing.T, e *env, r *cdcRunner) {
	t.Helper()
	n := e.checkpoint().Batches
	cdctest.WaitFor(t, 60*time.Second, "the new leader applies the load", func() bool { return e.checkpoint().Batches > n+5 })
	h.stop.Store(true)
	h.wait()
	e.WaitCheckpoint()
	require.Equal(t, e.Truth(), e.Counters(), "derived counters differ from GROUP BY over user_coupon after the takeover")
	e.assertTemplateCaches()
	e.AssertRedis()
	cdctest.WaitFor(t, 60*time.Second, "no pending redemption checks", func() bool { return e.pendingChecks() == 0 })
	want, got := h.w.expected(), e.anomalies()
	for _, k := range []string{inventory.AnomalyIllegalTransition, inventory.AnomalyDeletedCoupon, inventory.AnomalyUsedWithoutRedemption} {
		require.Equal(t, want[k], got[k], "%s anomalies recorded across the takeover (a batch applied twice or skipped)", k)
	}
	cp := e.checkpoint()
	require.Equal(t, h.standbyName, cp.Leader)
	require.Greater(t, cp.Epoch, h.fromEpoch, "the takeover took no new epoch")
	require.Equal(t, map[string]float64{"couponlink_cdc_leader": 1, "couponlink_cdc_leader_epoch": float64(cp.Epoch),
		"couponlink_cdc_leader_terms_total": 1}, leaderMetrics(t, h.standbyOps), "the new leader's metrics")
	out, err := exec.Command(r.bin, "status", "-dsn", e.DSN).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Regexp(t, fmt.Sprintf(`leader\s+%s \(epoch %d\)`, h.standbyName, cp.Epoch), string(out), "couponlink status")
}

// HA: two `couponlink cdc` processes on one database under a steady
// load; the leader is killed (-9) while it applies batches. The server
// sees its connections close and frees the leader lock at once: the
// standby leads and applies well within the -leader-timeout bound, no
// batch twice, no gap.
func TestHATakeoverAfterLeaderSIGKILL(t *testing.T) {
	e := newEnv(t)
	r := newCDCRunner(t, e, testenv.RedisAddr(t))
	const bound = 10 * time.Second
	r.args = append(r.args, "-leader-timeout", bound.String())
	h := startHAPair(t, e, r)
	h.startLoad(t, e)

	killed := time.Now()
	_ = h.leader.signal(syscall.SIGKILL)
	took := h.awaitTakeover(t, e, killed, 3*bound)
	t.Logf("takeover after SIGKILL of the leader: %s (bound %s)", took.Round(time.Millisecond), bound)
	require.Less(t, took, bound, "the standby took longer than -leader-timeout to apply")
	h.checkAfterTakeover(t, e, r)
}

// HA under a network partition: the leader reaches MariaDB through a proxy
// that stops passing bytes (and closes nothing), so the server never sees
// its connections close. The lock session's wait_timeout (-leader-timeout)
// ends the silent leader's sessions — its lock and any batch it had open —
// and the standby takes over within the bound.
func TestHATakeoverAfterLeaderPartition(t *testing.T) {
	e := newEnv(t)
	r := newCDCRunner(t, e, testenv.RedisAddr(t))
	const timeout = 3 * time.Second
	r.args = append(r.args, "-leader-timeout", timeout.String())
	cfg, err := mysql.ParseDSN(e.DSN)
	require.NoError(t, err)
	proxy := testenv.NewTCPProxy(t, cfg.Addr)
	cfg.Addr = proxy.Addr()
	h := startHAPair(t, e, r, "-dsn", cfg.FormatDSN())
	h.startLoad(t, e)

	cut := time.Now()
	proxy.Partition()
	took := h.awaitTakeover(t, e, cut, 60*time.Second)
	t.Logf("takeover after a partition of the leader: %s (-leader-timeout %s)", took.Round(time.Millisecond), timeout)
	require.Less(t, took, timeout+5*time.Second, "the standby took longer than -leader-timeout (+ its start) to apply")
	h.checkAfterTakeover(t, e, r)
	require.False(t, h.leader.exited(), "the partitioned leader exited: %v", h.leader.err)
}
