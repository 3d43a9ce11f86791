package main

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/internal/testenv"
)

// `couponlink mapping check` on a shop sharded over 16 tables (two schemas
// × four user_coupon_N and redemption_log_N): each role with its shard
// count and first shards; a missing shard, a shard whose mapped column
// differs and two roles whose sets overlap are errors that name them.
func TestMappingCheckShards(t *testing.T) {
	bin := testenv.BuildCouponlink(t)
	db, dsn := testenv.MySQL(t)
	var dbName string
	require.NoError(t, db.QueryRow("SELECT DATABASE()").Scan(&dbName))
	p := dbName + "_s"
	exec := func(q string) {
		t.Helper()
		_, err := db.Exec(q)
		require.NoError(t, err, q)
	}
	makeShards(t, db, p, exec)
	yaml := strings.ReplaceAll(`
user_coupon: {table: "SHARD{0..1}.user_coupon_{0..3}", id: id, template: tpl_id, status: state, user: uid}
status: {AVAILABLE: [0], USED: [1], EXPIRED: [2]}
redemption_log: {table: "SHARD*.redemption_log_*", id: id, coupon: coupon_id, order: order_no}
template: {table: SHARD0.coupon_tpl, id: id, total_quota: budget}
`, "SHARD", p)
	file := func(y string) string {
		path := filepath.Join(t.TempDir(), "sharded.yaml")
		require.NoError(t, os.WriteFile(path, []byte(y), 0o600))
		return path
	}
	mapping := file(yaml)

	code, out, errs := runBinary(t, bin, nil, "mapping", "check", "-dsn", dsn, "-mapping", mapping)
	require.Equal(t, 0, code, errs+out)
	assert.Regexp(t, `\ntables\n  user_coupon +→ `+p+`\{0\.\.1\}\.user_coupon_\{0\.\.3\} +\(8 shards: `+p+`0\.user_coupon_0, `+p+`0\.user_coupon_1, `+
		p+`0\.user_coupon_2, `+p+`0\.user_coupon_3, … 4 more\)\n  redemption_log +→ `+p+`\*\.redemption_log_\* +\(8 shards: `, out)
	assert.Regexp(t, `\n  template +→ `+p+`0\.coupon_tpl\n`, out)
	assert.Regexp(t, `\n  user_coupon\.status +→ `+p+`\{0\.\.1\}\.user_coupon_\{0\.\.3\}\.state +\(tinyint\(4\)\)\n`, out)
	assert.Contains(t, out, "\nok\n")

	exec("DROP TABLE `" + p + "1`.user_coupon_2")
	exec("ALTER TABLE `" + p + "0`.redemption_log_3 MODIFY coupon_id VARCHAR(20) NOT NULL")
	code, out, errs = runBinary(t, bin, nil, "mapping", "check", "-dsn", dsn, "-mapping", mapping)
	assert.Equal(t, 1, code, errs+out)
	assert.Contains(t, out, "  - mapping: user_coupon.table \""+p+"{0..1}.user_coupon_{0..3}\": 1 of its 8 tables are missing on the server: "+p+"1.user_coupon_2\n")
	assert.Contains(t, out, "  - mapping: redemption_log.coupon: column \"coupon_id\" of shard "+p+"0.redemption_log_3 is varchar(20), but of "+
		p+"0.redemption_log_0 bigint(20); every shard of a role must define its mapped columns alike\n")
	assert.Regexp(t, `\n  user_coupon +→ `+p+`\{0\.\.1\}\.user_coupon_\{0\.\.3\} +\(7 shards: `, out, "the shards that are there")
	assert.Equal(t, "couponlink mapping check: 2 errors in "+mapping+" (see above)\n", errs)

	overlapping := file(strings.Replace(yaml, p+"*.redemption_log_*", p+"*.user_coupon_*", 1))
	code, out, errs = runBinary(t, bin, nil, "mapping", "check", "-dsn", dsn, "-mapping", overlapping)
	assert.Equal(t, 1, code, errs+out)
	assert.Contains(t, out, `user_coupon.table "`+p+`{0..1}.user_coupon_{0..3}" and redemption_log.table "`+p+
		`*.user_coupon_*" can name the same table (e.g. `+p+`0.user_coupon_0); each table must belong to one role`)
	assert.Contains(t, errs, "the mapping is refused")
}

// makeShards makes the schemas prefix0 and prefix1 with four
// user_coupon_N and redemption_log_N tables each, and prefix0.coupon_tpl.
func makeShards(t *testing.T, db *sql.DB, prefix string, exec func(string)) {
	for s := range 2 {
		schema := fmt.Sprintf("%s%d", prefix, s)
		exec("CREATE DATABASE `" + schema + "`")
		t.Cleanup(func() { _, _ = db.Exec("DROP DATABASE IF EXISTS `" + schema + "`") })
		for i := range 4 {
			exec(fmt.Sprintf("CREATE TABLE `%s`.user_coupon_%d (id BIGINT NOT NULL PRIMARY KEY, tpl_id BIGINT NOT NULL, "+
				"state TINYINT NOT NULL, uid BIGINT NOT NULL, KEY (tpl_id, uid))", schema, i))
			exec(fmt.Sprintf("CREATE TABLE `%s`.redemption_log_%d (id BIGINT NOT NULL PRIMARY KEY, coupon_id BIGINT NOT NULL, "+
				"order_no VARCHAR(64) NOT NULL, KEY (coupon_id))", schema, i))
		}
	}
	exec("CREATE TABLE `" + prefix + "0`.coupon_tpl (id BIGINT NOT NULL PRIMARY KEY, budget BIGINT NOT NULL)")
}
