package canal

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/coupon"
)

const legacyYAML = `
schema: legacydb
user_coupon: {table: t_user_coupon, id: id, template: tpl_id, status: state, order: order_no, user: uid, expires_at: expire_time}
status: {AVAILABLE: [0], USED: [1], EXPIRED: [2], RETURNED: [3, 9]}
redemption_log: {table: t_writeoff, id: id, coupon: coupon_id, order: order_no}
template: {table: t_coupon_tpl, id: id, total_quota: budget}
default_channel: legacy
`

func TestLoadMapping(t *testing.T) {
	m, err := LoadMapping([]byte(legacyYAML))
	require.NoError(t, err)
	require.Equal(t, "legacydb", m.Schema)
	require.Equal(t, "state", m.UserCoupon.Status)
	require.Nil(t, m.ChannelQuota)
	require.Equal(t, []string{"legacydb.t_user_coupon", "legacydb.t_writeoff", "legacydb.t_coupon_tpl"}, m.SourceTables(),
		"without channel quotas the template table is followed for its budgets")
	require.Equal(t, []int64{3, 9}, m.Codes(coupon.Returned))
	require.False(t, m.Reference(), "a loaded mapping names a legacy schema")

	r, err := LoadMapping([]byte(strings.Replace(legacyYAML, ", RETURNED: [3, 9]", "", 1)))
	require.NoError(t, err, "a shop without voids maps no RETURNED code")
	require.Empty(t, r.Codes(coupon.Returned))
	require.Equal(t, []int64{2}, r.Codes(coupon.Expired))

	d := DefaultMapping()
	require.NoError(t, d.Validate())
	require.True(t, d.Reference())
	require.Equal(t, []string{"user_coupon", "redemption_log", "channel_quota", "inventory_flow"}, d.SourceTables())
	d.Schema = "cl"
	require.Equal(t, []string{"cl.user_coupon", "cl.redemption_log", "cl.channel_quota", "cl.inventory_flow"}, d.SourceTables())

	q, err := LoadMapping([]byte(strings.Replace(legacyYAML, "table: t_writeoff", "table: other.t_writeoff", 1)))
	require.NoError(t, err)
	require.Equal(t, []string{"legacydb.t_user_coupon", "other.t_writeoff", "legacydb.t_coupon_tpl"}, q.SourceTables())

	cq, err := LoadMapping([]byte(legacyYAML + "channel_quota: {table: t_quota, template: tpl_id, channel: ch, quota: quota, claimed: claimed}\n"))
	require.NoError(t, err)
	require.Equal(t, []string{"legacydb.t_user_coupon", "legacydb.t_writeoff", "legacydb.t_quota"}, cq.SourceTables(),
		"with channel quotas the template's budget is not judged: not followed")
}

func TestLoadMappingErrors(t *testing.T) {
	cases := []struct{ name, yaml, want string }{
		{"typo'd key", strings.Replace(legacyYAML, "status: state", "statsu: state", 1), "field statsu not found"},
		{"typo'd top-level key", legacyYAML + "defualt_channel: x\n", "field defualt_channel not found"},
		{"empty", "", "the document is empty"},
		{"missing status column", strings.Replace(legacyYAML, "status: state, ", "", 1), "user_coupon.status is required"},
		{"missing redemption table", strings.Replace(legacyYAML, "table: t_writeoff, ", "", 1), "redemption_log.table is required"},
		{"code mapped twice", strings.Replace(legacyYAML, "EXPIRED: [2]", "EXPIRED: [1]", 1), "status code 1 is mapped twice (EXPIRED and USED)"},
		{"state missing", strings.Replace(legacyYAML, "EXPIRED: [2], ", "", 1), "status.EXPIRED is missing"},
		{"USED missing", strings.Replace(legacyYAML, "USED: [1], ", "", 1),
			"status.USED is missing: AVAILABLE, USED and EXPIRED each need their codes (only RETURNED is optional)"},
		{"RETURNED without codes", strings.Replace(legacyYAML, "RETURNED: [3, 9]", "RETURNED: []", 1), "status.RETURNED lists no code"},
		{"unknown state", strings.Replace(legacyYAML, "EXPIRED: [2]", "EXPIRED: [2], LOST: [5]", 1), `unknown state "LOST"`},
		{"state without codes", strings.Replace(legacyYAML, "EXPIRED: [2]", "EXPIRED: []", 1), "status.EXPIRED lists no code"},
		{"template subscribed", strings.Replace(legacyYAML, "t_coupon_tpl", "t_writeoff", 1), "redemption_log.table and template.table both name legacydb.t_writeoff"},
		{"bad table name", strings.Replace(legacyYAML, "t_coupon_tpl", "a.b.c", 1), `template.table "a.b.c" is not a valid table name`},
		{"incomplete channel_quota", legacyYAML + "channel_quota: {table: cq, template: t}\n", "channel_quota.channel is required"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := LoadMapping([]byte(c.yaml))
			require.ErrorContains(t, err, c.want)
		})
	}
}

// createLegacyTables makes a legacy coupon schema, its own status codes.
func createLegacyTables(t *testing.T, ctx context.Context, exec func(string)) {
	t.Helper()
	exec("CREATE TABLE t_user_coupon (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, uid VARCHAR(32) NOT NULL, " +
		"tpl_id INT NOT NULL, state TINYINT NOT NULL, order_no VARCHAR(64) NULL, expire_time DATETIME NOT NULL)")
	exec("CREATE TABLE t_writeoff (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, coupon_id BIGINT NOT NULL, " +
		"order_no VARCHAR(64) NOT NULL, created DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP)")
	exec("CREATE TABLE t_coupon_tpl (id INT NOT NULL PRIMARY KEY, budget BIGINT NOT NULL)")
}

func TestMappingCheck(t *testing.T) {
	ctx := context.Background()
	db, _, dbName, exec := testDatabase(t)

	// The reference mapping fits the migrated database.
	require.NoError(t, DefaultMapping().Check(ctx, db))

	createLegacyTables(t, ctx, exec)
	legacy := strings.Replace(legacyYAML, "schema: legacydb", "schema: "+dbName, 1)
	m, err := LoadMapping([]byte(legacy))
	require.NoError(t, err)
	require.NoError(t, m.Check(ctx, db))

	// A column that is not there.
	bad, err := LoadMapping([]byte(strings.Replace(legacy, "status: state", "status: status", 1)))
	require.NoError(t, err)
	err = bad.Check(ctx, db)
	require.EqualError(t, err, `mapping: user_coupon.status names column "status" but `+dbName+
		`.t_user_coupon has no such column (it has: id, uid, tpl_id, state, order_no, expire_time)`)

	// A table that is not there, a source table without a primary key.
	exec("CREATE TABLE t_writeoff_nopk (id BIGINT NOT NULL, coupon_id BIGINT NOT NULL, order_no VARCHAR(64) NOT NULL)")
	bad, err = LoadMapping([]byte(strings.NewReplacer("t_writeoff", "t_writeoff_nopk", "t_coupon_tpl", "t_tpl").Replace(legacy)))
	require.NoError(t, err)
	err = bad.Check(ctx, db)
	require.ErrorContains(t, err, "redemption_log.table "+dbName+".t_writeoff_nopk has no PRIMARY KEY")
	require.ErrorContains(t, err, "template.table names "+dbName+".t_tpl but there is no such table ("+dbName+" has: ")

	// No schema in the mapping: the connection's database.
	m.Schema = ""
	require.NoError(t, m.Check(ctx, db))
}

func TestLoadMappingEvidence(t *testing.T) {
	noLog := strings.Replace(legacyYAML, "redemption_log: {table: t_writeoff, id: id, coupon: coupon_id, order: order_no}\n", "", 1)
	orders := "orders: {table: t_order, id: id, template: tpl_id, user: uid}\n"
	ok := []struct {
		name, yaml string
		want       Evidence
		tables     []string
	}{
		{"default is the write-off table", legacyYAML, EvidenceTable,
			[]string{"legacydb.t_user_coupon", "legacydb.t_writeoff", "legacydb.t_coupon_tpl"}},
		{"order columns on the coupon row", noLog + "redemption_evidence: coupon_order\n", EvidenceCouponOrder,
			[]string{"legacydb.t_user_coupon", "legacydb.t_coupon_tpl"}},
		{"order table by (template, user)", noLog + "redemption_evidence: order_table\n" + orders, EvidenceOrderTable,
			[]string{"legacydb.t_user_coupon", "legacydb.t_order", "legacydb.t_coupon_tpl"}},
		{"no evidence", noLog + "redemption_evidence: none\n", EvidenceNone,
			[]string{"legacydb.t_user_coupon", "legacydb.t_coupon_tpl"}},
	}
	for _, c := range ok {
		t.Run(c.name, func(t *testing.T) {
			m, err := LoadMapping([]byte(c.yaml))
			require.NoError(t, err)
			require.Equal(t, c.want, m.RedemptionEvidence())
			require.Equal(t, c.tables, m.SourceTables())
		})
	}
	withLimit := strings.Replace(legacyYAML, "total_quota: budget", "total_quota: budget, per_user_limit: per_limit", 1)
	bad := []struct{ name, yaml, want string }{
		{"unknown evidence", legacyYAML + "redemption_evidence: receipts\n", `redemption_evidence "receipts" is unknown`},
		{"table without a log", noLog, "redemption_log.table is required"},
		{"log with another evidence", legacyYAML + "redemption_evidence: none\n", "redemption_log is mapped but redemption_evidence is none"},
		{"coupon_order without the column", strings.Replace(noLog, "order: order_no, ", "", 1) + "redemption_evidence: coupon_order\n",
			"redemption_evidence coupon_order needs user_coupon.order"},
		{"order_table without orders", noLog + "redemption_evidence: order_table\n", "redemption_evidence order_table needs orders"},
		{"order_table without a user", strings.Replace(noLog, "user: uid, ", "", 1) + "redemption_evidence: order_table\n" + orders,
			"redemption_evidence order_table needs user_coupon.user"},
		{"orders without order_table", legacyYAML + orders, "orders is mapped but redemption_evidence is table; with table evidence orders may only name the evidence table itself"},
		{"orders missing a column", noLog + "redemption_evidence: order_table\norders: {table: t_order, id: id, template: tpl_id}\n",
			"orders.user is required"},
		{"per-user limit without a user", strings.NewReplacer("user: uid, ", "", "total_quota: budget", "total_quota: budget, per_user_limit: per_limit").Replace(legacyYAML),
			"template.per_user_limit needs user_coupon.user"},
		{"claimed users without a limit", legacyYAML + "redis: {claimed_users: 'shop:coupon:{template}:users'}\n",
			"redis.claimed_users: needs template.per_user_limit"},
		{"claimed users without a template", withLimit + "redis: {claimed_users: 'shop:coupon:users'}\n",
			`redis.claimed_users: "shop:coupon:users" has no {template}`},
		{"claimed users over sources", strings.Replace(sourcesYAML, "total_quota: budget", "total_quota: budget, per_user_limit: per_limit", 1) +
			"redis: {claimed_users: 'shop:{template}:users'}\n", "redis.claimed_users: is not compared over sources yet"},
		{"claimed users per channel", withLimit + "redis: {claimed_users: 'shop:{template}:{channel}:users'}\n",
			"redis.claimed_users: \"shop:{template}:{channel}:users\" names {channel}"},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			_, err := LoadMapping([]byte(c.yaml))
			require.ErrorContains(t, err, c.want)
		})
	}

	tl, err := LoadMapping([]byte(legacyYAML + "channel_quota: {table: t_quota, template: tpl_id, channel: ch, quota: quota, claimed: claimed}\n"))
	require.NoError(t, err)
	require.NotContains(t, tl.SourceTables(), "legacydb.t_coupon_tpl")
	tl, err = LoadMapping([]byte(strings.Replace(legacyYAML, "total_quota: budget", "total_quota: budget, end_time: end_at", 1) +
		"channel_quota: {table: t_quota, template: tpl_id, channel: ch, quota: quota, claimed: claimed}\n"))
	require.NoError(t, err)
	require.Contains(t, tl.SourceTables(), "legacydb.t_coupon_tpl", "an end time is followed from the binlog even with channel quotas")
}
