package canal

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/coupon"
)

// A legacy schema with its own names and codes (RETURNED has two), no
// channel column, and an ALTER of the coupon table while it is tailed.
func TestTailerLegacySchema(t *testing.T) {
	ctx := context.Background()
	db, dsn, dbName, exec := testDatabase(t)
	createLegacyTables(t, ctx, exec)
	exec("ALTER TABLE t_coupon_tpl MODIFY budget BIGINT NULL")
	m, err := LoadMapping([]byte(strings.Replace(legacyYAML, "schema: legacydb", "schema: "+dbName, 1)))
	require.NoError(t, err)
	cfg := testConfig(t, dsn)
	cfg.Mapping = m
	cfg.Schema = "" // the mapping names it

	start, err := CurrentPosition(ctx, db)
	require.NoError(t, err)
	c, errc, stop := startTailer(t, cfg, start)

	conn, err := db.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	w := &txWriter{t: t, conn: conn}
	w.tx("INSERT INTO t_user_coupon (uid, tpl_id, state, order_no, expire_time) VALUES " +
		"('u1', 9, 0, NULL, NOW()), ('u2', 9, 0, NULL, NOW()), ('u3', 9, 0, NULL, NOW())")
	w.tx("UPDATE t_user_coupon SET state = 1, order_no = 'o1' WHERE id = 1",
		"INSERT INTO t_writeoff (coupon_id, order_no) VALUES (1, 'o1')")
	w.tx("UPDATE t_user_coupon SET state = 3 WHERE id = 1") // USED → RETURNED (code 3)
	w.tx("UPDATE t_user_coupon SET state = 9 WHERE id = 2") // AVAILABLE → RETURNED (code 9)
	// the template table is followed (no channel quotas): budget changes only
	w.tx("INSERT INTO t_coupon_tpl (id, budget) VALUES (9, 10)")
	w.tx("UPDATE t_coupon_tpl SET budget = 20 WHERE id = 9") // a top-up
	w.tx("UPDATE t_coupon_tpl SET budget = NULL WHERE id = 9")
	w.tx("UPDATE t_coupon_tpl SET id = 8 WHERE id = 9")
	w.tx("DELETE FROM t_coupon_tpl WHERE id = 8")
	beforeAlter, err := CurrentPosition(ctx, db)
	require.NoError(t, err)
	c.waitEnd(t, beforeAlter, errc) // everything before the ALTER is decoded

	// A DDL that shifts the mapped columns: they are located again.
	exec("ALTER TABLE t_user_coupon ADD COLUMN note VARCHAR(16) NULL AFTER uid")
	w.tx("UPDATE t_user_coupon SET state = 2 WHERE id = 3") // AVAILABLE → EXPIRED
	w.tx("INSERT INTO t_user_coupon (uid, note, tpl_id, state, expire_time) VALUES ('u4', 'n', 9, 0, NOW())")
	target, err := CurrentPosition(ctx, db)
	require.NoError(t, err)
	batches := c.waitEnd(t, target, errc)
	require.NoError(t, stop())

	// the shop's codes, as stored: RETURNED is 3 but for coupon 2 (9)
	legacyCode := map[coupon.Status]int64{coupon.Available: 0, coupon.Used: 1, coupon.Expired: 2, coupon.Returned: 3}
	tr := func(id int64, from, to coupon.Status, order string) Transition {
		prev := order // the before image's order: none before the redemption
		if from == coupon.Available {
			prev = ""
		}
		user := fmt.Sprintf("u%d", id)
		t := Transition{Coupon: id, Template: 9, Channel: "legacy", From: from, To: to, PrevTemplate: 9, PrevChannel: "legacy", Order: order,
			PrevOrder: prev, User: user, PrevUser: user}
		if from != coupon.None {
			t.FromCode = code(legacyCode[from])
		}
		if to != coupon.None {
			t.ToCode = code(legacyCode[to])
		}
		if id == 2 && to == coupon.Returned {
			t.ToCode = code(9)
		}
		return t
	}
	ts, rs, qs := allOf(batches)
	ts = withoutExpiry(ts) // expire_time is judged in timezone_test.go
	require.Equal(t, []Transition{
		tr(1, coupon.None, coupon.Available, ""), tr(2, coupon.None, coupon.Available, ""), tr(3, coupon.None, coupon.Available, ""),
		tr(1, coupon.Available, coupon.Used, "o1"),
		tr(1, coupon.Used, coupon.Returned, "o1"),
		tr(2, coupon.Available, coupon.Returned, ""),
		tr(3, coupon.Available, coupon.Expired, ""),
		tr(4, coupon.None, coupon.Available, ""),
	}, strip(ts))
	require.Len(t, rs, 1)
	require.Equal(t, Redemption{ID: 1, Coupon: 1, Channel: "legacy", Order: "o1", At: rs[0].At, After: rs[0].After}, rs[0]) // After: batch-relative
	require.Empty(t, qs)
	var tpls []TemplateChange
	for _, b := range batches {
		tpls = append(tpls, b.Templates...)
	}
	require.Equal(t, []TemplateChange{
		{Template: 9, Quota: 10, Known: true, Inserted: true},
		{Template: 9, Quota: 20, Known: true, PrevQuota: 10, PrevKnown: true},
		{Template: 9, PrevQuota: 20, PrevKnown: true},
		{Template: 9, Deleted: true}, {Template: 8, Inserted: true},
		{Template: 8, Deleted: true},
	}, tpls)

	// Replaying the rows written before the ALTER is refused.
	tl, err := New(cfg)
	require.NoError(t, err)
	err = tl.Run(ctx, start, newCollector())
	require.ErrorIs(t, err, ErrSchemaChanged)
	require.ErrorContains(t, err, "couponlink cdc --rebuild")
}
