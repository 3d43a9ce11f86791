package inventory_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/inventory"
)

// legacyYAML maps a legacy schema, named with its schema: its own names
// and codes, no channels, a template table with its own counts.
const legacyYAML = `
schema: %s
user_coupon: {table: t_user_coupon, id: id, template: tpl_id, status: state, order: order_no, user: uid, expires_at: expire_time}
status: {AVAILABLE: [0], USED: [1], EXPIRED: [2], RETURNED: [3, 9]}
redemption_log: {table: t_writeoff, id: id, coupon: coupon_id, order: order_no}
template: {table: t_coupon_tpl, id: id, total_quota: budget, issued: issued}
default_channel: legacy
`

// Every query on a legacy schema's tables: the snapshot's counts, the
// template quotas, the lookups of the anomaly checks and the template's
// own counts.
func TestSourceOnALegacySchema(t *testing.T) {
	ctx := context.Background()
	db, _ := testenv.MySQL(t)
	var dbName string
	require.NoError(t, db.QueryRow("SELECT DATABASE()").Scan(&dbName))
	for _, q := range []string{
		"CREATE TABLE t_user_coupon (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, uid VARCHAR(32) NOT NULL, " +
			"tpl_id INT NOT NULL, state TINYINT NOT NULL, order_no VARCHAR(64) NULL, expire_time DATETIME NOT NULL)",
		"CREATE TABLE t_writeoff (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, coupon_id BIGINT NOT NULL, order_no VARCHAR(64) NULL)",
		"CREATE TABLE t_coupon_tpl (id INT NOT NULL PRIMARY KEY, budget BIGINT NOT NULL, issued BIGINT NULL)",
	} {
		_, err := db.ExecContext(ctx, q)
		require.NoError(t, err, q)
	}
	m, err := canal.LoadMapping(fmt.Appendf(nil, legacyYAML, dbName))
	require.NoError(t, err)
	require.NoError(t, m.Check(ctx, db))
	src := inventory.NewQueries(m)

	quotas, err := src.TemplateQuotas(ctx, db, []int64{1, 2})
	require.NoError(t, err)
	require.Empty(t, quotas)
	exec := func(q string) {
		_, err := db.ExecContext(ctx, q)
		require.NoError(t, err, q)
	}
	exec("INSERT INTO t_coupon_tpl VALUES (1, 100, 4), (2, 250, NULL), (3, 7, 0)")
	exec(`INSERT INTO t_user_coupon (id, uid, tpl_id, state, order_no, expire_time) VALUES
		(1, 'u1', 1, 0, NULL, NOW()), (2, 'u2', 1, 1, 'o-2', NOW()), (3, 'u3', 1, 9, NULL, NOW()), (4, 'u4', 2, 1, 'o-4', NOW())`)
	exec("INSERT INTO t_writeoff (coupon_id, order_no) VALUES (2, 'o-2'), (4, 'o-4'), (4, 'o-4'), (4, NULL)")
	quotas, err = src.TemplateQuotas(ctx, db, []int64{1, 2, 99})
	require.NoError(t, err)
	require.Equal(t, map[int64]int64{1: 100, 2: 250}, quotas)

	snap, err := inventory.TakeSnapshot(ctx, db, m)
	require.NoError(t, err)
	require.NotZero(t, snap.Pos.Pos)
	require.Nil(t, snap.Quotas, "no channel quotas mapped")
	require.Equal(t, map[inventory.Pair]*inventory.Counts{
		{Template: 1, Channel: "legacy"}: {Held: 1, Used: 1, Returned: 1},
		{Template: 2, Channel: "legacy"}: {Used: 1},
	}, snap.Counts)

	redeemed, err := src.Redeemed(ctx, db, []int64{1, 2, 4})
	require.NoError(t, err)
	require.Equal(t, map[int64][]string{2: {"o-2"}, 4: {"o-4", "o-4", ""}}, redeemed)
	pairs, err := src.PairsOf(ctx, db, []int64{3, 4, 5})
	require.NoError(t, err)
	require.Equal(t, map[int64]inventory.Pair{3: {Template: 1, Channel: "legacy"}, 4: {Template: 2, Channel: "legacy"}}, pairs)
	type key struct {
		coupon int64
		order  string
	}
	keys := map[key]int64{}
	require.NoError(t, src.RedemptionKeys(ctx, db, true, func(c int64, o string, n int64) error { keys[key{c, o}] = n; return nil }))
	require.Equal(t, map[key]int64{{4, "o-4"}: 2}, keys)

	own, err := src.LegacyCounts(ctx, db, []int64{1, 2})
	require.NoError(t, err)
	four, hundred, budget2 := int64(4), int64(100), int64(250)
	require.Equal(t, map[int64]inventory.LegacyCounts{
		1: {Own: [2]*int64{&four, nil}, Truth: [2]int64{3, 1}, Budget: &hundred, Taken: 3},
		2: {Truth: [2]int64{1, 1}, Budget: &budget2, Taken: 1},
	}, own)

	// coupons per (template, user): an unmapped state and an empty user count nowhere
	exec(`INSERT INTO t_user_coupon (id, uid, tpl_id, state, expire_time) VALUES (5, 'u1', 1, 0, NOW()), (6, 'u1', 1, 7, NOW()), (7, '', 1, 0, NOW())`)
	claims := map[string]int64{}
	require.NoError(t, src.UserClaims(ctx, db, func(tpl int64, u string, n int64) error {
		claims[fmt.Sprintf("%d/%s", tpl, u)] = n
		return nil
	}))
	require.Equal(t, map[string]int64{"1/u1": 2, "1/u2": 1, "1/u3": 1, "2/u4": 1}, claims)
}
