package alerts_test

import (
	"database/sql"
	"encoding/json"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	_ "github.com/go-sql-driver/mysql"
	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"

	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/coupon/httpapi"
	"github.com/couponlink/couponlink/reconcile"
	"github.com/couponlink/couponlink/sink"
	"github.com/couponlink/couponlink/webhook"
)

const (
	rulesFile     = "couponlink.rules.yml"
	rulesTestFile = "couponlink.rules.test.yml"
	// findingsTestFile tests the alerts with the findings' lifecycle
	findingsTestFile = "findings.rules.test.yml"
	dashboardFile    = "../deploy/grafana/couponlink.json"
)

// recorder is a Registerer that remembers every collector registered
// through it, so the names of vectors without any child (which Gather
// does not show) are found too, by Describe.
type recorder struct {
	prometheus.Registerer
	collectors []prometheus.Collector
}

func (r *recorder) Register(c prometheus.Collector) error {
	r.collectors = append(r.collectors, c)
	return r.Registerer.Register(c)
}

func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

var fqNameRe = regexp.MustCompile(`fqName: "([^"]+)"`)

// registered builds the metrics the cdc, the reconciler and the API
// register, as their processes do, and returns each name with whether it
// is a histogram or summary (which expose _bucket, _sum and _count).
func registered(t *testing.T) map[string]bool {
	t.Helper()
	// sql.Open does not connect, and none of the constructors does either.
	db, err := sql.Open("mysql", "root@tcp(127.0.0.1:1)/x")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })

	rec := &recorder{Registerer: prometheus.NewRegistry()}
	if _, err := sink.New(sink.Config{DB: db, Registerer: rec}); err != nil {
		t.Fatalf("sink.New: %v", err)
	}
	if _, err := reconcile.New(reconcile.Config{DB: db, Registerer: rec}); err != nil {
		t.Fatalf("reconcile.New: %v", err)
	}
	store, err := coupon.New(coupon.Config{DB: db})
	if err != nil {
		t.Fatalf("coupon.New: %v", err)
	}
	httpapi.New(httpapi.Config{Store: store, Registerer: rec})
	if _, err := webhook.New(webhook.Config{DB: db, URL: "http://127.0.0.1:1/hook", Secret: []byte("s"), Registerer: rec}); err != nil {
		t.Fatalf("webhook.New: %v", err)
	}
	if _, err := webhook.NewSinkMetrics(rec); err != nil {
		t.Fatalf("webhook.NewSinkMetrics: %v", err)
	}

	names := map[string]bool{}
	for _, c := range rec.collectors {
		hist := false
		switch c.(type) {
		case prometheus.Histogram, *prometheus.HistogramVec, prometheus.Summary, *prometheus.SummaryVec:
			hist = true
		}
		ch := make(chan *prometheus.Desc, 16)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			m := fqNameRe.FindStringSubmatch(d.String())
			if m == nil {
				t.Fatalf("no fqName in %s", d)
			}
			names[m[1]] = hist
		}
	}
	if len(names) < 20 {
		t.Fatalf("only %d metric names registered: %v", len(names), names)
	}
	return names
}

var (
	// quoted strings: label values and regexps, never metric names
	stringRe = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`")
	// identifiers as PromQL reads them: metric names may contain ':'
	identRe = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*`)
)

// metricNames returns the names in expr that are couponlink metrics or
// recording rules: identifiers starting with couponlink_ or containing ':'
// (the level:metric:operation form), plus up. Grafana variables ($x,
// ${x}, $__rate_interval) and quoted strings are removed first.
func metricNames(expr string) []string {
	expr = stringRe.ReplaceAllString(expr, `""`)
	expr = regexp.MustCompile(`\$\{[^}]*\}|\$[A-Za-z_][A-Za-z0-9_]*`).ReplaceAllString(expr, " ")
	var out []string
	for _, loc := range identRe.FindAllStringIndex(expr, -1) {
		// part of a number or duration (10m, 1e3): not an identifier
		if loc[0] > 0 && strings.ContainsAny(expr[loc[0]-1:loc[0]], "0123456789.") {
			continue
		}
		id := expr[loc[0]:loc[1]]
		if strings.HasPrefix(id, "couponlink_") || strings.Contains(id, ":") || id == "up" {
			out = append(out, id)
		}
	}
	return out
}

// checkName says why name is not one the code registers (or a recording
// rule of the rule file), or "" when it is.
func checkName(name string, code map[string]bool, recorded map[string]bool) string {
	if name == "up" || recorded[name] {
		return ""
	}
	if _, ok := code[name]; ok {
		return ""
	}
	for _, suf := range []string{"_bucket", "_sum", "_count"} {
		base, found := strings.CutSuffix(name, suf)
		if !found {
			continue
		}
		if hist, ok := code[base]; ok {
			if hist {
				return ""
			}
			return name + ": " + base + " is not a histogram"
		}
	}
	if strings.Contains(name, ":") {
		return name + ": no recording rule of that name"
	}
	return name + ": not registered by sink, reconcile, httpapi or webhook"
}

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Record string `yaml:"record"`
			Alert  string `yaml:"alert"`
			Expr   string `yaml:"expr"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// rulesExprs returns every PromQL expression of the rule file, by where it is,
// and the names the file records.
func rulesExprs(t *testing.T) (map[string]string, map[string]bool) {
	t.Helper()
	b, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var f ruleFile
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatalf("parse %s: %v", rulesFile, err)
	}
	exprs, recorded := map[string]string{}, map[string]bool{}
	for _, g := range f.Groups {
		for i, r := range g.Rules {
			where := g.Name + "/" + r.Alert + r.Record
			if r.Record != "" {
				recorded[r.Record] = true
			}
			if r.Expr == "" {
				t.Errorf("%s rule %d: no expr", g.Name, i)
			}
			exprs[where+"#"+strconv.Itoa(i)] = r.Expr
		}
	}
	if len(exprs) == 0 || len(recorded) == 0 {
		t.Fatalf("%s: %d rules, %d recording rules", rulesFile, len(exprs), len(recorded))
	}
	return exprs, recorded
}

// dashboardExprs returns every "expr" of the dashboard's panels and the
// queries of its template variables.
func dashboardExprs(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d any
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("parse %s: %v", dashboardFile, err)
	}
	out := map[string]string{}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if v["type"] == "datasource" { // a data source variable: its query is a plugin type
				return
			}
			for k, x := range v {
				if s, ok := x.(string); ok && (k == "expr" || (k == "query" && strings.Contains(path, "templating"))) {
					out[path+"."+k] = s
					continue
				}
				walk(path+"."+k, x)
			}
		case []any:
			for i, x := range v {
				walk(path+"["+strconv.Itoa(i)+"]", x)
			}
		}
	}
	walk("", d)
	if len(out) < 15 {
		t.Fatalf("%s: only %d expressions found", dashboardFile, len(out))
	}
	return out
}

// testSeries returns the metric names of the promtool tests' input series.
func testSeries(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, file := range []string{rulesTestFile, findingsTestFile} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var f struct {
			Tests []struct {
				InputSeries []struct {
					Series string `yaml:"series"`
				} `yaml:"input_series"`
			} `yaml:"tests"`
		}
		if err := yaml.Unmarshal(b, &f); err != nil {
			t.Fatalf("parse %s: %v", file, err)
		}
		for _, tc := range f.Tests {
			for _, s := range tc.InputSeries {
				name, _, _ := strings.Cut(s.Series, "{")
				out[file+" input "+s.Series] = name
			}
		}
	}
	return out
}

func TestMetricNames(t *testing.T) {
	code := registered(t)
	rules, recorded := rulesExprs(t)
	for r := range recorded {
		if _, clash := code[r]; clash {
			t.Errorf("recording rule %s has the name of a code metric", r)
		}
	}

	exprs := map[string]string{}
	for k, v := range rules {
		exprs[rulesFile+" "+k] = v
	}
	for k, v := range dashboardExprs(t) {
		exprs[dashboardFile+" "+k] = v
	}
	used := map[string]bool{}
	for where, expr := range exprs {
		names := metricNames(expr)
		if len(names) == 0 {
			t.Errorf("%s: no metric name found in %q", where, expr)
		}
		for _, n := range names {
			used[n] = true
			if why := checkName(n, code, recorded); why != "" {
				t.Errorf("%s: %s\n\texpr: %s", where, why, expr)
			}
		}
	}
	for where, n := range testSeries(t) {
		if why := checkName(n, code, recorded); why != "" {
			t.Errorf("%s: %s", where, why)
		}
	}

	var list []string
	for n := range used {
		list = append(list, n)
	}
	sort.Strings(list)
	t.Logf("%d metric names checked: %s", len(list), strings.Join(list, " "))

	t.Run("unknown names fail", func(t *testing.T) {
		for _, expr := range []string{
			`rate(couponlink_cdc_events_appled_total[5m])`,                          // typo
			`couponlink_reconcile_drift_total{store="redis"} > 0`,                   // wrong suffix
			`histogram_quantile(0.99, rate(couponlink_cdc_lag_seconds_bucket[5m]))`, // not a histogram
			`sum by (channel) (channel:couponlink_claimable:sum)`,                   // no such recording rule
		} {
			bad := 0
			for _, n := range metricNames(expr) {
				if checkName(n, code, recorded) != "" {
					bad++
				}
			}
			if bad != 1 {
				t.Errorf("%q: %d names refused, want 1", expr, bad)
			}
		}
	})
	t.Run("known names pass", func(t *testing.T) {
		expr := `histogram_quantile(0.99, sum by (le, route) (rate(couponlink_api_request_duration_seconds_bucket{code=~"5..",route="$route"}[$__rate_interval])))
			/ on() group_left up{job="couponlink_cdc_events_total_in_a_string"} + channel:couponlink_redemption_rate:ratio offset 1h`
		names := metricNames(expr)
		want := []string{"couponlink_api_request_duration_seconds_bucket", "up", "channel:couponlink_redemption_rate:ratio"}
		if strings.Join(names, " ") != strings.Join(want, " ") {
			t.Fatalf("metricNames = %v, want %v", names, want)
		}
		for _, n := range names {
			if why := checkName(n, code, recorded); why != "" {
				t.Errorf("%s refused: %s", n, why)
			}
		}
	})
}
