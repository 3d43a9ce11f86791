package canal

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const shardedYAML = `
schema: legacydb
user_coupon: {table: "shard_{0..1}.user_coupon_{0..3}", id: id, template: tpl_id, status: state, user: uid}
status: {AVAILABLE: [0], USED: [1], EXPIRED: [2]}
redemption_log: {table: "shard_{0..1}.redemption_log_{0..3}", id: id, coupon: coupon_id, order: order_no}
template: {table: t_coupon_tpl, id: id, total_quota: budget}
`

func names(ts []TableName) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.String()
	}
	return out
}

func TestShardRanges(t *testing.T) {
	m, err := LoadMapping([]byte(shardedYAML))
	require.NoError(t, err)
	uc, err := m.TablesOf(m.UserCoupon.Table)
	require.NoError(t, err)
	require.Equal(t, []string{"shard_0.user_coupon_0", "shard_0.user_coupon_1", "shard_0.user_coupon_2", "shard_0.user_coupon_3",
		"shard_1.user_coupon_0", "shard_1.user_coupon_1", "shard_1.user_coupon_2", "shard_1.user_coupon_3"}, names(uc))
	src := m.SourceTables()
	require.Len(t, src, 17, "8 + 8 shards and the followed template table")
	require.Contains(t, src, "shard_1.redemption_log_3")
	require.Equal(t, "legacydb.t_coupon_tpl", src[16])
	require.True(t, m.Sharded(m.UserCoupon.Table))
	require.False(t, m.Sharded(m.Template.Table))
	sch, tbl := m.SchemaTable(m.UserCoupon.Table)
	require.Equal(t, [2]string{"shard_{0..1}", "user_coupon_{0..3}"}, [2]string{sch, tbl}, "a dot inside braces splits nothing")

	d := newDecoder(m)
	for _, n := range uc {
		require.Equal(t, kindUserCoupon, d.sources[n.String()], n.String())
	}
	require.Equal(t, kindRedemption, d.sources["shard_0.redemption_log_2"])
	require.Len(t, d.sources, 17)

	for _, c := range []struct {
		written string
		want    []string
	}{
		{"t_{00..11}", []string{"t_00", "t_01", "t_02", "t_03", "t_04", "t_05", "t_06", "t_07", "t_08", "t_09", "t_10", "t_11"}},
		{"t_{8..10}", []string{"t_8", "t_9", "t_10"}},
		{"t_{08..10}", []string{"t_08", "t_09", "t_10"}},
		{"t_{000..2}", []string{"t_000", "t_001", "t_002"}},
		{"t_{5..5}_x", []string{"t_5_x"}},
	} {
		p, err := parsePattern(c.written)
		require.NoError(t, err, c.written)
		require.Equal(t, c.want, p.expand(), c.written)
	}
}

func TestShardPatterns(t *testing.T) {
	m, err := LoadMapping([]byte(strings.NewReplacer("shard_{0..1}.user_coupon_{0..3}", "user_coupon_*",
		"shard_{0..1}.redemption_log_{0..3}", "redemption_log_*").Replace(shardedYAML)))
	require.NoError(t, err, "user_coupon_* and redemption_log_* cannot name one table")
	_, err = m.TablesOf(m.UserCoupon.Table)
	require.ErrorIs(t, err, errUnresolved)
	require.Equal(t, []string{"legacydb.user_coupon_*", "legacydb.redemption_log_*", "legacydb.t_coupon_tpl"}, m.SourceTables(),
		"a pattern is listed as written until the mapping is resolved")

	require.True(t, globMatch("user_coupon_*", "user_coupon_12"))
	require.True(t, globMatch("user_coupon_*", "user_coupon_"))
	require.False(t, globMatch("user_coupon_*", "user_coupons"))
	require.True(t, globMatch("*_log_*", "redemption_log_7"))
	require.True(t, globsMeet("a_*", "*_b"), "a_b")
	require.True(t, globsMeet("uc_*", "uc_log_*"))
	require.False(t, globsMeet("uc_*", "rl_*"))
	require.False(t, globsMeet("uc_*_x", "uc_*_y"))

	require.Equal(t, []string{"t_1", "t_2", "t_10", "u"}, func() []string {
		l := []string{"t_10", "u", "t_2", "t_1"}
		for i := range l {
			for j := i + 1; j < len(l); j++ {
				if naturalCompare(l[j], l[i]) < 0 {
					l[i], l[j] = l[j], l[i]
				}
			}
		}
		return l
	}())
}

func TestShardMappingErrors(t *testing.T) {
	uc := "shard_{0..1}.user_coupon_{0..3}"
	rl := "shard_{0..1}.redemption_log_{0..3}"
	with := func(pairs ...string) string { return strings.NewReplacer(pairs...).Replace(shardedYAML) }
	cases := []struct{ name, yaml, want string }{
		{"counts down", with(uc, "user_coupon_{3..1}"), `{3..1} counts down; write {1..3}`},
		{"letters", with(uc, "user_coupon_{a..b}"), `{a..b} is not a numeric range`},
		{"negative", with(uc, "user_coupon_{-1..3}"), `{-1..3} is not a numeric range`},
		{"one bound", with(uc, "user_coupon_{3}"), `{3} is not a numeric range`},
		{"unclosed", with(uc, "user_coupon_{0..3"), `has a { without its }`},
		{"stray brace", with(uc, "user_coupon_0..3}"), `is not a valid table name`},
		{"too many", with(uc, "shard_{0..64}.user_coupon_{0..63}"), `stands for more than 4096 tables`},
		{"too many in one range", with(uc, "user_coupon_{0..5000}"), `stands for more than 4096 tables`},
		{"template set", with("t_coupon_tpl", `"t_coupon_tpl_{0..3}"`),
			`template.table "t_coupon_tpl_{0..3}" is a set of tables; only user_coupon, redemption_log and orders may be sharded`},
		{"quota set", shardedYAML + "channel_quota: {table: 'q_*', template: t, channel: c, quota: q, claimed: n}\n",
			`channel_quota.table "q_*" is a set of tables`},
		{"same shard in two roles", with(rl, "shard_1.user_coupon_{3..5}"),
			`user_coupon.table "shard_{0..1}.user_coupon_{0..3}" and redemption_log.table "shard_1.user_coupon_{3..5}" can name the same table (e.g. shard_1.user_coupon_3)`},
		{"pattern over another role's table", with(uc, "t_*"),
			`user_coupon.table "t_*" and template.table "t_coupon_tpl" can name the same table (e.g. legacydb.t_coupon_tpl)`},
		{"two patterns meet", with(uc, "uc_*", rl, "uc_log_*"),
			`user_coupon.table "uc_*" and redemption_log.table "uc_log_*" can name the same table;`},
		{"schema patterns meet", with(uc, "s_*.coupon_{0..3}", rl, "s_1.coupon_{3..4}"),
			`user_coupon.table "s_*.coupon_{0..3}" and redemption_log.table "s_1.coupon_{3..4}" can name the same table (e.g. s_1.coupon_3)`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := LoadMapping([]byte(c.yaml))
			require.ErrorContains(t, err, c.want)
		})
	}
	for _, ok := range []string{
		with(uc, "shard_{0..63}.user_coupon_{0..63}"), // 4096: the most
		with(uc, "uc_*", rl, "rl_*"),
		with(uc, "s_{0..1}.coupon", rl, "s_{2..3}.coupon"), // same table names, other schemas
	} {
		_, err := LoadMapping([]byte(ok))
		require.NoError(t, err, ok)
	}
}
