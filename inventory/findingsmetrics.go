package inventory

import (
	"context"
	"database/sql"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/couponlink/couponlink/api"
	"github.com/couponlink/couponlink/internal/sqltx"
)

// findingStates are the states couponlink_findings has a series of, for
// every kind.
var findingStates = []string{api.FindingOpen, api.FindingAcknowledged, api.FindingClosed}

var findingsDesc = prometheus.NewDesc("couponlink_findings",
	"Findings by kind and state (open, acknowledged, closed), read from the finding table at each scrape: the cdc's anomalies on the cdc, the differences left for a person on the reconciler. The alerts count the open ones only.",
	[]string{"kind", "state"}, nil)

// findingsCollector is couponlink_findings of one source of findings.
type findingsCollector struct {
	db     *sql.DB
	source string
	kinds  []string // the kinds that have a series even without a row
}

// RegisterFindingsMetrics registers couponlink_findings of source's
// findings on db: a series per kind (each of kinds, and each kind with a
// row) and state, 0 when it has none.
func RegisterFindingsMetrics(reg prometheus.Registerer, db *sql.DB, source string, kinds []string) error {
	return reg.Register(&findingsCollector{db: db, source: source, kinds: kinds})
}

func (c *findingsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- findingsDesc }

// Collect reads the counts; when the table cannot be read it says nothing
// (an alert that wants no open finding then stays as its own metric says).
func (c *findingsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	counts := map[string]map[string]float64{}
	for _, k := range c.kinds {
		counts[k] = map[string]float64{}
	}
	err := sqltx.EachRow(ctx, c.db, `SELECT kind, state, COUNT(*) FROM finding WHERE source = ? GROUP BY kind, state`, []any{c.source},
		func(rows *sql.Rows) error {
			var kind, state string
			var n float64
			if err := rows.Scan(&kind, &state, &n); err != nil {
				return err
			}
			if counts[kind] == nil {
				counts[kind] = map[string]float64{}
			}
			counts[kind][state] = n
			return nil
		})
	if err != nil {
		return
	}
	for kind, by := range counts {
		for _, st := range findingStates {
			ch <- prometheus.MustNewConstMetric(findingsDesc, prometheus.GaugeValue, by[st], kind, st)
		}
	}
}
