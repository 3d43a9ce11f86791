package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/client"
	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/inventory"
)

// dashboardTarget is one query of a panel of the Grafana dashboard.
type dashboardTarget struct {
	panel, title, refID, expr string
}

func (d dashboardTarget) String() string {
	return fmt.Sprintf("panel %s %q (%s): %s", d.panel, d.title, d.refID, d.expr)
}

// dashboardVar is one template variable of the dashboard: its name and its
// query (label_values(...)).
type dashboardVar struct{ name, query string }

// readDashboard returns every target of every panel (rows' panels too) and
// the query variables of deploy/grafana/couponlink.json.
func readDashboard(t *testing.T) ([]dashboardTarget, []dashboardVar) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(moduleRoot(t), "deploy", "grafana", "couponlink.json"))
	require.NoError(t, err)
	type panel struct {
		ID      json.Number `json:"id"`
		Title   string      `json:"title"`
		Targets []struct {
			RefID string `json:"refId"`
			Expr  string `json:"expr"`
		} `json:"targets"`
		Panels []json.RawMessage `json:"panels"`
	}
	var d struct {
		Panels     []json.RawMessage `json:"panels"`
		Templating struct {
			List []struct {
				Type  string          `json:"type"`
				Name  string          `json:"name"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	require.NoError(t, json.Unmarshal(raw, &d))
	var out []dashboardTarget
	var walk func([]json.RawMessage)
	walk = func(ps []json.RawMessage) {
		for _, r := range ps {
			var p panel
			require.NoError(t, json.Unmarshal(r, &p))
			for _, tg := range p.Targets {
				if tg.Expr != "" {
					out = append(out, dashboardTarget{panel: p.ID.String(), title: p.Title, refID: tg.RefID, expr: tg.Expr})
				}
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	var vars []dashboardVar
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue // the data source
		}
		// the query is a string, or an object holding it (the variable editor's form)
		var q string
		if json.Unmarshal(v.Query, &q) != nil {
			var obj struct {
				Query string `json:"query"`
			}
			require.NoError(t, json.Unmarshal(v.Query, &obj), "variable %s: query", v.Name)
			q = obj.Query
		}
		vars = append(vars, dashboardVar{name: v.Name, query: q})
	}
	require.NotEmpty(t, out, "no panel targets in the dashboard: the reader is stale")
	return out, vars
}

// substitute puts the variables' values and a fixed window for
// $__rate_interval and $__interval into expr.
func substitute(expr string, values map[string]string) string {
	pairs := []string{"$__rate_interval", "1m", "${__rate_interval}", "1m", "$__interval", "1m", "${__interval}", "1m"}
	names := make([]string, 0, len(values))
	for n := range values {
		names = append(names, n)
	}
	// longest first: $template before a shorter variable it starts with
	slices.SortFunc(names, func(a, b string) int { return len(b) - len(a) })
	for _, n := range names {
		pairs = append(pairs, "${"+n+"}", values[n], "[["+n+"]]", values[n], "$"+n, values[n])
	}
	return strings.NewReplacer(pairs...).Replace(expr)
}

// groupIntervalRE is a rule group's own evaluation interval, a line of its own.
var groupIntervalRE = regexp.MustCompile(`(?m)^\s+interval:\s*\S+\s*\n`)

var labelValuesRE = regexp.MustCompile(`^\s*label_values\(\s*(?:(.*?)\s*,\s*)?([A-Za-z_][A-Za-z0-9_]*)\s*\)\s*$`)

// labelValues evaluates a variable's label_values([selector,] label)
// against Prometheus.
func (c *promClient) labelValues(q string) []string {
	c.t.Helper()
	m := labelValuesRE.FindStringSubmatch(q)
	require.NotNil(c.t, m, "variable query %q: only label_values(...) is understood; teach the test the new kind", q)
	path := "/api/v1/label/" + m[2] + "/values"
	if m[1] != "" {
		path += "?match[]=" + url.QueryEscape(m[1])
	}
	var r struct {
		Status string   `json:"status"`
		Data   []string `json:"data"`
	}
	require.NoError(c.t, c.get(path, &r))
	require.Equal(c.t, "success", r.Status)
	return r.Data
}

// dashboardZeroOK are the targets (panel id/refId) that may answer only
// zeros: 0 is their honest value in the run, and the test runs no fault
// for them. Every other target must have a series with a value other than
// 0 (and not NaN): the workload moves it, or the fault it shows runs while
// it is read (Redis behind: the cdc's Redis cut off; the webhook's oldest
// pending event and the sinks' backlog: the webhook receiver failing).
var dashboardZeroOK = map[string]string{
	"12/A": "Counters not compared: 1 only while the cdc is behind a pass's snapshot; it keeps up here (stopping it would stall the panels of the cdc)",
	"18/A": "cdc lag: ~0 while the cdc is caught up (its heartbeat), as it is here",
}

// TestDashboardPanelsReturnSeries proves every panel of
// deploy/grafana/couponlink.json shows data: Prometheus scrapes the api,
// the cdc and the reconcile daemon every second while a workload runs
// through the api (claims, redemptions, refunds of both modes, voids, an
// expiry sweep, a steady trickle of claims and redemptions), the
// rebalancing rule moves quota (policy mode auto) and recommends moves
// (mode signal), the webhook delivers the events, a raw SQL update makes an
// illegal transition (anomaly), a counter off by 500 is left for a person
// (needs review, drift) and a wrong Redis stock key is corrected twice;
// last, the faults some panels are for: the cdc's Redis is cut off (Redis
// behind, write errors) and the webhook receiver fails (oldest pending,
// sink backlog). Then each target's expression, with the variables set to
// values their own queries return, must answer at least one series (not
// only zeros, but for dashboardZeroOK).
func TestDashboardPanelsReturnSeries(t *testing.T) {
	start := time.Now()
	ctx := context.Background()
	targets, vars := readDashboard(t)

	var hooks atomic.Int64
	var hooksFail atomic.Bool // the receiver's fault
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hooksFail.Load() {
			http.Error(w, "receiver down (the test's fault)", http.StatusServiceUnavailable)
			return
		}
		hooks.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(receiver.Close)
	// the cdc reaches Redis through a proxy the test cuts (the test's Redis
	// is shared: it stays up)
	redisProxy := testenv.NewTCPProxy(t, testenv.RedisAddr(t))

	// The shipped rules (some panels read their recording rules), but for
	// the groups' own evaluation intervals (the recording group's 1m): the
	// test's interval instead, so that the recorded series exist within
	// seconds; the expressions are the shipped ones.
	rules, err := os.ReadFile(filepath.Join(moduleRoot(t), "alerts", "couponlink.rules.yml"))
	require.NoError(t, err)
	rulesFile := filepath.Join(t.TempDir(), "couponlink.rules.yml")
	require.NoError(t, os.WriteFile(rulesFile, groupIntervalRE.ReplaceAll(rules, nil), 0o644))
	st := startStack(t, stackOptions{
		rules:    rulesFile,
		every:    time.Second,
		cdcArgs:  []string{"-rebalance-every", "1s", "-webhook-url", receiver.URL, "-webhook-secret", "e2e-dashboard-secret"},
		recArgs:  []string{"-every", "1s", "-quiet", "300ms", "-catch-up-wait", "3s"},
		cdcRedis: redisProxy.Addr(),
		api:      true,
	})
	db, rdb, prom := st.db, st.rdb, st.prom
	api := client.New(st.apiURL, client.WithRetries(3, 100*time.Millisecond, time.Second))
	waitFor(t, 20*time.Second, "the api answers", func() bool {
		require.True(t, st.api.running(), "couponlink api exited")
		_, err := api.Health(ctx)
		return err == nil
	})

	newTemplate := func(name string, channels map[string]int64, validSeconds int64) int64 {
		t.Helper()
		var total int64
		for _, q := range channels {
			total += q
		}
		limit := int64(1_000_000)
		tpl, err := api.CreateTemplate(ctx, client.NewTemplate{Name: name, TotalQuota: total, Channels: channels,
			ValidSeconds: validSeconds, PerUserLimit: &limit})
		require.NoError(t, err, "create template %s", name)
		return tpl.ID
	}
	claim := func(tpl int64, user, channel string) int64 {
		t.Helper()
		c, err := api.Claim(ctx, client.ClaimRequest{TemplateID: tpl, UserID: user, Channel: channel})
		require.NoError(t, err, "claim of %s on template %d/%s", user, tpl, channel)
		return c.UserCouponID
	}
	redeem := func(id int64) string {
		t.Helper()
		order := fmt.Sprint("order-", id)
		_, err := api.Redeem(ctx, client.RedeemRequest{UserCouponID: id, OrderID: order})
		require.NoError(t, err, "redeem coupon %d", id)
		return order
	}
	void := func(ids ...int64) {
		t.Helper()
		r, err := api.Void(ctx, client.VoidRequest{UserCouponIDs: ids, Reason: "e2e dashboard", Operator: "e2e"})
		require.NoError(t, err)
		for _, v := range r.Results {
			require.Equal(t, "voided", v.Result, "void of coupon %d", v.UserCouponID)
		}
	}

	// The template the dashboard's variables are set to: every state of
	// its one channel. Its coupons live 3 s (time for the redemptions
	// below on a busy machine), so that the sweep expires some within the
	// test.
	main := newTemplate("dash-main", map[string]int64{"app": 100}, 3)
	var ids []int64
	for i := range 10 {
		ids = append(ids, claim(main, fmt.Sprint("m", i), "app"))
	}
	orders := map[int64]string{}
	for _, id := range ids[:6] {
		orders[id] = redeem(id)
	}
	_, err = api.Refund(ctx, client.RefundRequest{UserCouponID: ids[0], OrderID: orders[ids[0]], Mode: client.RefundRestore})
	require.NoError(t, err)
	_, err = api.Refund(ctx, client.RefundRequest{UserCouponID: ids[1], OrderID: orders[ids[1]], Mode: client.RefundRecycle})
	require.NoError(t, err)
	void(ids[6], ids[7])
	// now AVAILABLE: ids[0] (restored), ids[8], ids[9]; USED: ids[2:6]; RETURNED: ids[1], ids[6], ids[7]

	// A steady trickle of claims and redemptions on a template of its own
	// keeps the rates of the api, the cdc and the webhook moving.
	trickleTpl := newTemplate("dash-trickle", map[string]int64{"app": 100_000}, 3600)
	trickleCtx, stopTrickle := context.WithCancel(ctx)
	var trickle sync.WaitGroup
	var trickleErrs atomic.Int64
	trickle.Add(1)
	go func() {
		defer trickle.Done()
		for i := 0; trickleCtx.Err() == nil; i++ {
			c, err := api.Claim(trickleCtx, client.ClaimRequest{TemplateID: trickleTpl, UserID: fmt.Sprint("t", i), Channel: "app"})
			if err == nil && i%2 == 0 {
				_, err = api.Redeem(trickleCtx, client.RedeemRequest{UserCouponID: c.UserCouponID, OrderID: fmt.Sprint("trickle-", i)})
			}
			if err != nil && trickleCtx.Err() == nil {
				trickleErrs.Add(1)
			}
			select {
			case <-trickleCtx.Done():
			case <-time.After(200 * time.Millisecond): // the trickle's pace, not a wait for a condition
			}
		}
	}()
	t.Cleanup(func() { stopTrickle(); trickle.Wait() })

	// Rebalancing: channel a redeems nothing after 4 claims, b redeemed all
	// 4 of its quota (sold out). With low thresholds and no cooldown the
	// rule moves quota from a to b every pass (mode auto) on one template
	// and recommends it every pass (mode signal) on the other.
	policy := func(mode string) client.PolicyChange {
		low, high, share, reserve := 0.3, 0.6, 0.5, 0.05
		minClaims, zero := int64(2), int64(0)
		return client.PolicyChange{Override: client.Override{Mode: &mode, Low: &low, High: &high, MinClaims: &minClaims,
			MaxShare: &share, Reserve: &reserve, CooldownSeconds: &zero, MinAgeSeconds: &zero},
			ChangedBy: "e2e", Reason: "dashboard test: low thresholds, no cooldown"}
	}
	for _, mode := range []string{"auto", "signal"} {
		tpl := newTemplate("dash-quota-"+mode, map[string]int64{"a": 100, "b": 4}, 3600)
		for i := range 4 {
			claim(tpl, fmt.Sprint(mode, "-a", i), "a")
			redeem(claim(tpl, fmt.Sprint(mode, "-b", i), "b"))
		}
		_, err := api.SetQuotaPolicy(ctx, tpl, policy(mode))
		require.NoError(t, err, "policy %s", mode)
	}

	// the anomaly's coupon: voided (RETURNED), later set EXPIRED by raw SQL
	anomalyTpl := newTemplate("dash-anomaly", map[string]int64{"app": 10}, 3600)
	anomalyCoupon := claim(anomalyTpl, "a0", "app")
	void(anomalyCoupon)
	// the Redis key the reconciler corrects
	fixTpl := newTemplate("dash-fix", map[string]int64{"app": 10}, 3600)
	claim(fixTpl, "f0", "app")

	// the expiry sweep, once the 3 s of dash-main's coupons are over
	expired := 0
	waitFor(t, 20*time.Second, "the expiry sweep expires dash-main's 3 available coupons", func() bool {
		r, err := api.Expire(ctx, 0)
		require.NoError(t, err)
		expired += r.Expired
		return expired >= 3
	})
	// held again: claimed after the sweep (no sweep runs after it)
	for i := range 4 {
		claim(main, fmt.Sprint("m-late", i), "app")
	}

	// Needs review, and the drift of dash-main/app: its counter off by 500
	// (above both thresholds), once the cdc has counted its coupons (no
	// more of dash-main's rows change after this).
	counters := func(tpl int64) (held, used, expired, returned int64) {
		_ = db.QueryRowContext(ctx, `SELECT held, used, expired, returned FROM inventory_counter WHERE template_id = ? AND channel = 'app'`,
			tpl).Scan(&held, &used, &expired, &returned)
		return
	}
	waitFor(t, 20*time.Second, "the cdc counts dash-main (held 4, used 4, expired 3, returned 3)", func() bool {
		require.True(t, st.cdc.running(), "couponlink cdc exited")
		h, u, e, r := counters(main)
		return h == 4 && u == 4 && e == 3 && r == 3
	})
	_, err = db.ExecContext(ctx, `UPDATE inventory_counter SET held = held + 500 WHERE template_id = ? AND channel = 'app'`, main)
	require.NoError(t, err)

	// The anomaly: RETURNED -> EXPIRED, written by raw SQL. The series of
	// the kind exists (0) from the cdc's start; Prometheus must have seen
	// it before, so that increase() sees the step.
	waitFor(t, 10*time.Second, "Prometheus has the anomaly counter at 0", func() bool {
		return len(prom.query(`couponlink_anomalies_total{kind="illegal_transition"} == 0`)) == 1
	})
	_, err = db.ExecContext(ctx, `UPDATE user_coupon SET status = 3 WHERE id = ?`, anomalyCoupon)
	require.NoError(t, err)

	// Corrections: dash-fix's Redis stock key wrong, corrected by the
	// reconciler; wrong again once Prometheus has the first correction, so
	// that increase() over the panel's window sees a step (a series that
	// appears at 1 and stays has no increase).
	key := inventory.Keys{Prefix: st.prefix}.Stock(fixTpl, "app")
	waitFor(t, 20*time.Second, "the cdc writes dash-fix's stock key (9)", func() bool {
		v, err := rdb.Get(ctx, key).Result()
		return err == nil && v == "9"
	})
	require.NoError(t, rdb.Set(ctx, key, "999", 0).Err())
	waitFor(t, 30*time.Second, "Prometheus has the reconciler's first Redis correction", func() bool {
		require.True(t, st.rec.running(), "couponlink reconcile exited")
		return len(prom.query(`couponlink_reconcile_corrected_total{store="redis"} >= 1`)) > 0
	})
	require.NoError(t, rdb.Set(ctx, key, "998", 0).Err())

	// The faults, on until the end: the cdc's Redis cut off (its batches
	// of the trickle fail their Redis writes: behind, errors) and the
	// webhook receiver failing (the events wait: oldest pending, backlog).
	waitFor(t, 20*time.Second, "the webhook receiver takes events before its fault", func() bool { return hooks.Load() > 0 })
	redisProxy.Refuse()
	hooksFail.Store(true)

	// The variables: each query evaluated against Prometheus (in order: a
	// later one may name an earlier one); the value taken is dash-main and
	// its channel, which must be among those returned.
	want := map[string]string{"template": strconv.FormatInt(main, 10), "channel": "app"}
	values := map[string]string{}
	waitFor(t, 20*time.Second, "every dashboard variable has its value among those its query returns", func() bool {
		for _, v := range vars {
			got := prom.labelValues(substitute(v.query, values))
			w, ok := want[v.name]
			if !ok && len(got) > 0 {
				w = got[0] // a variable the test does not know: any value it returns
			}
			if !slices.Contains(got, w) {
				return false
			}
			values[v.name] = w
		}
		return true
	})
	t.Logf("dashboard variables: %v", values)

	// Every target, until each answers (nothing with a $ left).
	type result struct {
		target dashboardTarget
		query  string
		n      int
		vals   []float64
	}
	results := make([]result, len(targets))
	named := map[string]bool{}
	for _, tg := range targets {
		named[tg.panel+"/"+tg.refID] = true
	}
	for k := range dashboardZeroOK {
		require.True(t, named[k], "dashboardZeroOK names %s, not a target of the dashboard: drop it", k)
	}
	for i, tg := range targets {
		q := substitute(tg.expr, values)
		require.NotContains(t, q, "$", "%s: a variable the test does not set", tg)
		results[i] = result{target: tg, query: q}
	}
	ok := func(r result) bool {
		if r.n == 0 {
			return false
		}
		if _, zeroOK := dashboardZeroOK[r.target.panel+"/"+r.target.refID]; zeroOK {
			return true
		}
		for _, v := range r.vals {
			if v != 0 && !math.IsNaN(v) {
				return true
			}
		}
		return false
	}
	deadline := time.Now().Add(40 * time.Second)
	for {
		missing := 0
		for i := range results {
			if !ok(results[i]) {
				results[i].vals = prom.query(results[i].query)
				results[i].n = len(results[i].vals)
				if !ok(results[i]) {
					missing++
				}
			}
		}
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			var lines []string
			for _, r := range results {
				if !ok(r) {
					what := "no series"
					if r.n > 0 {
						what = fmt.Sprintf("only zeros/NaN %v", r.vals)
					}
					lines = append(lines, fmt.Sprintf("  %s\n    query: %s\n    %s", r.target, r.query, what))
				}
			}
			t.Fatalf("%d of %d dashboard targets answer nothing (or only zeros where the workload moves them) after 40 s:\n%s",
				missing, len(results), strings.Join(lines, "\n"))
		}
		time.Sleep(500 * time.Millisecond) // polling the condition above
	}
	for _, r := range results {
		t.Logf("%s: %d series %v", r.target, r.n, r.vals)
	}
	require.Zero(t, trickleErrs.Load(), "the trickle's claims or redemptions failed")
	t.Logf("every panel of the dashboard answers (%d targets) after %s", len(results), time.Since(start).Round(100*time.Millisecond))
}
