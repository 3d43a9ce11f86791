package main

import (
	"database/sql"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/internal/testenv"
)

// shopMappingYAML maps a shop like the common open-source ones: codes 0
// unused / 1 used / 2 expired and a nullable status, the claim channel in
// get_type, a template with name, budget, remaining count, per-user limit
// and end time. SCHEMA stands for the shop's schema.
const shopMappingYAML = `
schema: SCHEMA
user_coupon: {table: t_user_coupon, id: id, template: tpl_id, channel: get_type, status: use_status, order: order_no, user: uid}
status: {AVAILABLE: [0], USED: [1], EXPIRED: [2]}
redemption_log: {table: t_writeoff, id: id, coupon: coupon_id, order: order_no}
template: {table: t_coupon_tpl, id: id, total_quota: budget, name: name, remaining: count, per_user_limit: per_limit, end_time: end_time}
default_channel: "0"
channel_labels: {"0": back office, "1": self-service}
`

// shop is a legacy shop's schema beside couponlink's test database.
type shop struct {
	t       *testing.T
	db      *sql.DB
	schema  string
	mapping string // the mapping file
}

func newShop(t *testing.T, db *sql.DB) *shop {
	s := &shop{t: t, db: db, schema: "shop_" + strings.TrimSuffix(testenv.KeyPrefix(t), ":")}
	s.exec("CREATE DATABASE `" + s.schema + "`")
	t.Cleanup(func() { _, _ = db.Exec("DROP DATABASE IF EXISTS `" + s.schema + "`") })
	s.exec(`CREATE TABLE ` + s.tq("t_coupon_tpl") + ` (id BIGINT NOT NULL PRIMARY KEY, name VARCHAR(64) NOT NULL,
		budget INT NULL, count INT NULL, per_limit INT NULL, end_time DATETIME NULL)`)
	s.exec(`CREATE TABLE ` + s.tq("t_user_coupon") + ` (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, tpl_id BIGINT NOT NULL,
		get_type TINYINT NULL, use_status TINYINT NULL, order_no VARCHAR(64) NULL, uid VARCHAR(64) NOT NULL, KEY (tpl_id, uid))`)
	s.exec(`CREATE TABLE ` + s.tq("t_writeoff") + ` (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, coupon_id BIGINT NOT NULL,
		order_no VARCHAR(64) NOT NULL, KEY (coupon_id))`)
	s.mapping = filepath.Join(t.TempDir(), "shop.yaml")
	require.NoError(t, os.WriteFile(s.mapping, []byte(strings.ReplaceAll(shopMappingYAML, "SCHEMA", s.schema)), 0o600))
	return s
}

func (s *shop) tq(table string) string { return "`" + s.schema + "`.`" + table + "`" }

func (s *shop) exec(q string, args ...any) {
	s.t.Helper()
	_, err := s.db.Exec(q, args...)
	require.NoError(s.t, err, q)
}

// claim inserts a coupon of the template as the shop does and returns its id.
func (s *shop) claim(tpl int64, channel any, state any, user string) int64 {
	s.t.Helper()
	res, err := s.db.Exec(`INSERT INTO `+s.tq("t_user_coupon")+` (tpl_id, get_type, use_status, uid) VALUES (?, ?, ?, ?)`, tpl, channel, state, user)
	require.NoError(s.t, err)
	id, err := res.LastInsertId()
	require.NoError(s.t, err)
	return id
}

// use marks a coupon used with its write-off row, in one transaction.
func (s *shop) use(id int64, order string) {
	s.t.Helper()
	tx, err := s.db.Begin()
	require.NoError(s.t, err)
	_, err = tx.Exec(`UPDATE `+s.tq("t_user_coupon")+` SET use_status = 1, order_no = ? WHERE id = ?`, order, id)
	require.NoError(s.t, err)
	_, err = tx.Exec(`INSERT INTO `+s.tq("t_writeoff")+` (coupon_id, order_no) VALUES (?, ?)`, id, order)
	require.NoError(s.t, err)
	require.NoError(s.t, tx.Commit())
}

// statusJSONOf runs `couponlink status -json` with args.
func statusJSONOf(t *testing.T, args ...string) map[string]any {
	t.Helper()
	code, out, errs := cli(t, append([]string{"status", "-json"}, args...)...)
	require.Equal(t, 0, code, errs)
	var v map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &v), out)
	return v
}

// The status of a legacy shop, its cdc run with the mapping: each
// template's name, budget, the shop's remaining count, claimable (budget −
// taken; 0 once the campaign has ended, whose AVAILABLE coupons show as
// expired, saying so), the channels' labels, the undecodable rows and the
// latest anomalies in the shop's codes; `status -template` shows a legacy
// template; the cdc's /status answers what `status -json` prints.
func TestStatusOfALegacyShop(t *testing.T) {
	db, dsn := testenv.MySQL(t)
	s := newShop(t, db)
	s.exec(`INSERT INTO ` + s.tq("t_coupon_tpl") + ` VALUES (1, 'spring-10off', 10, 5, 1, '2099-01-01 00:00:00'),
		(2, 'winter', 5, 2, NULL, '2000-01-01 00:00:00')`)
	// before the cdc's first start: counted by its bootstrap
	s.claim(1, 0, 0, "u1")
	s.claim(1, 0, 0, "u2")
	s.use(s.claim(1, 1, 0, "u3"), "o3")
	s.claim(2, 1, 0, "w1")
	s.claim(2, 1, 0, "w2")
	s.use(s.claim(2, 1, 0, "w3"), "w3")

	c := startCDC(t, "-dsn", dsn, "-redis", "", "-mapping", s.mapping)
	s.claim(1, 1, 0, "u4")
	late := s.claim(1, 0, 0, "u5")
	s.exec(`UPDATE `+s.tq("t_user_coupon")+` SET use_status = 2 WHERE id = ?`, late)
	s.exec(`UPDATE `+s.tq("t_user_coupon")+` SET use_status = 0 WHERE id = ?`, late) // EXPIRED -> AVAILABLE
	s.claim(1, 0, nil, "u6")                                                         // undecodable
	var st map[string]any
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := json.Marshal(st)
			t.Logf("status: %s\ncdc log:\n%s", b, c.logs.String())
		}
	})
	cdctest.WaitFor(t, 30*time.Second, "status shows the anomalies", func() bool {
		st = statusJSONOf(t, "-dsn", dsn, "-mapping", s.mapping)
		a, _ := st["anomalies"].(map[string]any)
		return a["illegal_transition"] == 1.0 && a["undecodable_row"] == 1.0
	})

	tpls, err := json.Marshal(st["templates"])
	require.NoError(t, err)
	require.JSONEq(t, `[
		{"template": 1, "found": true, "name": "spring-10off", "budget": 10, "remaining": 5, "claimable": 5, "per_user_limit": 1,
		 "end_time": "2099-01-01T00:00:00Z", "ended": false, "held": 4, "used": 1, "expired": 0, "returned": 0, "released": 0, "frozen": 0,
		 "expired_by_end_time": 0, "channels": [
			{"channel": "0", "label": "back office", "held": 3, "used": 0, "expired": 0, "returned": 0, "released": 0, "frozen": 0},
			{"channel": "1", "label": "self-service", "held": 1, "used": 1, "expired": 0, "returned": 0, "released": 0, "frozen": 0}]},
		{"template": 2, "found": true, "name": "winter", "budget": 5, "remaining": 2, "claimable": 0,
		 "end_time": "2000-01-01T00:00:00Z", "ended": true, "held": 0, "used": 1, "expired": 2, "returned": 0, "released": 0, "frozen": 2,
		 "expired_by_end_time": 2, "channels": [
			{"channel": "1", "label": "self-service", "held": 0, "used": 1, "expired": 2, "returned": 0, "released": 0, "frozen": 2,
			 "expired_by_end_time": 2}]}]`, string(tpls))
	recent, _ := st["recent_anomalies"].([]any)
	var changes []any
	for _, a := range recent {
		changes = append(changes, a.(map[string]any)["change"])
	}
	assert.Contains(t, changes, "EXPIRED(2) -> AVAILABLE(0)")

	// the same from the cdc's ops server
	res, err := http.Get(c.url + "/status")
	require.NoError(t, err)
	var served map[string]any
	require.NoError(t, json.NewDecoder(res.Body).Decode(&served))
	require.NoError(t, res.Body.Close())
	assert.Equal(t, st["templates"], served["templates"])

	code, out, errs := cli(t, "status", "-dsn", dsn, "-mapping", s.mapping)
	require.Equal(t, 0, code, errs)
	assert.Contains(t, out, "\nlast reconcile  none yet\n")
	// a pass that corrected a stock key and 3 claimed-set members (2 listed, 1 unlisted row of 1)
	_, err = db.Exec(`INSERT INTO reconcile_task (id, started_at, status, summary) VALUES (7, '2026-01-02 03:04:05', 'auto_fixed', 'x')`)
	require.NoError(t, err)
	_, err = db.Exec(`INSERT INTO correction_log (task_id, store, target, old_value, new_value, reason, mode, actor) VALUES
		(7, 'redis', 'k', 5, 3, 'r', 'auto', 'reconciler'), (7, 'claimed_users', 'k "a"', 0, 1, 'r', 'auto', 'reconciler'),
		(7, 'claimed_users', 'k "b"', 1, 0, 'r', 'auto', 'reconciler'), (7, 'claimed_users', 'k (unlisted, added)', 0, 1, 'r', 'auto', 'reconciler')`)
	require.NoError(t, err)
	code, out, errs = cli(t, "status", "-dsn", dsn, "-mapping", s.mapping)
	require.Equal(t, 0, code, errs)
	assert.Contains(t, out, "\nlast reconcile  task 7 auto_fixed at 2026-01-02T03:04:05Z; corrected: claimed_users 3, redis 1\n")
	assert.Regexp(t, `\n  undecodable_row +1 \(rows the mapping cannot decode`, out)
	assert.Regexp(t, `\n  \S+ +illegal_transition +coupon \d+ template 1 +EXPIRED\(2\) -> AVAILABLE\(0\)\n`, out)
	for _, want := range []string{
		"0 (back office)", "1 (self-service)",
		"template 2: its 2 AVAILABLE coupons are counted as expired here: the campaign's end_time has passed, and the shop never writes EXPIRED",
		"2000-01-01T00:00:00Z (ended)",
	} {
		assert.Contains(t, out, want)
	}
	line := func(name string) []string {
		for _, l := range strings.Split(out, "\n") {
			if f := strings.Fields(l); len(f) > 1 && f[1] == name {
				return f
			}
		}
		t.Fatalf("no line of %s in:\n%s", name, out)
		return nil
	}
	// template, name, budget, remaining, claimable, held, used, expired, returned, released, frozen, per-user limit, end time
	assert.Equal(t, []string{"1", "spring-10off", "10", "5", "5", "4", "1", "0", "0", "0", "0", "1", "2099-01-01T00:00:00Z"}, line("spring-10off"))
	assert.Equal(t, []string{"2", "winter", "5", "2", "0", "0", "1", "2", "(2", "by", "time)", "0", "0", "2", "-",
		"2000-01-01T00:00:00Z", "(ended)"}, line("winter"))

	// one legacy template
	code, out, errs = cli(t, "status", "-dsn", dsn, "-mapping", s.mapping, "-template", "2")
	require.Equal(t, 0, code, errs)
	assert.Contains(t, out, `template 2 "winter"`)
	assert.Equal(t, []string{"budget", "5"}, fieldLine(t, out, "budget"))
	assert.Equal(t, []string{"remaining", "2"}, fieldLine(t, out, "remaining")[:2])
	assert.Equal(t, []string{"claimable", "0"}, fieldLine(t, out, "claimable")[:2])
	assert.Contains(t, strings.Join(fieldLine(t, out, "end"), " "), "ended): its 2 AVAILABLE coupons are counted as expired here")
	assert.Equal(t, []string{"1", "(self-service)", "-", "-", "0", "1", "2", "(2", "by", "time)", "0", "0", "2"}, fieldLine(t, out, "1"))
	code, out, errs = cli(t, "status", "-dsn", dsn, "-mapping", s.mapping, "-template", "2", "-json")
	require.Equal(t, 0, code, errs)
	var one any
	require.NoError(t, json.Unmarshal([]byte(out), &one))
	assert.Equal(t, st["templates"].([]any)[1], one)
	code, _, errs = cli(t, "status", "-dsn", dsn, "-mapping", s.mapping, "-template", "99")
	assert.Equal(t, 1, code)
	assert.Equal(t, "couponlink status: template 99 does not exist\n", errs)
	require.Equal(t, 0, c.stop(), c.logs.String())
}
