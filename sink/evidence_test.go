package sink_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/inventory"
	"github.com/couponlink/couponlink/sink"
)

// evidenceMapping maps the legacy test schema (legacyEnv) with the given
// redemption evidence and no write-off table: for order_table, the shop's
// order table t_order names the template of the coupon an order used and
// the member, not the coupon.
func evidenceMapping(evidence string) string {
	y := `
user_coupon: {table: LEGACY.t_user_coupon, id: id, template: tpl_id, channel: source, status: state, order: order_no, user: uid}
status: {AVAILABLE: [0], USED: [1], EXPIRED: [2], RETURNED: [3, 9]}
template: {table: LEGACY.t_coupon_tpl, id: id, total_quota: budget}
default_channel: legacy
redemption_evidence: ` + evidence + "\n"
	if evidence == "order_table" {
		y += "orders: {table: LEGACY.t_order, id: id, template: tpl_id, user: uid, order: order_sn}\n"
	}
	return y
}

// newEvidenceEnv is the legacy test schema mapped with evidence, with an
// order table (an order without a coupon has tpl_id NULL) and two
// templates with large budgets.
func newEvidenceEnv(t *testing.T, evidence string) *legacyEnv {
	l := newLegacyEnv(t)
	l.yaml = evidenceMapping(evidence)
	l.exec(`CREATE TABLE ` + l.tq("t_order") + ` (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, order_sn VARCHAR(64) NOT NULL,
		uid VARCHAR(64) NOT NULL, tpl_id BIGINT NULL, amount DECIMAL(10, 2) NOT NULL DEFAULT 0, KEY (tpl_id, uid))`)
	l.exec(`INSERT INTO ` + l.tq("t_coupon_tpl") + ` (id, budget) VALUES (1, 100000), (2, 100000)`)
	return l
}

// claim inserts an AVAILABLE coupon of tpl for uid and returns its id.
func (l *legacyEnv) claim(tpl int64, uid string) int64 {
	l.T.Helper()
	res, err := l.DB.Exec(`INSERT INTO `+l.tq("t_user_coupon")+` (tpl_id, source, state, uid) VALUES (?, 'app', 0, ?)`, tpl, uid)
	require.NoError(l.T, err)
	id, err := res.LastInsertId()
	require.NoError(l.T, err)
	return id
}

// tx runs the statements in one transaction.
func (l *legacyEnv) tx(stmts ...[]any) {
	l.T.Helper()
	tx, err := l.DB.Begin()
	require.NoError(l.T, err)
	defer func() { _ = tx.Rollback() }()
	for _, st := range stmts {
		_, err := tx.Exec(st[0].(string), st[1:]...)
		require.NoError(l.T, err, st[0])
	}
	require.NoError(l.T, tx.Commit())
}

// anomalyRow is what a test compares of a cdc_anomaly row.
type anomalyRow struct {
	Kind     string
	Coupon   int64
	Template int64
	Order    string
}

func (r anomalyRow) String() string {
	return fmt.Sprintf("%s coupon=%d template=%d order=%q", r.Kind, r.Coupon, r.Template, r.Order)
}

// anomalyRows reads every cdc_anomaly row.
func (e *env) anomalyRows() []anomalyRow {
	e.T.Helper()
	rows, err := e.DB.Query(`SELECT kind, COALESCE(user_coupon_id, 0), COALESCE(template_id, 0), COALESCE(order_id, '') FROM cdc_anomaly`)
	require.NoError(e.T, err)
	defer rows.Close()
	var out []anomalyRow
	for rows.Next() {
		var r anomalyRow
		require.NoError(e.T, rows.Scan(&r.Kind, &r.Coupon, &r.Template, &r.Order))
		out = append(out, r)
	}
	require.NoError(e.T, rows.Err())
	return out
}

// requireAnomalies compares the anomaly rows with want, whatever their order.
func (e *env) requireAnomalies(want []anomalyRow, msg string) {
	e.T.Helper()
	str := func(rs []anomalyRow) string {
		var s []string
		for _, r := range rs {
			s = append(s, r.String())
		}
		return strings.Join(s, "\n")
	}
	got := e.anomalyRows()
	require.ElementsMatch(e.T, want, got, "%s\nwant:\n%s\ngot:\n%s", msg, str(want), str(got))
}

// Evidence none: the USED transition is its own evidence. A shop whose
// coupons become USED with no order and no write-off row has no
// used_without_redemption, however long the cdc waits (the grace is 1 ms,
// and the cdc settles two heartbeats after the binlog end); there is no
// redemption table to read (a lookup in one would fail the batch), and the
// other anomalies and the counters are as with any evidence.
func TestEvidenceNone(t *testing.T) {
	l := newEvidenceEnv(t, "none")
	uc := l.tq("t_user_coupon")
	pre := l.claim(1, "pre")
	l.exec(`UPDATE `+uc+` SET state = 1 WHERE id = ?`, pre) // USED before the cdc's first start
	c := l.StartCDC(l.mapping(), func(cfg *sink.Config, _ *sink.Daemon) { cfg.RedemptionGrace = time.Millisecond })
	l.WaitCheckpoint()

	var ids []int64
	for i := range 12 {
		ids = append(ids, l.claim(1+int64(i%2), fmt.Sprint("m", i)))
	}
	for _, id := range ids[:6] { // used, no order anywhere
		l.exec(`UPDATE `+uc+` SET state = 1 WHERE id = ?`, id)
	}
	l.exec(`UPDATE `+uc+` SET state = 1, order_no = 'o7' WHERE id = ?`, ids[6]) // used with an order
	l.exec(`UPDATE `+uc+` SET state = 0 WHERE id IN (?, ?)`, ids[0], ids[6])    // refunds back to the wallet
	l.exec(`UPDATE `+uc+` SET state = 1 WHERE id = ?`, ids[0])                  // and used again
	l.exec(`UPDATE `+uc+` SET state = 3 WHERE id = ?`, ids[1])                  // recycled
	l.exec(`UPDATE `+uc+` SET state = 2 WHERE id = ?`, ids[7])                  // expired
	l.exec(`UPDATE `+uc+` SET state = 1 WHERE id = ?`, ids[7])                  // EXPIRED -> USED: illegal
	l.exec(`DELETE FROM `+uc+` WHERE id = ?`, ids[2])                           // a USED coupon deleted
	l.tx([]any{`UPDATE ` + uc + ` SET state = 1 WHERE id = ?`, ids[8]}, []any{`UPDATE ` + uc + ` SET state = 0 WHERE id = ?`, ids[8]})

	l.waitSettled(c, 30*time.Second)
	l.requireAnomalies([]anomalyRow{
		{Kind: inventory.AnomalyIllegalTransition, Coupon: ids[7], Template: 2},
		{Kind: inventory.AnomalyDeletedCoupon, Coupon: ids[2], Template: 1},
	}, "evidence none: only the illegal transition and the delete")
	require.Equal(t, l.legacyTruth(), l.Counters())
}

// Evidence coupon_order: the coupon row's order column is the evidence, in
// the row image itself. A coupon that becomes USED with no order (NULL or
// empty) is used_without_redemption at once, with no grace (here an hour):
// after the binlog end, not an hour later. A coupon whose order changes to
// another while it stays USED is a double_spend. A refund back to
// AVAILABLE and a use with another order is legal; so are an order set on
// a USED coupon that had none (its use was reported already), an order
// cleared while USED, a user changed while USED and an order changed while
// AVAILABLE. A coupon USED with no order at the first start is not judged
// (the bootstrap judges no uses).
func TestEvidenceCouponOrder(t *testing.T) {
	l := newEvidenceEnv(t, "coupon_order")
	uc := l.tq("t_user_coupon")
	use := `UPDATE ` + uc + ` SET state = 1, order_no = ? WHERE id = ?`
	setOrder := `UPDATE ` + uc + ` SET order_no = ? WHERE id = ?`
	restore := `UPDATE ` + uc + ` SET state = 0, order_no = NULL WHERE id = ?`
	pre := l.claim(1, "pre")
	l.exec(use, nil, pre)
	c := l.StartCDC(l.mapping(), func(cfg *sink.Config, _ *sink.Daemon) { cfg.RedemptionGrace = time.Hour })
	l.WaitCheckpoint()
	require.Empty(t, l.anomalyRows(), "a USED coupon without an order at the first start is not judged")

	id := map[string]int64{}
	for _, name := range []string{"ok", "null", "empty", "respent", "refunded", "refunded_keeps", "late_order", "user", "cleared",
		"available", "same_tx"} {
		id[name] = l.claim(1, name)
	}
	l.exec(use, "o-ok", id["ok"])
	l.exec(use, nil, id["null"])
	l.exec(use, "", id["empty"])
	l.exec(use, "o-r1", id["respent"])
	l.exec(setOrder, "o-r2", id["respent"]) // another order, still USED: spent twice
	l.exec(use, "o-f1", id["refunded"])
	l.exec(restore, id["refunded"])
	l.exec(use, "o-f2", id["refunded"])
	l.exec(use, "o-k1", id["refunded_keeps"])
	l.exec(`UPDATE `+uc+` SET state = 0 WHERE id = ?`, id["refunded_keeps"]) // the shop leaves the old order on the row
	l.exec(use, "o-k2", id["refunded_keeps"])
	l.exec(use, nil, id["late_order"])
	l.exec(setOrder, "o-late", id["late_order"])
	l.exec(use, "o-u", id["user"])
	l.exec(`UPDATE `+uc+` SET uid = 'someone else' WHERE id = ?`, id["user"])
	l.exec(use, "o-c", id["cleared"])
	l.exec(setOrder, nil, id["cleared"])
	l.exec(setOrder, "x", id["available"])
	l.exec(setOrder, "y", id["available"])
	l.exec(setOrder, "o-pre", pre)
	l.tx([]any{use, "o-s1", id["same_tx"]}, []any{setOrder, "o-s2", id["same_tx"]})
	inserted, err := l.DB.Exec(`INSERT INTO ` + uc + ` (tpl_id, source, state, uid) VALUES (2, 'h5', 1, 'ins')`) // illegal, no order
	require.NoError(t, err)
	ins, err := inserted.LastInsertId()
	require.NoError(t, err)

	l.WaitCheckpoint()
	l.requireAnomalies([]anomalyRow{
		{Kind: inventory.AnomalyUsedWithoutRedemption, Coupon: id["null"], Template: 1},
		{Kind: inventory.AnomalyUsedWithoutRedemption, Coupon: id["empty"], Template: 1},
		{Kind: inventory.AnomalyUsedWithoutRedemption, Coupon: id["late_order"], Template: 1},
		{Kind: inventory.AnomalyDoubleSpend, Coupon: id["respent"], Template: 1, Order: "o-r2"},
		{Kind: inventory.AnomalyDoubleSpend, Coupon: id["same_tx"], Template: 1, Order: "o-s2"},
		{Kind: inventory.AnomalyIllegalTransition, Coupon: ins, Template: 2},
		{Kind: inventory.AnomalyUsedWithoutRedemption, Coupon: ins, Template: 2},
	}, "evidence coupon_order, at the binlog end")
	l.waitSettled(c, 30*time.Second)
	require.Len(t, l.anomalyRows(), 7, "nothing more later")
	require.Equal(t, l.legacyTruth(), l.Counters())
}
