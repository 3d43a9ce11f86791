package canal

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/internal/testenv"
)

// testDatabase is a fresh migrated database (testenv.MySQL), its name, and
// a statement runner on it.
func testDatabase(t *testing.T) (db *sql.DB, dsn, name string, exec func(q string)) {
	t.Helper()
	db, dsn = testenv.MySQL(t)
	require.NoError(t, db.QueryRow("SELECT DATABASE()").Scan(&name))
	return db, dsn, name, func(q string) {
		t.Helper()
		_, err := db.Exec(q)
		require.NoError(t, err, q)
	}
}

// states is the mapping's checks as name → state.
func states(m *Mapping) map[string]string {
	out := map[string]string{}
	for _, c := range m.Checks() {
		out[c.Name] = c.State()
	}
	return out
}

// Which checks a mapping turns on follows what the shop has: the evidence
// of a use, the template's per-user limit, end time and remaining stock.
func TestMappingChecksPerEvidence(t *testing.T) {
	noLog := strings.Replace(legacyYAML, "redemption_log: {table: t_writeoff, id: id, coupon: coupon_id, order: order_no}\n", "", 1)
	orders := "orders: {table: t_order, id: id, template: tpl_id, user: uid}\n"
	always := map[string]string{"illegal_transition": "on", "deleted_coupon": "on", "undecodable_row": "on", "over_issue": "on",
		"per_user_limit_exceeded": "off", "used_after_expiry": "on", "stock_column_drift": "off", "legacy_template_counts": "off",
		"redis_stock_keys": "off", "redis_claimed_users": "off", "claimed_off_shelf": "off"} // used_after_expiry: user_coupon.expires_at is mapped
	with := func(kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range always {
			out[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	cases := []struct {
		name, yaml string
		want       map[string]string
	}{
		{"write-off table", legacyYAML, with("used_without_redemption", "on", "duplicate_redemption", "on", "double_spend", "off")},
		{"order on the coupon row", noLog + "redemption_evidence: coupon_order\n",
			with("used_without_redemption", "on", "duplicate_redemption", "off", "double_spend", "on")},
		{"order table", noLog + "redemption_evidence: order_table\n" + orders,
			with("used_without_redemption", "on", "duplicate_redemption", "off", "double_spend", "on")},
		{"no evidence", noLog + "redemption_evidence: none\n",
			with("used_without_redemption", "off", "duplicate_redemption", "off", "double_spend", "off")},
		{"a template with everything", strings.Replace(legacyYAML, "total_quota: budget",
			"total_quota: budget, per_user_limit: lim, end_time: end_at, remaining: cnt, issued: issued", 1) +
			"redis: {template_stock: 'stock:{template}', claimed_users: 'shop:coupon:{template}:users'}\n",
			with("used_without_redemption", "on", "duplicate_redemption", "on", "double_spend", "off", "per_user_limit_exceeded", "on",
				"used_after_expiry", "on", "stock_column_drift", "on (reconciler)", "legacy_template_counts", "on (reconciler)",
				"redis_stock_keys", "on (reconciler)", "redis_claimed_users", "on (reconciler)")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := LoadMapping([]byte(c.yaml))
			require.NoError(t, err)
			require.Equal(t, c.want, states(m))
		})
	}

	m, err := LoadMapping([]byte(noLog + "redemption_evidence: none\n"))
	require.NoError(t, err)
	said := map[string]string{}
	for _, c := range m.Checks() {
		said[c.Name] = c.String()
	}
	require.Equal(t, "duplicate_redemption: off — redemption_evidence is none", said["duplicate_redemption"])
	require.Equal(t, "per_user_limit_exceeded: off — no template.per_user_limit", said["per_user_limit_exceeded"])
	require.Equal(t, "over_issue: on — against template budget (legacydb.t_coupon_tpl.budget), followed from the binlog", said["over_issue"])
	m, err = LoadMapping([]byte(strings.Replace(legacyYAML, "total_quota: budget", "total_quota: budget, remaining: cnt", 1)))
	require.NoError(t, err)
	for _, c := range m.Checks() {
		if c.Name == "stock_column_drift" {
			require.Equal(t, "stock_column_drift: on (reconciler) — legacydb.t_coupon_tpl.cnt against budget − taken", c.String())
		}
	}
	d := states(DefaultMapping())
	require.Equal(t, []string{"on", "on", "off"}, []string{d["over_issue"], d["duplicate_redemption"], d["double_spend"]})
}

// inspectShop is a shop's schema for Inspect: the template's columns as a
// real shop has them (nullable), a nullable status, no index on the
// coupons' template, and an order table.
func inspectShop(t *testing.T, exec func(string)) {
	for _, q := range []string{
		`CREATE TABLE s_tpl (id BIGINT NOT NULL PRIMARY KEY, name VARCHAR(64) NULL, budget INT NULL, cnt INT NULL, lim INT NULL,
			end_at DATETIME NULL)`,
		`CREATE TABLE s_coupon (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, tpl BIGINT NOT NULL, member BIGINT NOT NULL,
			get_type INT NULL, use_status INT NULL, order_sn VARCHAR(64) NULL)`,
		`CREATE TABLE s_order (id BIGINT NOT NULL PRIMARY KEY, tpl BIGINT NULL, member BIGINT NOT NULL, order_sn VARCHAR(64) NOT NULL)`,
	} {
		exec(q)
	}
}

const inspectYAML = `
user_coupon: {table: s_coupon, id: id, template: tpl, channel: get_type, status: use_status, order: order_sn, user: member}
status: {AVAILABLE: [0], USED: [1], EXPIRED: [2]}
redemption_evidence: order_table
orders: {table: s_order, id: id, template: tpl, user: member, order: order_sn}
template: {table: s_tpl, id: id, total_quota: budget, name: name, remaining: cnt, per_user_limit: lim, end_time: end_at}
default_channel: "0"
`

// Against a live schema: the roles and their types, a nullable status
// and budget as warnings, the indexes the checks need as warnings with
// the statement to add them (one index for two needs), and a column of
// the wrong type as an error.
func TestMappingInspect(t *testing.T) {
	ctx := context.Background()
	db, _, dbName, exec := testDatabase(t)
	inspectShop(t, exec)
	m, err := LoadMapping([]byte(inspectYAML))
	require.NoError(t, err)
	r, err := m.Inspect(ctx, db)
	require.NoError(t, err)
	require.True(t, r.OK(), "%v", r.Errors)
	require.Equal(t, EvidenceOrderTable, r.Evidence)
	roles := map[string]Role{}
	for _, role := range r.Roles {
		roles[role.Role] = role
	}
	require.Equal(t, Role{Role: "user_coupon.status", Table: dbName + ".s_coupon", Column: "use_status", Type: "int(11)", Nullable: true},
		roles["user_coupon.status"])
	require.Equal(t, dbName+".s_tpl.end_at", roles["template.end_time"].Where())
	require.Equal(t, "datetime", roles["template.end_time"].Type)
	require.Len(t, r.Roles, 16)
	require.ElementsMatch(t, []string{
		"user_coupon.status (" + dbName + ".s_coupon.use_status) allows NULL: undecodable rows are possible: a row with NULL there is " +
			"an undecodable_row anomaly, counted nowhere (-strict stops the cdc instead)",
		"user_coupon.table " + dbName + ".s_coupon has no index on (tpl, member): the reconciler and the cdc count a template's coupons, " +
			"and per-user checks count a user's coupons of a template; add one: CREATE INDEX `idx_couponlink_tpl_member` ON `" + dbName +
			"`.`s_coupon` (`tpl`, `member`);",
		"orders.template (" + dbName + ".s_order.tpl) allows NULL: an order with NULL there is matched to no coupon",
		"orders.table " + dbName + ".s_order has no index on (tpl, member): the order checks count the orders of a (template, user); " +
			"add one: CREATE INDEX `idx_couponlink_tpl_member` ON `" + dbName + "`.`s_order` (`tpl`, `member`);",
		"template.total_quota (" + dbName + ".s_tpl.budget) allows NULL: a template with a NULL budget is not judged for over-issue until it has one",
	}, r.Warnings)

	// the indexes added (the order table's the other way round), the status made NOT NULL: no warnings of them
	exec("CREATE INDEX idx_couponlink_tpl_member ON s_coupon (tpl, member)")
	exec("CREATE INDEX by_member ON s_order (member, tpl, order_sn)")
	exec("ALTER TABLE s_coupon MODIFY use_status INT NOT NULL")
	r, err = m.Inspect(ctx, db)
	require.NoError(t, err)
	require.Len(t, r.Warnings, 2, "%v", r.Warnings)

	// wrong types are errors: a text status, a date-less end time
	exec("ALTER TABLE s_coupon MODIFY use_status VARCHAR(8) NOT NULL")
	exec("ALTER TABLE s_tpl MODIFY end_at BIGINT NULL")
	exec("ALTER TABLE s_tpl MODIFY budget DECIMAL(10,2) NULL")
	r, err = m.Inspect(ctx, db)
	require.NoError(t, err)
	require.False(t, r.OK())
	require.ElementsMatch(t, []string{
		"mapping: user_coupon.status names " + dbName + ".s_coupon.use_status, a varchar(8) column; it must be " + classInt,
		"mapping: template.total_quota names " + dbName + ".s_tpl.budget, a decimal(10,2) column; it must be " + classInt,
		"mapping: template.end_time names " + dbName + ".s_tpl.end_at, a bigint(20) column; it must be " + classTime,
	}, r.Errors)

	// the same BIGINT, said to hold unix seconds, is an end time; a DATETIME said so is not
	secs, err := LoadMapping([]byte(strings.Replace(inspectYAML, "end_time: end_at", "end_time: {column: end_at, unit: unix_seconds}", 1)))
	require.NoError(t, err)
	require.Equal(t, TimeColumn{Column: "end_at", Unit: UnixSeconds}, secs.Template.EndTime)
	r, err = secs.Inspect(ctx, db)
	require.NoError(t, err)
	require.Len(t, r.Errors, 2, "%v", r.Errors) // the status and the budget only
	exec("ALTER TABLE s_tpl MODIFY end_at DATETIME NULL")
	r, err = secs.Inspect(ctx, db)
	require.NoError(t, err)
	require.Contains(t, r.Errors, "mapping: template.end_time names "+dbName+".s_tpl.end_at, a datetime column; it must be "+classInt)
	exec("ALTER TABLE s_tpl MODIFY end_at BIGINT NULL")
	_, err = LoadMapping([]byte(strings.Replace(inspectYAML, "end_time: end_at", "end_time: {column: end_at, unit: hours}", 1)))
	require.ErrorContains(t, err, `template.end_time: unit "hours" is not unix_seconds or unix_millis`)

	// what Check refuses is in the errors too, one by one
	bad, err := LoadMapping([]byte(strings.NewReplacer("table: s_order", "table: s_nope", "status: use_status", "status: st").Replace(inspectYAML)))
	require.NoError(t, err)
	r, err = bad.Inspect(ctx, db)
	require.NoError(t, err)
	require.Len(t, r.Errors, 4, "%v", r.Errors) // the missing column and table, the budget's and end time's types
	require.Contains(t, r.Errors[0], `user_coupon.status names column "st"`)
	require.Contains(t, r.Errors[1], "orders.table names "+dbName+".s_nope but there is no such table")
}

// flatten lists each error of nested joins.
func TestFlattenJoinedErrors(t *testing.T) {
	a, b, c := sql.ErrNoRows, sql.ErrConnDone, sql.ErrTxDone
	require.Equal(t, []string{a.Error(), b.Error(), c.Error()}, flatten(errors.Join(a, errors.Join(b, c))))
	require.Equal(t, []string{a.Error()}, flatten(a))
}

// mapping check shows the campaign and coupon keys of shelf.go and
// timezone.go: the columns with their types, the zone of the DATETIMEs
// and the checks they turn on.
func TestMappingInspectShelfAndZone(t *testing.T) {
	ctx := context.Background()
	db, _, dbName, exec := testDatabase(t)
	exec(`CREATE TABLE t_tpl (id BIGINT NOT NULL PRIMARY KEY, budget INT NOT NULL, end_at DATETIME NULL, state TINYINT NOT NULL, deleted TINYINT NOT NULL)`)
	exec(`CREATE TABLE t_uc (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, tpl BIGINT NOT NULL, uid VARCHAR(32) NOT NULL, st TINYINT NOT NULL,
		expire_time DATETIME NULL, KEY (tpl, uid))`)
	m, err := LoadMapping([]byte(strings.Replace(shopYAML, "schema: shop", "schema: "+dbName, 1)))
	require.NoError(t, err)
	r, err := m.Inspect(ctx, db)
	require.NoError(t, err)
	require.True(t, r.OK(), "%v", r.Errors)
	require.Equal(t, "Asia/Shanghai", r.TimeZone)
	roles := map[string]string{}
	for _, role := range r.Roles {
		roles[role.Role] = role.Where() + " " + role.Type
	}
	require.Equal(t, dbName+".t_tpl.state tinyint(4)", roles["template.status"])
	require.Equal(t, dbName+".t_tpl.deleted tinyint(4)", roles["template.deleted"])
	require.Equal(t, dbName+".t_uc.expire_time datetime", roles["user_coupon.expires_at"])
	said := map[string]string{}
	for _, c := range r.Checks {
		said[c.Name] = c.String()
	}
	require.Equal(t, fmt.Sprintf("claimed_off_shelf: on — a coupon claimed while its campaign is off the shelf: %[1]s.t_tpl.state in [0 2] or soft-deleted (%[1]s.t_tpl.deleted in [1])", dbName), said["claimed_off_shelf"])
	require.Equal(t, fmt.Sprintf("over_issue: on — against template budget (%s.t_tpl.budget), followed from the binlog; a budget in [0] is unlimited, never over-issued", dbName), said["over_issue"])
	require.Equal(t, fmt.Sprintf("used_after_expiry: on — a coupon used or restored after %[1]s.t_tpl.end_at or %[1]s.t_uc.expire_time (a DATETIME read in Asia/Shanghai)", dbName), said["used_after_expiry"])

	sys, err := LoadMapping([]byte(strings.Replace(strings.Replace(shopYAML, "schema: shop", "schema: "+dbName, 1), "time_zone: Asia/Shanghai", "time_zone: SYSTEM", 1)))
	require.NoError(t, err)
	r, err = sys.Inspect(ctx, db)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(r.TimeZone, "SYSTEM: "), r.TimeZone)
}

// mapping check finds every column of a state of several columns by its
// place (template.deleted[1]), wants each an integer, and reports a
// missing one.
func TestMappingInspectAnyOf(t *testing.T) {
	ctx := context.Background()
	db, _, dbName, exec := testDatabase(t)
	exec(`CREATE TABLE t_tpl (id BIGINT NOT NULL PRIMARY KEY, budget INT NOT NULL, end_at DATETIME NULL, state TINYINT NOT NULL,
		deleted TINYINT NOT NULL, hidden VARCHAR(4) NULL)`)
	exec(`CREATE TABLE t_uc (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, tpl BIGINT NOT NULL, uid VARCHAR(32) NOT NULL, st TINYINT NOT NULL,
		expire_time DATETIME NULL, KEY (tpl, uid))`)
	m, err := LoadMapping([]byte(strings.NewReplacer("schema: shop", "schema: "+dbName,
		"deleted: {column: deleted, values: [1]}", "deleted: [{column: deleted, values: [1]}, {column: hidden, values: [1]}]").Replace(shopYAML)))
	require.NoError(t, err)
	r, err := m.Inspect(ctx, db)
	require.NoError(t, err)
	roles := map[string]string{}
	for _, role := range r.Roles {
		roles[role.Role] = role.Where() + " " + role.Type
	}
	require.Equal(t, dbName+".t_tpl.deleted tinyint(4)", roles["template.deleted[0]"])
	require.Equal(t, dbName+".t_tpl.hidden varchar(4)", roles["template.deleted[1]"])
	require.Equal(t, []string{"mapping: template.deleted[1] names " + dbName + ".t_tpl.hidden, a varchar(4) column; it must be " + classInt}, r.Errors)

	exec("ALTER TABLE t_tpl MODIFY hidden TINYINT NULL")
	r, err = m.Inspect(ctx, db)
	require.NoError(t, err)
	require.True(t, r.OK(), "%v", r.Errors)

	exec("ALTER TABLE t_tpl DROP COLUMN hidden")
	require.ErrorContains(t, m.Check(ctx, db), `template.deleted[1] names column "hidden"`)
}
