package main

import (
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/coupon/httpapi"
	"github.com/couponlink/couponlink/internal/settings"
	"github.com/couponlink/couponlink/webhook"
)

// metricPart is the metrics a process registers (under a condition: the
// cdc's webhook metrics only with -webhook-url), built as the command
// builds them on reg, with db a pool that is never connected.
type metricPart struct {
	title, intro string
	build        func(t *testing.T, db *sql.DB, reg prometheus.Registerer)
}

// customKinds are the types of the metrics a collector of the code's own
// makes only from data it does not have here (the sink's inventory
// collector: a series per template the binlog showed; the findings
// collector: the counts of the finding table), so that their type cannot
// be read off a collection.
var customKinds = map[string]string{"couponlink_inventory": "gauge", "couponlink_redemption_rate": "gauge", "couponlink_findings": "gauge"}

func metricParts() []metricPart {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	cdcAddr := metricsAddr(cdcFlags(io.Discard))
	return []metricPart{
		{"The cdc", fmt.Sprintf("`couponlink cdc`, on its `-metrics-addr` (default `%s`).", cdcAddr),
			func(t *testing.T, db *sql.DB, reg prometheus.Registerer) {
				_, o := cdcFlags(io.Discard)
				_, err := o.daemon(db, db, nil, nil, nil, reg, quiet)
				require.NoError(t, err)
			}},
		{"The cdc's event deliveries", "`couponlink cdc` with `-webhook-url` or `-event-sinks`: a series per sink (`webhook`, and each stream sink's name).",
			func(t *testing.T, _ *sql.DB, reg prometheus.Registerer) {
				_, err := sinkMetrics(reg, true)
				require.NoError(t, err)
			}},
		{"The cdc's webhook", "`couponlink cdc` with `-webhook-url`.",
			func(t *testing.T, db *sql.DB, reg prometheus.Registerer) {
				f, o := cdcFlags(io.Discard)
				require.NoError(t, f.Parse([]string{"-webhook-url", "http://127.0.0.1:1/hook", "-webhook-secret", "s"}))
				_, err := o.hooks.dispatcher(db, reg, nil, "", webhook.Format{}, nil, quiet)
				require.NoError(t, err)
			}},
		{"The reconciler", fmt.Sprintf("`couponlink reconcile`, the daemon on its `-metrics-addr` (default `%s`).", metricsAddr(reconcileFlags(io.Discard))),
			func(t *testing.T, db *sql.DB, reg prometheus.Registerer) {
				_, o := reconcileFlags(io.Discard)
				*o.redis.Addr = "" // the metrics are the same with Redis
				_, closeRedis, err := o.reconciler(db, nil, reg, quiet)
				require.NoError(t, err)
				closeRedis()
			}},
		{"The API", fmt.Sprintf("`couponlink api`, on its own address (`-addr`, default `%s`), or alone on `-metrics-addr` (`COUPONLINK_API_METRICS_ADDR`) when set; "+
			"what each process's `/metrics` and `/status` show, and who may reach them: [security](security.md#metrics-and-status).", apiAddr()),
			func(t *testing.T, db *sql.DB, reg prometheus.Registerer) {
				b := apiBuild{cfg: httpapi.Config{Logger: quiet, Registerer: reg}, store: coupon.Config{Logger: quiet, CombineClaims: true, CombineRedemptions: true}}
				_, err := b.server(db, reg)
				require.NoError(t, err)
			}},
	}
}

// metricsAddr is the default of a daemon's -metrics-addr.
func metricsAddr(f *settings.Flags, _ any) string { return f.Lookup("metrics-addr").DefValue }

func apiAddr() string {
	f, _ := apiFlags(io.Discard)
	return f.Lookup("addr").DefValue
}

// metricsReference is the metrics section of docs/monitoring.md: every
// metric each process registers, its type, labels and help.
func metricsReference(t *testing.T) string {
	db, err := sql.Open("mysql", "nobody@tcp(127.0.0.1:1)/none") // never connected: building registers the metrics
	require.NoError(t, err)
	defer db.Close()
	var b strings.Builder
	seen := map[string]bool{}
	for _, p := range metricParts() {
		rec := &recorder{Registry: prometheus.NewRegistry()}
		p.build(t, db, rec)
		fmt.Fprintf(&b, "\n### %s\n\n%s\n\n| metric | type | labels | meaning |\n|---|---|---|---|\n", p.title, p.intro)
		for _, m := range metricsOf(t, rec.collectors) {
			seen[m.name] = true
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", m.name, m.kind, m.labels, cell(m.help))
		}
	}
	for name := range customKinds {
		assert.True(t, seen[name], "customKinds names %s, which no process registers any more", name)
	}
	return strings.TrimPrefix(b.String(), "\n")
}

// recorder is a registry that keeps the collectors registered on it.
type recorder struct {
	*prometheus.Registry
	collectors []prometheus.Collector
}

func (r *recorder) Register(c prometheus.Collector) error {
	if err := r.Registry.Register(c); err != nil {
		return err
	}
	r.collectors = append(r.collectors, c)
	return nil
}

func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// metricDoc is one metric as the reference shows it.
type metricDoc struct {
	name, kind, labels, help string
}

// metricsOf are the metrics of collectors, by name.
func metricsOf(t *testing.T, collectors []prometheus.Collector) []metricDoc {
	var out []metricDoc
	for _, c := range collectors {
		kinds := kindsOf(t, c)
		descs := make(chan *prometheus.Desc)
		go func() { c.Describe(descs); close(descs) }()
		for d := range descs {
			m := parseDesc(t, d.String())
			m.kind = kinds[d]
			if k, ok := customKinds[m.name]; ok {
				assert.Empty(t, m.kind, "%s: its type is known, drop it from customKinds", m.name)
				m.kind = k
			}
			assert.NotEmpty(t, m.kind, "%s: its type cannot be read; name it in customKinds", m.name)
			out = append(out, m)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// kindsOf are the types of c's metrics: a vector's by its Go type, the
// others' by what c collects.
func kindsOf(t *testing.T, c prometheus.Collector) map[*prometheus.Desc]string {
	out := map[*prometheus.Desc]string{}
	all := func(kind string) map[*prometheus.Desc]string {
		descs := make(chan *prometheus.Desc)
		go func() { c.Describe(descs); close(descs) }()
		for d := range descs {
			out[d] = kind
		}
		return out
	}
	switch c.(type) {
	case *prometheus.CounterVec:
		return all("counter")
	case *prometheus.GaugeVec:
		return all("gauge")
	case *prometheus.HistogramVec:
		return all("histogram")
	case *prometheus.SummaryVec:
		return all("summary")
	}
	metrics := make(chan prometheus.Metric)
	go func() { c.Collect(metrics); close(metrics) }()
	for m := range metrics {
		var pb dto.Metric
		require.NoError(t, m.Write(&pb))
		out[m.Desc()] = kindOf(&pb)
	}
	return out
}

func kindOf(m *dto.Metric) string {
	switch {
	case m.Counter != nil:
		return "counter"
	case m.Gauge != nil:
		return "gauge"
	case m.Histogram != nil:
		return "histogram"
	case m.Summary != nil:
		return "summary"
	}
	return "untyped"
}

// parseDesc reads the name, help and labels of a Desc's String():
// Desc{fqName: "…", help: "…", unit: "…", constLabels: {…}, variableLabels: {…}}.
func parseDesc(t *testing.T, s string) metricDoc {
	var m metricDoc
	rest := s
	for _, field := range []struct {
		prefix string
		to     *string
	}{{"Desc{fqName: ", &m.name}, {", help: ", &m.help}} {
		var ok bool
		rest, ok = strings.CutPrefix(rest, field.prefix)
		require.True(t, ok, "a Desc of another form: %s", s)
		q, err := strconv.QuotedPrefix(rest)
		require.NoError(t, err, s)
		*field.to, _ = strconv.Unquote(q)
		rest = rest[len(q):]
	}
	_, consts, _ := strings.Cut(rest, "constLabels: {")
	consts, vars, ok := strings.Cut(consts, "}, variableLabels: {")
	require.True(t, ok, "a Desc of another form: %s", s)
	var labels []string
	for _, l := range strings.Split(strings.TrimSuffix(vars, "}}"), ",") {
		if l != "" {
			labels = append(labels, "`"+l+"`")
		}
	}
	if consts != "" {
		labels = append(labels, "`"+consts+"` (always)")
	}
	m.labels = strings.Join(labels, ", ")
	if m.labels == "" {
		m.labels = "—"
	}
	return m
}
