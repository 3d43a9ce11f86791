package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/internal/testenv"
)

// findPrometheus returns the Prometheus server binary. A missing binary is a
// failure, never a skip: alerts/check.sh (and CI) install Debian's
// prometheus package, which provides /usr/bin/prometheus.
func findPrometheus(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("COUPONLINK_PROMETHEUS"); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("COUPONLINK_PROMETHEUS=%q: %v", p, err)
		}
		return p
	}
	if p, err := exec.LookPath("prometheus"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/bin/prometheus"); err == nil {
		return "/usr/bin/prometheus"
	}
	where := "locally"
	if os.Getenv("CI") != "" {
		where = "in CI"
	}
	t.Fatalf("the Prometheus server binary is missing (%s): install Debian's prometheus package "+
		"(`apt-get install prometheus`, as alerts/check.sh does) or set COUPONLINK_PROMETHEUS to its path", where)
	return ""
}

// moduleRoot is the directory holding go.mod, above this package.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test's directory")
		}
		dir = parent
	}
}

// proc is a child process, stopped by its PID (SIGTERM, then SIGKILL).
type proc struct {
	name string
	cmd  *exec.Cmd
	out  *testenv.Output
	done chan struct{}
	err  error
}

// logs collects every process's output, printed when the test fails.
type logs struct {
	mu    sync.Mutex
	procs []*proc
}

func (l *logs) start(t *testing.T, name, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, cmd: exec.Command(bin, args...), out: &testenv.Output{}, done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	require.NoError(t, p.cmd.Start(), "start %s", name)
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	l.mu.Lock()
	l.procs = append(l.procs, p)
	l.mu.Unlock()
	t.Cleanup(func() { p.stop(t) })
	return p
}

func (p *proc) stop(t *testing.T) {
	t.Helper()
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		t.Errorf("%s (pid %d) did not stop within 10 s of SIGTERM: killed", p.name, p.cmd.Process.Pid)
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func (p *proc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

func (l *logs) dump(t *testing.T) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range l.procs {
		t.Logf("==== output of %s (pid %d) ====\n%s", p.name, p.cmd.Process.Pid, p.out.String())
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	start := time.Now()
	deadline := start.Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting until %s", within, what)
		}
		time.Sleep(200 * time.Millisecond) // polling a condition
	}
	t.Logf("%s (after %s)", what, time.Since(start).Round(10*time.Millisecond))
}

// alert is one entry of Prometheus's GET /api/v1/alerts.
type alert struct {
	Labels map[string]string `json:"labels"`
	State  string            `json:"state"` // pending or firing
}

type promClient struct {
	t    *testing.T
	base string
	hc   *http.Client
}

func (c *promClient) get(path string, into any) error {
	resp, err := c.hc.Get(c.base + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", path, resp.Status, body)
	}
	if into == nil {
		return nil
	}
	return json.Unmarshal(body, into)
}

func (c *promClient) alerts() []alert {
	c.t.Helper()
	var r struct {
		Status string `json:"status"`
		Data   struct {
			Alerts []alert `json:"alerts"`
		} `json:"data"`
	}
	require.NoError(c.t, c.get("/api/v1/alerts", &r))
	require.Equal(c.t, "success", r.Status)
	return r.Data.Alerts
}

// state is the state of the named alert whose labels include match:
// "firing", "pending" or "" (inactive: not listed).
func (c *promClient) state(name string, match map[string]string) string {
	c.t.Helper()
	best := ""
	for _, a := range c.alerts() {
		if a.Labels["alertname"] != name {
			continue
		}
		ok := true
		for k, v := range match {
			if a.Labels[k] != v {
				ok = false
			}
		}
		if ok && (best == "" || a.State == "firing") {
			best = a.State
		}
	}
	return best
}

// query evaluates an instant PromQL query and returns its sample values.
func (c *promClient) query(q string) []float64 {
	c.t.Helper()
	var r struct {
		Data struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	require.NoError(c.t, c.get("/api/v1/query?query="+url.QueryEscape(q), &r))
	var out []float64
	for _, s := range r.Data.Result {
		v, _ := strconv.ParseFloat(fmt.Sprint(s.Value[1]), 64)
		out = append(out, v)
	}
	return out
}

var forRE = regexp.MustCompile(`(?m)^(\s+for:\s*)\S+\s*$`)

// TestAlertsFireAndResolveWithRealPrometheus: drift above the thresholds
// fires CouponlinkDriftCounters and CouponlinkReconcileNeedsReview, a
// stopped cdc fires CouponlinkCDCDown, and all three resolve once the cdc
// runs again, the counter is right and the reconcile items are resolved.
func TestAlertsFireAndResolveWithRealPrometheus(t *testing.T) {
	ctx := context.Background()
	// The rules under test, with every `for:` shortened to 2s so that the
	// test runs in seconds rather than the production 20s-5m; the
	// expressions, labels and annotations are the shipped ones.
	rules, err := os.ReadFile(filepath.Join(moduleRoot(t), "alerts", "couponlink.rules.yml"))
	require.NoError(t, err)
	require.NotEmpty(t, forRE.FindAll(rules, -1), "no `for:` in the rules: the regexp is stale")
	rules = forRE.ReplaceAll(rules, []byte("${1}2s"))
	rulesFile := filepath.Join(t.TempDir(), "couponlink.rules.yml")
	require.NoError(t, os.WriteFile(rulesFile, rules, 0o644))
	st := startStack(t, stackOptions{rules: rulesFile, every: time.Second, cdcArgs: []string{"-redemption-grace", "2s"},
		recArgs: []string{"-every", "2s", "-quiet", "300ms", "-catch-up-wait", "3s"}})
	db, dsn, cdc, rec, prom := st.db, st.dsn, st.cdc, st.rec, st.prom
	bin := testenv.BuildCouponlink(t)

	// one template with coupons in the app bucket, counted by the cdc
	store, err := coupon.New(coupon.Config{DB: db, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	tpl, err := store.CreateTemplate(ctx, coupon.NewTemplate{Name: "e2e", TotalQuota: 100,
		Channels: map[string]int64{"app": 100}, ValidSeconds: 3600, PerUserLimit: 1000})
	require.NoError(t, err)
	for i := range 10 {
		_, err := store.Claim(ctx, coupon.ClaimRequest{TemplateID: tpl.ID, UserID: fmt.Sprint("u", i), Channel: "app",
			RequestID: fmt.Sprint("req-", i)})
		require.NoError(t, err)
	}
	held := func() int64 {
		var n int64
		_ = db.QueryRowContext(ctx, `SELECT held FROM inventory_counter WHERE template_id = ? AND channel = 'app'`, tpl.ID).Scan(&n)
		return n
	}
	waitFor(t, 30*time.Second, "the cdc counts the 10 claims", func() bool {
		require.True(t, cdc.running(), "couponlink cdc exited")
		return held() == 10
	})
	lastTask := func(statuses ...string) int64 {
		var id int64
		_ = db.QueryRowContext(ctx, `SELECT COALESCE(MAX(id), 0) FROM reconcile_task WHERE status IN ('`+
			strings.Join(statuses, "','")+`')`).Scan(&id)
		return id
	}
	// a clean pass that compared the counters (the first ones may run
	// before the cdc has a checkpoint: clean, but counters not compared)
	waitFor(t, 30*time.Second, "a clean reconcile pass that compared the counters", func() bool {
		require.True(t, rec.running(), "couponlink reconcile exited")
		var n int
		_ = db.QueryRowContext(ctx, `SELECT COUNT(*) FROM reconcile_task WHERE status = 'clean'
			AND summary NOT LIKE '%counters not compared%'`).Scan(&n)
		return n > 0
	})

	// before any fault: both targets up, none of the alerts under test active
	waitFor(t, 20*time.Second, "Prometheus scrapes both processes (up == 1) and CouponlinkCDCDown is inactive", func() bool {
		return len(prom.query(`up{job=~"couponlink-cdc|couponlink-reconcile"} == 1`)) == 2 &&
			len(prom.query(`couponlink_reconcile_needs_review == 0`)) == 1 &&
			len(prom.query(`couponlink_reconcile_last_success_timestamp_seconds`)) == 1 &&
			prom.state("CouponlinkCDCDown", nil) == ""
	})
	for _, name := range []string{"CouponlinkDriftCounters", "CouponlinkReconcileNeedsReview", "CouponlinkCDCDown"} {
		require.Empty(t, prom.state(name, nil), "%s is active before any fault", name)
	}

	// Drift: inventory_counter off by more than both thresholds (100 and
	// 5%): the reconciler must not fix it, it flags it for a person.
	_, err = db.ExecContext(ctx, `UPDATE inventory_counter SET held = held + 500 WHERE template_id = ? AND channel = 'app'`, tpl.ID)
	require.NoError(t, err)
	drift := map[string]string{"template": strconv.FormatInt(tpl.ID, 10), "channel": "app", "store": "counter", "severity": "warning"}
	waitFor(t, 30*time.Second, "CouponlinkDriftCounters and CouponlinkReconcileNeedsReview fire", func() bool {
		return prom.state("CouponlinkDriftCounters", drift) == "firing" &&
			prom.state("CouponlinkReconcileNeedsReview", nil) == "firing"
	})
	require.Empty(t, prom.state("CouponlinkCDCDown", nil), "CouponlinkCDCDown with the cdc running")

	// the cdc stops (SIGTERM, by PID): Prometheus cannot scrape it
	cdc.stop(t)
	waitFor(t, 30*time.Second, "CouponlinkCDCDown fires", func() bool {
		return prom.state("CouponlinkCDCDown", map[string]string{"job": "couponlink-cdc", "severity": "critical"}) == "firing"
	})

	// Recovery: the cdc runs again, a person sets the counter right and
	// resolves the open reconcile items.
	cdc = st.startCDC()
	waitFor(t, 30*time.Second, "CouponlinkCDCDown resolves", func() bool {
		require.True(t, cdc.running(), "couponlink cdc exited after its restart")
		return prom.state("CouponlinkCDCDown", nil) == ""
	})
	_, err = db.ExecContext(ctx, `UPDATE inventory_counter SET held = held - 500 WHERE template_id = ? AND channel = 'app'`, tpl.ID)
	require.NoError(t, err)
	require.Equal(t, int64(10), held())
	// a pass records its task before its snapshot: every task after this id
	// sees the fixed counter, so no pass flags this drift again once one of
	// them is clean (passes run one at a time)
	var before int64
	require.NoError(t, db.QueryRowContext(ctx, `SELECT COALESCE(MAX(id), 0) FROM reconcile_task`).Scan(&before))
	waitFor(t, 30*time.Second, "a clean reconcile pass after the fix", func() bool {
		require.True(t, rec.running(), "couponlink reconcile exited")
		return lastTask("clean") > before
	})
	open := testenv.Column[int64](t, db, `SELECT id FROM reconcile_task WHERE status = 'needs_review' AND resolved_at IS NULL`)
	require.NotEmpty(t, open, "the drift left no open reconcile item")
	for _, id := range open {
		cmd := exec.Command(bin, "reconcile", "-dsn", dsn, "-resolve", strconv.FormatInt(id, 10),
			"-note", "e2e test: counter set back to the truth")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "couponlink reconcile -resolve %d:\n%s", id, out)
	}
	waitFor(t, 30*time.Second, "CouponlinkDriftCounters and CouponlinkReconcileNeedsReview resolve", func() bool {
		return prom.state("CouponlinkDriftCounters", nil) == "" && prom.state("CouponlinkReconcileNeedsReview", nil) == ""
	})
	require.Empty(t, prom.state("CouponlinkCDCDown", nil))
	require.True(t, rec.running(), "couponlink reconcile exited")
}
