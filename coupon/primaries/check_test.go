package primaries

import (
	"context"
	"database/sql"
	"fmt"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/internal/mysqlconn"
	"github.com/couponlink/couponlink/internal/testenv"
)

// twoDatabases makes two migrated databases and opens them as the two
// primaries of a list.
func twoDatabases(t *testing.T) ([]Primary, []Pool, []*sql.DB) {
	t.Helper()
	var list []Primary
	var plain []*sql.DB
	for k := range 2 {
		db, dsn := testenv.MySQL(t)
		list = append(list, Primary{Name: fmt.Sprintf("p%d", k), DSN: dsn})
		plain = append(plain, db)
	}
	pools, err := Open(list, 8)
	require.NoError(t, err)
	t.Cleanup(func() { Close(pools) })
	return list, pools, plain
}

// Every connection of a pool keeps the rule: templates and coupons written
// through primary k's store get ids with (id - 1) mod 2 == k, whatever the
// tables' counters were; and Check passes on them.
func TestPoolsKeepTheRule(t *testing.T) {
	ctx := context.Background()
	_, pools, _ := twoDatabases(t)
	for k, p := range pools {
		store, err := coupon.New(coupon.Config{DB: p.DB, Logger: testenv.QuietLogger()})
		require.NoError(t, err)
		for i := range 3 {
			tpl, err := store.CreateTemplate(ctx, coupon.NewTemplate{Name: "t", TotalQuota: 10, Channels: map[string]int64{"app": 10},
				ValidSeconds: 60, PerUserLimit: 5})
			require.NoError(t, err)
			assert.Equal(t, int64(k+1+2*i), tpl.ID, "template %d on primary %d", i, k)
			c, err := store.Claim(ctx, coupon.ClaimRequest{TemplateID: tpl.ID, UserID: "u", Channel: "app", RequestID: fmt.Sprint("r", i)})
			require.NoError(t, err)
			assert.Equal(t, k, Owner(c.UserCouponID, 2), "coupon %d on primary %d", c.UserCouponID, k)
		}
	}
	require.NoError(t, Check(ctx, pools))
}

// The start-up check refuses a primary holding ids of another rule (a
// list that grew from one primary to two), naming the first offending id;
// a database that is not migrated; a pool that does not set the session
// variables; and one database listed twice.
func TestCheckRefuses(t *testing.T) {
	ctx := context.Background()
	list, pools, plain := twoDatabases(t)

	// the history of a single primary: ids 1, 2, 3 on what is now p0
	_, err := plain[0].Exec(`INSERT INTO coupon_template (id, name, total_quota, valid_seconds) VALUES (1, 'a', 1, 60), (2, 'b', 1, 60), (3, 'c', 1, 60)`)
	require.NoError(t, err)
	err = Check(ctx, pools)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "primary p0 (0 of the list, from 0, of 2): coupon_template id 2 breaks the rule: (id - 1) mod 2 is 1, but this is primary 0")
	assert.Contains(t, err.Error(), "the list of primaries is fixed once ids exist")
	_, err = plain[0].Exec(`DELETE FROM coupon_template WHERE id = 2`)
	require.NoError(t, err)
	require.NoError(t, Check(ctx, pools))

	_, err = plain[1].Exec(`INSERT INTO user_coupon (id, template_id, user_id, channel, status, claimed_at, expires_at)
		VALUES (4, 2, 'u', 'app', 1, NOW(), NOW()), (7, 2, 'u', 'app', 1, NOW(), NOW()), (9, 2, 'u', 'app', 1, NOW(), NOW())`)
	require.NoError(t, err)
	err = Check(ctx, pools)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "primary p1 (1 of the list, from 0, of 2): user_coupon id 7 breaks the rule")
	_, err = plain[1].Exec(`DELETE FROM user_coupon WHERE id IN (7, 9)`)
	require.NoError(t, err)
	require.NoError(t, Check(ctx, pools))

	// a pool opened without the rule (mysqlconn.Open instead of OpenPrimary)
	db, err := mysqlconn.Open(list[1].DSN, 2)
	require.NoError(t, err)
	defer db.Close()
	err = Check(ctx, []Pool{pools[0], {Primary: list[1], DB: db}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the connection has auto_increment_increment 1 and auto_increment_offset 1, want 2 and 2")

	// one database under two names
	same, err := mysqlconn.OpenPrimary(list[0].DSN, 2, 2, 1)
	require.NoError(t, err)
	defer same.Close()
	err = Check(ctx, []Pool{pools[0], {Primary: Primary{Name: "alias", DSN: list[0].DSN}, DB: same}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "primaries p0 and alias are one database")

	// a database that was never migrated
	cfg, err := mysql.ParseDSN(list[0].DSN)
	require.NoError(t, err)
	_, err = plain[0].Exec("CREATE DATABASE IF NOT EXISTS " + cfg.DBName + "_empty")
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = plain[0].Exec("DROP DATABASE IF EXISTS " + cfg.DBName + "_empty") })
	cfg.DBName += "_empty"
	empty, err := Open([]Primary{{Name: "p0", DSN: cfg.FormatDSN()}, list[1]}, 2)
	require.NoError(t, err)
	defer Close(empty)
	err = Check(ctx, empty)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the schema is at version 0, this couponlink needs")
}
