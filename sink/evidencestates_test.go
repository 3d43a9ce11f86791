package sink_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/internal/cdcenv"
	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/inventory"
	"github.com/couponlink/couponlink/sink"
)

// evidenceStatesYAML maps the legacy test schema with the shop's orders
// table t_order as the write-off table (it names the coupon); states say
// which of its rows prove nothing any more.
const evidenceStatesYAML = `
user_coupon: {table: LEGACY.t_user_coupon, id: id, template: tpl_id, channel: source, status: state, user: uid}
status: {AVAILABLE: [0], USED: [1], EXPIRED: [2], RETURNED: [3, 9]}
template: {table: LEGACY.t_coupon_tpl, id: id, total_quota: budget}
default_channel: legacy
redemption_evidence: table
`

// newEvidenceStatesEnv is the legacy schema with an orders table that is
// the write-off record, mapped by states (the YAML keys beside
// redemption_log's table, id, coupon and order).
func newEvidenceStatesEnv(t *testing.T, states string) *legacyEnv {
	l := newLegacyEnv(t)
	l.yaml = evidenceStatesYAML + states
	l.exec(`CREATE TABLE ` + l.tq("t_order") + ` (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, order_sn VARCHAR(64) NOT NULL,
		coupon_id BIGINT NOT NULL, is_del TINYINT NOT NULL DEFAULT 0, refund_status TINYINT NULL, KEY (coupon_id))`)
	l.exec(`INSERT INTO ` + l.tq("t_coupon_tpl") + ` (id, budget) VALUES (1, 100000)`)
	return l
}

// An evidence table with states, in both forms: the orders role naming
// the evidence table itself with two closed conditions, and one
// soft-delete column on redemption_log. A coupon given back (set unused,
// its order closed) and used again at the counter with no new order is
// used_without_redemption once, and so is one given back with its order
// left open (the order proved the first use only); used again with a
// fresh order, or with the order written after the use, nothing;
// one coupon behind two live orders is double_spend once; a closed order
// touched again, closed again, or closed in a backlog applied after a
// restart reports nothing more, nor does a batch that fails after its
// writes and is replayed, and the second start reports nothing again. The
// first start takes a coupon USED then as proved by its order (used again
// after a give-back that left the order open, it is reported), and an
// order of a coupon not yet used as proving its next use.
func TestEvidenceStates(t *testing.T) {
	for _, tc := range []struct {
		name, states string
		close        []string // statements that close an order (its order_sn the argument)
	}{
		{"orders role, two conditions", `redemption_log: {table: LEGACY.t_order, id: id, coupon: coupon_id, order: order_sn}
orders: {table: LEGACY.t_order, id: id, closed: [{column: is_del, values: [1]}, {column: refund_status, values: [2]}]}
`, []string{"UPDATE %s SET refund_status = 2 WHERE order_sn = ?", "UPDATE %s SET is_del = 1 WHERE order_sn = ?"}},
		{"one column on redemption_log", `redemption_log: {table: LEGACY.t_order, id: id, coupon: coupon_id, order: order_sn, deleted: {column: is_del, values: [1]}}
`, []string{"UPDATE %s SET is_del = 1 WHERE order_sn = ?"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newEvidenceStatesEnv(t, tc.states)
			uc, ord := l.tq("t_user_coupon"), l.tq("t_order")
			use := `UPDATE ` + uc + ` SET state = 1 WHERE id = ?`
			order := `INSERT INTO ` + ord + ` (order_sn, coupon_id) VALUES (?, ?)`
			closeOrder := func(i int) string { return fmt.Sprintf(tc.close[i%len(tc.close)], ord) }
			// checkout: the order and the use in one transaction
			checkout := func(id int64, sn string) { l.tx([]any{order, sn, id}, []any{use, id}) }
			// give back: the coupon unused, its order closed
			giveBack := func(i int, id int64, sn string) {
				l.tx([]any{`UPDATE ` + uc + ` SET state = 0 WHERE id = ?`, id}, []any{closeOrder(i), sn})
			}
			// armed, the batch that closes order replayed-1 fails after its
			// writes (its count of the order's live rows is gone): the cdc
			// replays it
			var fail atomic.Bool
			start := func() *cdcenv.CDC {
				return l.StartCDC(l.mapping(), func(cfg *sink.Config, _ *sink.Daemon) {
					cfg.RedemptionGrace = time.Millisecond
					sink.InBatchTx(cfg, func(ctx context.Context, tx *sql.Tx) error {
						if !fail.Load() {
							return nil
						}
						var live int
						if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM cdc_redemption_key WHERE order_id = 'replayed-1'`).Scan(&live); err != nil {
							return err
						}
						if live == 0 && fail.CompareAndSwap(true, false) {
							return errors.New("a batch failure (test)")
						}
						return nil
					})
				})
			}
			// before the first start: a coupon used with its order, and an
			// order written before its coupon's use
			pre, ordered := l.claim(1, "pre"), l.claim(1, "ordered")
			checkout(pre, "pre-1")
			l.exec(order, "ordered-1", ordered)
			c := start()
			l.WaitCheckpoint()
			l.exec(`UPDATE `+uc+` SET state = 0 WHERE id = ?`, pre) // given back, its order left open
			l.exec(use, pre)                                        // the order proved the use before the start
			l.exec(use, ordered)                                    // the order written for this use

			id := map[string]int64{}
			for _, name := range []string{"counter", "counter2", "fresh", "double", "touched", "kept", "late", "replayed"} {
				id[name] = l.claim(1, name)
			}
			for i, name := range []string{"counter", "counter2"} { // given back, used again at the counter
				checkout(id[name], name+"-1")
				giveBack(i, id[name], name+"-1")
				l.exec(use, id[name])
			}
			checkout(id["fresh"], "fresh-1") // given back, used again with a fresh order
			giveBack(0, id["fresh"], "fresh-1")
			checkout(id["fresh"], "fresh-2")
			checkout(id["double"], "double-1") // a second checkout tab
			l.exec(order, "double-2", id["double"])
			checkout(id["touched"], "touched-1") // closed, touched again, closed again
			giveBack(0, id["touched"], "touched-1")
			l.exec(`UPDATE `+ord+` SET refund_status = 2, is_del = 1 WHERE order_sn = ?`, "touched-1")
			checkout(id["touched"], "touched-2")
			checkout(id["kept"], "kept-1") // given back, its order left open: it proved the first use only
			l.exec(`UPDATE `+uc+` SET state = 0 WHERE id = ?`, id["kept"])
			l.exec(use, id["kept"])
			l.tx([]any{use, id["late"]}, []any{order, "late-1", id["late"]}) // the order written after the use

			want := []anomalyRow{
				{Kind: inventory.AnomalyUsedWithoutRedemption, Coupon: pre, Template: 1},
				{Kind: inventory.AnomalyUsedWithoutRedemption, Coupon: id["kept"], Template: 1},
				{Kind: inventory.AnomalyUsedWithoutRedemption, Coupon: id["counter"], Template: 1},
				{Kind: inventory.AnomalyUsedWithoutRedemption, Coupon: id["counter2"], Template: 1},
				{Kind: inventory.AnomalyDoubleSpend, Coupon: id["double"], Template: 1, Order: "double-2"},
			}
			l.waitSettled(c, 30*time.Second)
			l.requireAnomalies(want, "at the binlog end")

			// a batch that closes an order and uses its coupon again fails
			// after its writes and is replayed
			checkout(id["replayed"], "replayed-1")
			l.WaitCheckpoint()
			fail.Store(true)
			l.tx([]any{`UPDATE ` + uc + ` SET state = 0 WHERE id = ?`, id["replayed"]}, []any{closeOrder(0), "replayed-1"}, []any{use, id["replayed"]},
				[]any{order, "replayed-2", id["double"]})
			cdctest.WaitFor(t, 30*time.Second, "the failed batch replayed", func() bool {
				v, _ := cdctest.Metric(t, c.Reg, "couponlink_cdc_restarts_total", map[string]string{"reason": "error"})
				return v == 1 && !fail.Load()
			})
			want = append(want, anomalyRow{Kind: inventory.AnomalyUsedWithoutRedemption, Coupon: id["replayed"], Template: 1},
				anomalyRow{Kind: inventory.AnomalyDoubleSpend, Coupon: id["double"], Template: 1, Order: "replayed-2"})
			l.waitSettled(c, 30*time.Second)
			l.requireAnomalies(want, "after a replayed batch")

			// a backlog while the cdc is down: a give-back closed, the
			// closed order closed again, a fresh order, a counter use
			c.Stop(t)
			giveBack(1, id["fresh"], "fresh-2")
			l.exec(closeOrder(0), "fresh-2")
			checkout(id["fresh"], "fresh-3")
			giveBack(0, id["touched"], "touched-2")
			l.exec(use, id["touched"])
			want = append(want, anomalyRow{Kind: inventory.AnomalyUsedWithoutRedemption, Coupon: id["touched"], Template: 1})
			c = start()
			l.waitSettled(c, 30*time.Second)
			l.requireAnomalies(want, "after a restart over a backlog")
			c.Stop(t)
			c = start()
			l.waitSettled(c, 30*time.Second)
			l.requireAnomalies(want, "a second start reports nothing again")
			require.Equal(t, l.legacyTruth(), l.Counters())
		})
	}
}
