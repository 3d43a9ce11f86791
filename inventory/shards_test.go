package inventory_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/inventory"
)

// The queries over a sharded role add up its shards: the snapshot's
// counts, a redemption row in another shard than its coupon, a (coupon,
// order) written off in two shards, a user's coupons in two shards; and a
// coupon id two shards hold is found, however the chunks of the merge fall.
func TestSourceOverShards(t *testing.T) {
	ctx := context.Background()
	db, _ := testenv.MySQL(t)
	var dbName string
	require.NoError(t, db.QueryRow("SELECT DATABASE()").Scan(&dbName))
	exec := func(q string, args ...any) {
		t.Helper()
		_, err := db.Exec(q, args...)
		require.NoError(t, err, q)
	}
	p := dbName + "_s"
	for s := range 2 {
		schema := fmt.Sprintf("%s%d", p, s)
		exec("CREATE DATABASE `" + schema + "`")
		t.Cleanup(func() { _, _ = db.Exec("DROP DATABASE IF EXISTS `" + schema + "`") })
		for i := range 2 {
			exec(fmt.Sprintf("CREATE TABLE `%s`.uc_%d (id BIGINT PRIMARY KEY, tpl_id BIGINT NOT NULL, state TINYINT NOT NULL, uid VARCHAR(16) NOT NULL)", schema, i))
			exec(fmt.Sprintf("CREATE TABLE `%s`.rl_%d (id BIGINT PRIMARY KEY, coupon_id BIGINT NOT NULL, order_no VARCHAR(16) NOT NULL)", schema, i))
		}
	}
	exec("CREATE TABLE t_tpl (id BIGINT PRIMARY KEY, budget BIGINT NOT NULL)")
	m, err := canal.LoadMapping([]byte(strings.NewReplacer("SHARD", p, "DBNAME", dbName).Replace(`
schema: DBNAME
user_coupon: {table: "SHARD{0..1}.uc_{0..1}", id: id, template: tpl_id, status: state, user: uid}
status: {AVAILABLE: [0], USED: [1], EXPIRED: [2]}
redemption_log: {table: "SHARD*.rl_*", id: id, coupon: coupon_id, order: order_no}
template: {table: t_tpl, id: id, total_quota: budget}
default_channel: legacy
`)))
	require.NoError(t, err)
	shard := func(n int) string { return fmt.Sprintf("`%s%d`.uc_%d", p, n/2, n%2) }
	log := func(n int) string { return fmt.Sprintf("`%s%d`.rl_%d", p, n/2, n%2) }
	// ids 1..40 over the four shards, user u<id%5> (so every user in several)
	for id := 1; id <= 40; id++ {
		exec("INSERT INTO "+shard(id%4)+" (id, tpl_id, state, uid) VALUES (?, 1, ?, ?)", id, id%2, fmt.Sprint("u", id%5))
	}
	exec("INSERT INTO " + log(0) + " (id, coupon_id, order_no) VALUES (1, 3, 'o3'), (2, 5, 'o5')") // coupons of shards 3 and 1
	exec("INSERT INTO " + log(2) + " (id, coupon_id, order_no) VALUES (3, 5, 'o5')")               // o5 again, in another shard
	exec("INSERT INTO " + shard(2) + " (id, tpl_id, state, uid) VALUES (7, 1, 0, 'x'), (33, 1, 0, 'x')")
	exec("INSERT INTO " + shard(3) + " (id, tpl_id, state, uid) VALUES (4, 1, 0, 'x')") // 7 and 33 in shards 3 and 1, 4 in 0

	r, err := m.Resolve(ctx, db)
	require.NoError(t, err)
	src := inventory.NewQueries(r)
	snap, err := src.Snapshot(ctx, db)
	require.NoError(t, err)
	require.Equal(t, inventory.Counts{Held: 23, Used: 20}, *snap.Counts[inventory.Pair{Template: 1, Channel: "legacy"}], "43 coupons in 4 shards")

	found, err := src.Redeemed(ctx, db, []int64{3, 5, 9})
	require.NoError(t, err)
	require.Equal(t, map[int64][]string{3: {"o3"}, 5: {"o5", "o5"}}, found)
	var dups []string
	require.NoError(t, src.RedemptionKeys(ctx, db, true, func(c int64, o string, n int64) error {
		dups = append(dups, fmt.Sprintln(c, o, n))
		return nil
	}))
	require.Equal(t, []string{"5 o5 2\n"}, dups, "one (coupon, order) written off in two shards")
	claims := map[string]int64{}
	require.NoError(t, src.UserClaims(ctx, db, func(_ int64, user string, n int64) error { claims[user] += n; return nil }))
	require.Equal(t, map[string]int64{"u0": 8, "u1": 8, "u2": 8, "u3": 8, "u4": 8, "x": 3}, claims, "one count per user over the shards")
	clear(claims)
	require.NoError(t, src.UserClaimsOf(ctx, db, 1, []string{"u1", "x", "nobody"}, func(_ int64, user string, n int64) error { claims[user] += n; return nil }))
	require.Equal(t, map[string]int64{"u1": 8, "x": 3}, claims, "the given users only, over the shards")
	// the users at a limit, in pages, summed over the shards first
	var pages [][]string
	for after := ""; ; {
		page, err := src.UsersAtLimit(ctx, db, 1, 8, after, 2)
		require.NoError(t, err)
		if len(page) == 0 {
			break
		}
		pages, after = append(pages, page), page[len(page)-1]
	}
	require.Equal(t, [][]string{{"u0", "u1"}, {"u2", "u3"}, {"u4"}}, pages, "x holds 3 of a limit of 8")
	page, err := src.UsersAtLimit(ctx, db, 1, 3, "u4", 10)
	require.NoError(t, err)
	require.Equal(t, []string{"x"}, page)
	held, err := src.UserCouponCounts(ctx, db, 1, []string{"u1", "x", "nobody"})
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"u1": 8, "x": 3}, held)
	pairs, err := src.PairsOf(ctx, db, []int64{1, 2, 40})
	require.NoError(t, err)
	require.Len(t, pairs, 3)

	for _, chunk := range []int{1, 2, 3, 7, 10000} {
		inventory.SetIDChunk(src, chunk)
		ids, err := src.DuplicateCouponIDs(ctx, db, 10)
		require.NoError(t, err)
		require.Equal(t, []inventory.DuplicateID{
			{ID: 4, Tables: []string{p + "0.uc_0", p + "1.uc_1"}},
			{ID: 7, Tables: []string{p + "1.uc_0", p + "1.uc_1"}},
			{ID: 33, Tables: []string{p + "0.uc_1", p + "1.uc_0"}},
		}, ids, "chunk %d", chunk)
		few, err := src.DuplicateCouponIDs(ctx, db, 1)
		require.NoError(t, err)
		require.Len(t, few, 1)
	}
	single := inventory.NewQueries(canal.DefaultMapping())
	ids, err := single.DuplicateCouponIDs(ctx, db, 10)
	require.NoError(t, err)
	require.Empty(t, ids, "one table: nothing to look for")
}
