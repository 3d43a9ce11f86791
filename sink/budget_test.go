package sink_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/internal/cdcenv"
	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/inventory"
)

// issue inserts n AVAILABLE coupons of a legacy template.
func (l *legacyEnv) issue(tpl int64, n int) {
	l.T.Helper()
	vals := make([]string, n)
	for i := range vals {
		vals[i] = fmt.Sprintf("(%d, 'app', 0, 'u%d')", tpl, i)
	}
	l.exec(`INSERT INTO ` + l.tq("t_user_coupon") + ` (tpl_id, source, state, uid) VALUES ` + strings.Join(vals, ", "))
}

// setBudget sets a legacy template's budget (nil: NULL).
func (l *legacyEnv) setBudget(tpl int64, budget any) {
	l.T.Helper()
	l.exec(`UPDATE `+l.tq("t_coupon_tpl")+` SET budget = ? WHERE id = ?`, budget, tpl)
}

// assertOverIssue waits for the cdc to apply every write, then checks the
// over_issue anomalies recorded and the couponlink_over_issued gauge.
func (l *legacyEnv) assertOverIssue(c *cdcenv.CDC, anomalies, gauge int, msg string) {
	l.T.Helper()
	l.WaitCheckpoint()
	want := map[string]int{}
	if anomalies > 0 {
		want[inventory.AnomalyOverIssue] = anomalies
	}
	require.Equal(l.T, want, l.anomalies(), msg)
	over, _ := cdctest.Metric(l.T, c.Reg, "couponlink_over_issued", nil)
	require.EqualValues(l.T, gauge, over, msg)
}

// startBudget starts the cdc on a legacy template 1 with a budget and
// coupons taken from it (and a template 2 with room to spare).
func (l *legacyEnv) startBudget(budget, taken int) *cdcenv.CDC {
	l.T.Helper()
	l.exec(`INSERT INTO `+l.tq("t_coupon_tpl")+` (id, budget) VALUES (1, ?), (2, 100)`, budget)
	l.issue(1, taken)
	c := l.StartCDC(l.mapping())
	l.assertOverIssue(c, 0, 0, "within budget at start")
	return c
}

// A top-up in the shop's admin is in force from its binlog point: no false
// over-issue, before or after a restart of the cdc.
func TestLegacyBudgetTopUp(t *testing.T) {
	l := newLegacyEnv(t)
	c := l.startBudget(10, 10)
	l.setBudget(1, 20)
	l.issue(1, 1)
	l.assertOverIssue(c, 0, 0, "11 coupons within the topped-up budget of 20")
	c.Stop(t)
	c = l.StartCDC(l.mapping()) // the budget read at start is the one the binlog gave
	l.issue(1, 9)
	l.assertOverIssue(c, 0, 0, "20 coupons, budget 20, after a restart")
	l.issue(1, 1)
	l.assertOverIssue(c, 1, 1, "21 coupons over the budget of 20")
}

// A cut below what is taken is flagged once, where it crosses; a further
// coupon or cut while over is nothing new; a top-up clears the gauge.
func TestLegacyBudgetCut(t *testing.T) {
	l := newLegacyEnv(t)
	c := l.startBudget(20, 11)
	l.setBudget(1, 5)
	l.assertOverIssue(c, 1, 1, "a cut to 5 below the 11 taken: one crossing")
	var detail string
	require.NoError(t, l.DB.QueryRow(`SELECT detail FROM cdc_anomaly WHERE template_id = 1`).Scan(&detail))
	require.Contains(t, detail, "over its quota of 5")
	l.issue(1, 1)
	l.setBudget(1, 6)
	l.assertOverIssue(c, 1, 1, "still over: nothing new")
	l.setBudget(1, 20)
	l.assertOverIssue(c, 1, 0, "topped up again")
}

// A cut made while the cdc is stopped is judged on replay against the
// budget before it (the binlog's before image), not against the budget
// the restart reads fresh.
func TestLegacyBudgetCutWhileStopped(t *testing.T) {
	l := newLegacyEnv(t)
	c := l.startBudget(20, 20)
	c.Stop(t)
	l.setBudget(1, 15)
	l.issue(1, 1)
	l.issue(2, 1) // another template, judged against its own budget
	c = l.StartCDC(l.mapping())
	l.assertOverIssue(c, 1, 1, "the cut made while stopped is one crossing on replay")
}

// A NULL budget means the template has none: the cdc neither stalls nor
// judges over-issue for it, at start or when first met in the binlog;
// once the shop sets a budget, it is judged from that point. A deleted
// template row leaves its template with no known budget.
func TestLegacyBudgetNull(t *testing.T) {
	l := newLegacyEnv(t)
	l.exec(`ALTER TABLE ` + l.tq("t_coupon_tpl") + ` MODIFY budget BIGINT NULL`)
	l.exec(`INSERT INTO ` + l.tq("t_coupon_tpl") + ` (id, budget) VALUES (1, NULL)`)
	l.issue(1, 3)
	c := l.StartCDC(l.mapping())
	l.assertOverIssue(c, 0, 0, "NULL budget at start: nothing to judge, no stall")
	l.issue(1, 2)
	l.exec(`INSERT INTO ` + l.tq("t_coupon_tpl") + ` (id, budget) VALUES (2, NULL)`)
	l.issue(2, 4)
	l.assertOverIssue(c, 0, 0, "NULL budgets in the binlog")
	require.True(t, c.Running())

	l.setBudget(1, 4)
	l.assertOverIssue(c, 1, 1, "a budget of 4 set under 5 taken")
	l.setBudget(2, 10)
	l.issue(2, 7)
	l.assertOverIssue(c, 2, 2, "template 2's budget set, then 11 taken")

	l.setBudget(1, nil)
	l.exec(`DELETE FROM ` + l.tq("t_coupon_tpl") + ` WHERE id = 2`)
	l.issue(1, 1)
	l.issue(2, 1)
	l.assertOverIssue(c, 2, 0, "no known budget again: neither is judged")
	c.Stop(t)
	c = l.StartCDC(l.mapping())
	l.assertOverIssue(c, 2, 0, "the same after a restart")
	require.Equal(t, l.legacyTruth(), l.Counters())
}
