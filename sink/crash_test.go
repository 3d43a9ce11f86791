package sink_test

import (
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/inventory"
	"github.com/couponlink/couponlink/quota"
)

// cdcProcess is one run of `couponlink cdc`.
type cdcProcess struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// cdcRunner starts `couponlink cdc` processes on one database, their
// stderr appended to one file that is printed when the test fails.
type cdcRunner struct {
	t      *testing.T
	bin    string
	args   []string
	stderr *os.File
}

func newCDCRunner(t *testing.T, e *env, redisAddr string) *cdcRunner {
	t.Helper()
	dir := t.TempDir()
	bin := testenv.BuildCouponlink(t)
	f, err := os.Create(filepath.Join(dir, "cdc.stderr"))
	require.NoError(t, err)
	r := &cdcRunner{t: t, bin: bin, stderr: f, args: []string{"cdc", "-dsn", e.DSN, "-redis", redisAddr,
		"-key-prefix", e.Keys.Prefix, "-metrics-addr", "", "-batch-wait", "5ms", "-redemption-grace", "1s"}}
	t.Cleanup(func() {
		if t.Failed() {
			data, _ := os.ReadFile(f.Name())
			if len(data) > 32<<10 {
				data = append([]byte("...\n"), data[len(data)-32<<10:]...)
			}
			t.Logf("stderr of the couponlink cdc processes:\n%s", data)
		}
		_ = f.Close()
	})
	return r
}

// start starts a process with the runner's arguments, then extra.
func (r *cdcRunner) start(extra ...string) *cdcProcess {
	r.t.Helper()
	args := append(r.args[:len(r.args):len(r.args)], extra...)
	_, _ = r.stderr.WriteString("=== couponlink " + strings.Join(args, " ") + "\n")
	cmd := exec.Command(r.bin, args...)
	cmd.Stderr = r.stderr
	cmd.Stdout = r.stderr
	require.NoError(r.t, cmd.Start())
	p := &cdcProcess{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	r.t.Cleanup(func() { p.signal(syscall.SIGKILL) })
	return p
}

func (p *cdcProcess) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// signal sends sig and waits until the process is gone.
func (p *cdcProcess) signal(sig syscall.Signal) error {
	if !p.exited() {
		_ = p.cmd.Process.Signal(sig)
	}
	select {
	case <-p.done:
		return p.err
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		return p.err
	}
}

// The crash test: the workload runs while `couponlink cdc` processes are
// killed with SIGKILL at random moments (some during their start, most
// while they apply batches) and restarted. At the end: counters == truth,
// Redis == claimable, coupon_template's cached counts == truth, and no
// anomaly invented or lost: every kind is written in the checkpoint's
// transaction, and the used-without-redemption checks pending in a killed
// process are kept with its checkpoint and decided by the next one.
func TestCrashRestartKeepsCountersExact(t *testing.T) {
	e := newEnv(t)
	runner := newCDCRunner(t, e, testenv.RedisAddr(t))
	const minKills = 7
	var kills atomic.Int64
	w := newWorkload(e, wlConfig{Workers: 6, Ops: 6_000, Quota: 400, OverIssue: true,
		More: func() bool { return kills.Load() < minKills }})
	// the rebalancing rule moves quota between the buckets while the
	// workload runs (not the over-issue template's: its anomalies are counted)
	runner.args = append(runner.args, "-quota-mode", "auto", "-quota-min-age", "0s", "-quota-cooldown", "0s",
		"-quota-min-claims", "20", "-quota-low", "0.6", "-quota-high", "0.7", "-quota-reserve", "0", "-rebalance-every", "50ms")
	off := quota.ModeOff
	_, err := quota.SetPolicy(context.Background(), e.DB, w.over.Template, quota.Override{Mode: &off}, "test", "counted over-issue", quota.SourceCLI, "")
	require.NoError(t, err)

	p := runner.start()
	e.WaitCheckpoint() // the first start bootstrapped before any write of the workload
	wait := w.start()

	rng := rand.New(rand.NewPCG(rand.Uint64(), 7))
	ctx := context.Background()
	var midStream, afterProgress int
	for kills.Load() < minKills {
		startCP := e.checkpoint()
		if kills.Load()%3 != 2 {
			// most kills: once this process applied batches, at a random moment
			cdctest.WaitFor(t, 60*time.Second, "the restarted cdc applies batches", func() bool {
				require.False(t, p.exited(), "couponlink cdc exited by itself: %v", p.err)
				return e.checkpoint().Batches > startCP.Batches+1
			})
			afterProgress++
		}
		time.Sleep(time.Duration(rng.IntN(400)) * time.Millisecond) // the random moment of the kill
		require.False(t, p.exited(), "couponlink cdc exited by itself: %v", p.err)
		writer, err := canal.CurrentPosition(ctx, e.DB)
		require.NoError(t, err)
		_ = p.signal(syscall.SIGKILL)
		kills.Add(1)
		if cp := e.checkpoint(); cp.Pos.Compare(writer) < 0 && cp.Batches > startCP.Batches {
			midStream++ // it had applied batches, and was behind the writers when it died
		}
		p = runner.start()
	}
	wait()
	t.Logf("%d kills, %d after the process applied batches, %d mid-stream (behind the writers)", kills.Load(), afterProgress, midStream)
	require.GreaterOrEqual(t, midStream, 3, "too few kills landed while the cdc was applying a backlog: the test proves little")

	e.WaitCheckpoint()
	require.Equal(t, e.Truth(), e.Counters(), "derived counters differ from GROUP BY over user_coupon after the kills")
	var transfers int
	require.NoError(t, e.DB.QueryRow(`SELECT COUNT(*) FROM quota_transfer_log WHERE mode = 'auto'`).Scan(&transfers))
	rows, err := e.DB.Query(`SELECT t.id, t.total_quota, SUM(q.quota), SUM(q.claimed > q.quota) FROM coupon_template t
		JOIN channel_quota q ON q.template_id = t.id GROUP BY t.id, t.total_quota`)
	require.NoError(t, err)
	for rows.Next() {
		var tpl, total, sum, over int64
		require.NoError(t, rows.Scan(&tpl, &total, &sum, &over))
		require.Equal(t, total, sum, "template %d: quota not conserved across %d transfers", tpl, transfers)
		require.Zero(t, over, "template %d: claimed above quota", tpl)
	}
	require.NoError(t, rows.Close())
	t.Logf("%d quota transfers applied during the kills", transfers)
	e.AssertRedis()
	e.assertTemplateCaches()

	cdctest.WaitFor(t, 60*time.Second, "no pending redemption checks", func() bool { return e.pendingChecks() == 0 })
	want, got := w.expected(), e.anomalies()
	for _, k := range []string{inventory.AnomalyIllegalTransition, inventory.AnomalyDeletedCoupon, inventory.AnomalyOverIssue, inventory.AnomalyUsedWithoutRedemption} {
		require.Positive(t, want[k], "the workload caused no %s", k)
		require.Equal(t, want[k], got[k], "%s anomalies recorded despite the kills (exactly-once: in the checkpoint's transaction)", k)
	}
	require.Zero(t, got[inventory.AnomalyDuplicateRedemption], "duplicate_redemption invented")
	require.EqualValues(t, sum(got), e.checkpoint().Anomalies, "the checkpoint's anomaly count differs from the rows of cdc_anomaly")

	// graceful shutdown: SIGTERM finishes the batch in flight and exits 0
	require.NoError(t, p.signal(syscall.SIGTERM), "couponlink cdc did not exit cleanly on SIGTERM")
}

// killWhileWriting kills the running cdc p (-9) and starts it again, up to
// three times while writers are left: each time once it has applied a
// batch since the last start, after a random pause. It returns the cdc
// now running and the number of kills.
func (r *cdcRunner) killWhileWriting(e *env, p *cdcProcess, left *atomic.Int64, rng *rand.Rand) (*cdcProcess, int) {
	r.t.Helper()
	kills := 0
	for kills < 3 && left.Load() > 0 {
		start := e.checkpoint().Batches
		cdctest.WaitFor(r.t, 60*time.Second, "the restarted cdc applies batches", func() bool {
			require.False(r.t, p.exited(), "couponlink cdc exited by itself: %v", p.err)
			return e.checkpoint().Batches > start || left.Load() == 0
		})
		time.Sleep(time.Duration(rng.IntN(50)) * time.Millisecond) // the random moment of the kill
		_ = p.signal(syscall.SIGKILL)
		kills++
		p = r.start()
	}
	return p, kills
}
