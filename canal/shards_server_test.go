package canal

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// shardSchemas makes two schemas beside the test database, each with four
// uc_N and rl_N tables, and the template table in the test database; it
// returns the schemas' common prefix and the mapping's YAML.
func shardSchemas(t *testing.T, dbName string, exec func(string)) (prefix, yaml string) {
	prefix = dbName + "_s"
	for s := range 2 {
		schema := fmt.Sprintf("%s%d", prefix, s)
		exec("CREATE DATABASE `" + schema + "`")
		t.Cleanup(func() { exec("DROP DATABASE IF EXISTS `" + schema + "`") })
		for i := range 4 {
			exec(fmt.Sprintf("CREATE TABLE `%s`.uc_%d (id BIGINT NOT NULL PRIMARY KEY, tpl_id INT NOT NULL, state TINYINT NOT NULL, "+
				"uid BIGINT NOT NULL, KEY (tpl_id))", schema, i))
			exec(fmt.Sprintf("CREATE TABLE `%s`.rl_%d (id BIGINT NOT NULL PRIMARY KEY, coupon_id BIGINT NOT NULL, order_no VARCHAR(64), "+
				"KEY (coupon_id))", schema, i))
		}
	}
	exec("CREATE TABLE t_coupon_tpl (id INT NOT NULL PRIMARY KEY, budget BIGINT NOT NULL)")
	yaml = strings.NewReplacer("shard_", prefix, "user_coupon_", "uc_", "redemption_log_", "rl_", "schema: legacydb", "schema: "+dbName).
		Replace(shardedYAML)
	return prefix, yaml
}

// Sets of shard tables on a server: ranges and patterns resolve to the
// same 8 tables each; a missing shard, a pattern matching nothing, a shard
// whose mapped column differs or is missing, one without a primary key
// are refused, named; an extra unmapped column is fine.
func TestShardsOnServer(t *testing.T) {
	ctx := context.Background()
	db, _, dbName, exec := testDatabase(t)
	prefix, yaml := shardSchemas(t, dbName, exec)
	load := func(y string) *Mapping {
		t.Helper()
		m, err := LoadMapping([]byte(y))
		require.NoError(t, err)
		return m
	}
	m := load(yaml)
	require.NoError(t, m.Check(ctx, db))
	r, err := m.Resolve(ctx, db)
	require.NoError(t, err)
	require.True(t, r.Resolved())
	require.False(t, m.Resolved(), "Resolve returns a copy")
	uc, err := r.TablesOf(r.UserCoupon.Table)
	require.NoError(t, err)
	require.Len(t, uc, 8)
	require.Equal(t, prefix+"1.uc_3", uc[7].String())
	require.Len(t, r.SourceTables(), 17)

	pat := load(strings.NewReplacer(prefix+"{0..1}.uc_{0..3}", prefix+"*.uc_*", prefix+"{0..1}.rl_{0..3}", prefix+"*.rl_*").Replace(yaml))
	_, err = pat.TablesOf(pat.UserCoupon.Table)
	require.ErrorIs(t, err, errUnresolved)
	exec("CREATE TABLE `" + prefix + "0`.uc_10 LIKE `" + prefix + "0`.uc_0")
	rp, err := pat.Resolve(ctx, db)
	require.NoError(t, err)
	got, err := rp.TablesOf(pat.UserCoupon.Table)
	require.NoError(t, err)
	require.Equal(t, []string{prefix + "0.uc_0", prefix + "0.uc_1", prefix + "0.uc_2", prefix + "0.uc_3", prefix + "0.uc_10",
		prefix + "1.uc_0", prefix + "1.uc_1", prefix + "1.uc_2", prefix + "1.uc_3"}, names(got), "matched, in numeric order")
	require.NoError(t, pat.Check(ctx, db))
	exec("DROP TABLE `" + prefix + "0`.uc_10")

	none := load(strings.Replace(yaml, prefix+"{0..1}.uc_{0..3}", prefix+"*.coupon_*", 1))
	_, err = none.Resolve(ctx, db)
	require.EqualError(t, err, `mapping: user_coupon.table "`+prefix+`*.coupon_*": `+prefix+`*.coupon_* matches no table on the server`)

	exec("DROP TABLE `" + prefix + "1`.uc_3")
	exec("DROP TABLE `" + prefix + "0`.uc_1")
	_, err = m.Resolve(ctx, db)
	require.EqualError(t, err, `mapping: user_coupon.table "`+prefix+`{0..1}.uc_{0..3}": 2 of its 8 tables are missing on the server: `+
		prefix+"0.uc_1, "+prefix+"1.uc_3")
	require.ErrorContains(t, m.Check(ctx, db), "2 of its 8 tables are missing on the server")
	exec("CREATE TABLE `" + prefix + "1`.uc_3 LIKE `" + prefix + "1`.uc_0")
	// uc_1 comes back with an extra column (fine), another shard with a
	// status of another type, another without the user column, a
	// redemption shard without a primary key
	exec("CREATE TABLE `" + prefix + "0`.uc_1 LIKE `" + prefix + "0`.uc_0")
	exec("ALTER TABLE `" + prefix + "0`.uc_1 ADD COLUMN note VARCHAR(20) NULL")
	exec("ALTER TABLE `" + prefix + "1`.uc_2 MODIFY state VARCHAR(8) NOT NULL")
	exec("ALTER TABLE `" + prefix + "0`.uc_3 DROP COLUMN uid")
	exec("ALTER TABLE `" + prefix + "1`.rl_1 DROP PRIMARY KEY")
	err = m.Check(ctx, db)
	require.Error(t, err)
	msgs := flatten(err)
	require.Len(t, msgs, 3, strings.Join(msgs, "\n"))
	require.Contains(t, msgs, `mapping: user_coupon.status: column "state" of shard `+prefix+`1.uc_2 is varchar(8), but of `+prefix+
		`0.uc_0 tinyint(4); every shard of a role must define its mapped columns alike`)
	require.Contains(t, msgs, `mapping: user_coupon.user names column "uid" but `+prefix+`0.uc_3 has no such column (it has: id, tpl_id, state)`)
	require.Contains(t, msgs, "mapping: redemption_log.table "+prefix+"1.rl_1 has no PRIMARY KEY; the binlog of a table without one cannot be followed reliably")

	// mapping check: the shards, and a warning per shard
	exec("ALTER TABLE `" + prefix + "1`.rl_1 ADD PRIMARY KEY (id), DROP INDEX coupon_id")
	exec("ALTER TABLE `" + prefix + "1`.uc_2 MODIFY state TINYINT NULL")
	rep, err := m.Inspect(ctx, db)
	require.NoError(t, err)
	require.Equal(t, []string{`mapping: user_coupon.user names column "uid" but ` + prefix + `0.uc_3 has no such column (it has: id, tpl_id, state)`},
		rep.Errors)
	require.Equal(t, RoleTables{Role: "user_coupon", Written: prefix + "{0..1}.uc_{0..3}", Sharded: true, Tables: names(uc)}, rep.Tables[0])
	require.Equal(t, RoleTables{Role: "template", Written: dbName + ".t_coupon_tpl", Tables: []string{dbName + ".t_coupon_tpl"}}, rep.Tables[2])
	require.Contains(t, rep.Warnings, `user_coupon.status: column "state" of shard `+prefix+`1.uc_2 allows NULL, unlike `+prefix+
		`0.uc_0's: undecodable rows are possible: a row with NULL there is an undecodable_row anomaly, counted nowhere (-strict stops the cdc instead)`)
	require.Contains(t, rep.Warnings, "redemption_log.table "+prefix+"1.rl_1 has no index on (coupon_id): used_without_redemption looks up a "+
		"coupon's write-off rows; add one: CREATE INDEX `idx_couponlink_coupon_id` ON `"+prefix+"1`.`rl_1` (`coupon_id`);")
	require.Len(t, rep.Warnings, 2, strings.Join(rep.Warnings, "\n"))
	require.Equal(t, prefix+"{0..1}.uc_{0..3}.state", rep.Roles[2].Where(), "a sharded role's column, once")
}
