package sink_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/sink"
)

// The cdc's main series as exposed, HELP and TYPE included, on the
// registry it was given (never the default one): the row changes applied,
// the inventory of the most recently active templates only
// (MaxLabelTemplates 1: the template claimed last), their redemption rate,
// the over-issued buckets, the anomalies (each kind at 0), the leader.
func TestMetricsExposition(t *testing.T) {
	e := newEnv(t)
	older := e.Template(map[string]int64{"app": 10}, time.Hour)
	tpl := e.Template(map[string]int64{"app": 10, "web": 5}, time.Hour)
	c := e.StartCDC(nil, func(cfg *sink.Config, _ *sink.Daemon) { cfg.MaxLabelTemplates = 1 })
	e.WaitCheckpoint()
	claim := func(tpl int64, user, channel string) int64 {
		cl, err := e.Store.Claim(e.Ctx, coupon.ClaimRequest{TemplateID: tpl, UserID: user, Channel: channel, RequestID: user})
		require.NoError(t, err)
		return cl.UserCouponID
	}
	claim(older, "u0", "app")
	e.WaitCheckpoint() // the older template is applied in a batch of its own, before
	used := claim(tpl, "u1", "app")
	claim(tpl, "u2", "app")
	claim(tpl, "u3", "web")
	_, err := e.Store.Redeem(e.Ctx, coupon.RedeemRequest{UserCouponID: used, OrderID: "o1"})
	require.NoError(t, err)
	e.waitSettled(c, 30*time.Second)

	inventory := func(channel string, states ...any) string {
		var b strings.Builder
		for i := 0; i < len(states); i += 2 {
			fmt.Fprintf(&b, "couponlink_inventory{channel=%q,state=%q,template=\"%d\"} %d\n", channel, states[i], tpl, states[i+1])
		}
		return b.String()
	}
	want := `
# HELP couponlink_cdc_events_total Row changes of the source tables applied, by table and kind (insert, update, delete).
# TYPE couponlink_cdc_events_total counter
couponlink_cdc_events_total{kind="insert",table="user_coupon"} 4
couponlink_cdc_events_total{kind="update",table="user_coupon"} 1
couponlink_cdc_events_total{kind="insert",table="redemption_log"} 1
couponlink_cdc_events_total{kind="update",table="channel_quota"} 4
# HELP couponlink_inventory Derived inventory per template and channel at the checkpoint, by state (quota, claimable, held, used, expired, returned, released, frozen); only the most recently active templates (200 by default).
# TYPE couponlink_inventory gauge
` + inventory("app", "quota", 10, "claimable", 8, "held", 1, "used", 1, "expired", 0, "returned", 0, "released", 0, "frozen", 0) +
		inventory("web", "quota", 5, "claimable", 4, "held", 1, "used", 0, "expired", 0, "returned", 0, "released", 0, "frozen", 0) + `
# HELP couponlink_redemption_rate Redemption rate per template and channel at the checkpoint: used / (claimed - released); only the most recently active templates (200 by default).
# TYPE couponlink_redemption_rate gauge
couponlink_redemption_rate{channel="app",template="` + fmt.Sprint(tpl) + `"} 0.5
couponlink_redemption_rate{channel="web",template="` + fmt.Sprint(tpl) + `"} 0
# HELP couponlink_over_issued How many channel buckets hold more coupons (held+used+frozen) than their quota at the checkpoint, over every template (a legacy template without channel buckets counts as one bucket, against its budget); also the over-issues a bootstrap found.
# TYPE couponlink_over_issued gauge
couponlink_over_issued 0
# HELP couponlink_anomalies_total Anomalies seen in the binlog, by kind.
# TYPE couponlink_anomalies_total counter
couponlink_anomalies_total{kind="claimed_off_shelf"} 0
couponlink_anomalies_total{kind="deleted_coupon"} 0
couponlink_anomalies_total{kind="double_spend"} 0
couponlink_anomalies_total{kind="duplicate_redemption"} 0
couponlink_anomalies_total{kind="illegal_transition"} 0
couponlink_anomalies_total{kind="over_issue"} 0
couponlink_anomalies_total{kind="per_user_limit_exceeded"} 0
couponlink_anomalies_total{kind="undecodable_row"} 0
couponlink_anomalies_total{kind="used_after_expiry"} 0
couponlink_anomalies_total{kind="used_without_redemption"} 0
# HELP couponlink_cdc_leader 1 while this cdc holds the leader lock and applies the binlog.
# TYPE couponlink_cdc_leader gauge
couponlink_cdc_leader 1
`
	require.NoError(t, testutil.GatherAndCompare(c.Reg, strings.NewReader(want), "couponlink_cdc_events_total",
		"couponlink_inventory", "couponlink_redemption_rate", "couponlink_over_issued", "couponlink_anomalies_total", "couponlink_cdc_leader"))
	cdctest.NoDefaultMetrics(t)
}
