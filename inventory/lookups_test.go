package inventory_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/inventory"
)

// A mapping whose evidence is not a write-off table has no redemption
// table: its lookups refuse without a query (the querier is nil here),
// and only order_table compares orders.
func TestLookupsFollowTheEvidence(t *testing.T) {
	ctx := context.Background()
	for _, ev := range []string{"none", "coupon_order", "order_table"} {
		y := `
user_coupon: {table: s.uc, id: id, template: tpl, status: st, order: sn, user: uid}
status: {AVAILABLE: [0], USED: [1], EXPIRED: [2]}
template: {table: s.tpl, id: id, total_quota: budget}
redemption_evidence: ` + ev + "\n"
		if ev == "order_table" {
			y += "orders: {table: s.orders, id: id, template: tpl, user: uid}\n"
		}
		m, err := canal.LoadMapping([]byte(y))
		require.NoError(t, err)
		src := inventory.NewQueries(m)
		_, err = src.Redeemed(ctx, nil, []int64{1})
		require.ErrorContains(t, err, "redemption evidence is "+ev+": there is no redemption table")
		err = src.RedemptionKeys(ctx, nil, false, func(int64, string, int64) error { return nil })
		require.ErrorContains(t, err, "there is no redemption table")
		if ev != "order_table" {
			err = src.OrderKeyDifferences(ctx, nil, func(int64, string, int64, int64, int64) error { return nil })
			require.ErrorContains(t, err, "there is no order table")
		}
	}
}
