package sink_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/inventory"
	"github.com/couponlink/couponlink/sink"
)

// States over several columns (issue 38): a shop closes an order by
// is_del = 1 or refund_status = 2, and takes a campaign off the shelf by
// status -1 or is_del = 1; another closes by state 4 and takes off by
// status 0 alone. The same workload (orders closed before the first start
// and after it, campaigns off the shelf before it and after it, each way
// the shop has) gives both the same anomalies and counts.
func TestLegacyStatesOfSeveralColumns(t *testing.T) {
	for _, c := range []struct {
		name, orders, template string
		close, offShelf        [2]string // the two ways of the shop (the same with one column)
	}{
		{"one column", "status: state, closed: [4]", "status: {column: status, off_shelf: [0]}",
			[2]string{"state = 4", "state = 4"}, [2]string{"status = 0", "status = 0"}},
		{"two columns", "closed: [{column: is_del, values: [1]}, {column: refund_status, values: [2]}]",
			"status: {column: status, off_shelf: [-1]}, deleted: [{column: is_del, values: [1]}]",
			[2]string{"is_del = 1", "refund_status = 2"}, [2]string{"status = -1", "is_del = 1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := newEvidenceEnv(t, "order_table")
			l.yaml = strings.Replace(l.yaml, "order: order_sn}", "order: order_sn, "+c.orders+"}", 1)
			l.yaml = strings.Replace(l.yaml, "total_quota: budget}", "total_quota: budget, "+c.template+"}", 1)
			l.exec(`ALTER TABLE ` + l.tq("t_order") + ` ADD COLUMN state TINYINT NULL, ADD COLUMN is_del TINYINT NOT NULL DEFAULT 0,
				ADD COLUMN refund_status TINYINT NULL`)
			l.exec(`ALTER TABLE ` + l.tq("t_coupon_tpl") + ` ADD COLUMN status TINYINT NULL DEFAULT 1, ADD COLUMN is_del TINYINT NOT NULL DEFAULT 0`)
			l.exec(`INSERT INTO ` + l.tq("t_coupon_tpl") + ` (id, budget) VALUES (3, 100), (4, 100), (5, 100)`)
			s := orderShop{l}
			used := func(tpl int64, uid string) {
				id := l.claim(tpl, uid)
				l.tx(s.use(id), s.order(tpl, uid, "o-"+uid))
			}
			closeOrder := func(way int, uid string) {
				l.exec(`UPDATE `+l.tq("t_order")+` SET `+c.close[way]+` WHERE order_sn = ?`, "o-"+uid)
			}
			offShelf := func(way int, tpl int64) {
				l.exec(`UPDATE `+l.tq("t_coupon_tpl")+` SET `+c.offShelf[way]+` WHERE id = ?`, tpl)
			}

			// before the first start: two orders closed, one each way, one
			// open; a campaign off the shelf
			used(1, "a")
			used(1, "b")
			used(1, "c")
			closeOrder(0, "a")
			closeOrder(1, "b")
			offShelf(1, 3)
			require.NoError(t, l.mapping().Validate())
			cdc := l.StartCDC(l.mapping(), func(cfg *sink.Config, _ *sink.Daemon) { cfg.RedemptionGrace = 300 * time.Millisecond })
			l.WaitCheckpoint()

			// after it: two more orders closed, each way, and two campaigns
			// off the shelf, each way; a claim on each campaign off the shelf
			used(2, "d")
			used(2, "e")
			used(2, "f")
			closeOrder(0, "d")
			closeOrder(1, "e")
			offShelf(0, 4)
			offShelf(1, 5)
			l.WaitCheckpoint()
			for _, tpl := range []int64{3, 4, 5} {
				l.claim(tpl, "g")
			}
			l.waitSettled(cdc, 30*time.Second)

			var got []string
			for _, r := range l.anomalyRows() {
				got = append(got, fmt.Sprintf("%s template=%d", r.Kind, r.Template))
			}
			require.ElementsMatch(t, []string{
				inventory.AnomalyUsedWithoutRedemption + " template=1", inventory.AnomalyUsedWithoutRedemption + " template=1",
				inventory.AnomalyUsedWithoutRedemption + " template=2", inventory.AnomalyUsedWithoutRedemption + " template=2",
				inventory.AnomalyClaimedOffShelf + " template=3", inventory.AnomalyClaimedOffShelf + " template=4", inventory.AnomalyClaimedOffShelf + " template=5",
			}, got, "every closed order, whichever column closed it, and every campaign off the shelf")
			require.Equal(t, l.legacyTruth(), l.Counters())
			q := inventory.NewQueries(l.mapping())
			for tpl, off := range map[int64]bool{1: false, 3: true, 4: true, 5: true} {
				v, err := q.ReadTemplate(context.Background(), l.DB, tpl)
				require.NoError(t, err)
				require.Equal(t, off, v.OffShelf, "template %d read by query", tpl)
			}
		})
	}
}
