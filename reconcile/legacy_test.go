package reconcile_test

import (
	"database/sql"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/reconcile"
)

// legacyYAML maps a legacy schema: its own names and codes, no channels,
// a template table with its own issued/used counts.
const legacyYAML = `
schema: %s
user_coupon: {table: t_user_coupon, id: id, template: tpl_id, status: state, order: order_no, user: uid, expires_at: expire_time}
status: {AVAILABLE: [0], USED: [1], EXPIRED: [2], RETURNED: [3, 9]}
redemption_log: {table: t_writeoff, id: id, coupon: coupon_id, order: order_no}
template: {table: t_coupon_tpl, id: id, total_quota: budget, issued: issued, used: used}
default_channel: legacy
`

// legacy is a test database holding a legacy coupon schema beside
// couponlink's own tables, and its mapping.
type legacy struct {
	*env
	m *canal.Mapping
}

// newLegacy creates the legacy tables; with redisPattern the mapping names
// the legacy front end's stock key per template (corrector mode).
func newLegacy(t *testing.T, redisPattern string) *legacy {
	t.Helper()
	e := newEnv(t)
	e.exec("CREATE TABLE t_user_coupon (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, uid VARCHAR(32) NOT NULL, " +
		"tpl_id INT NOT NULL, state TINYINT NOT NULL, order_no VARCHAR(64) NULL, expire_time DATETIME NOT NULL, KEY (tpl_id, state))")
	e.exec("CREATE TABLE t_writeoff (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, coupon_id BIGINT NOT NULL, " +
		"order_no VARCHAR(64) NOT NULL, created DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP)")
	e.exec("CREATE TABLE t_coupon_tpl (id INT NOT NULL PRIMARY KEY, budget BIGINT NOT NULL, " +
		"issued BIGINT NOT NULL DEFAULT 0, used BIGINT NOT NULL DEFAULT 0)")
	y := fmt.Sprintf(legacyYAML, e.DBName)
	if redisPattern != "" {
		y += fmt.Sprintf("redis: {template_stock: %q}\n", e.Keys.Prefix+redisPattern)
	}
	m, err := canal.LoadMapping([]byte(y))
	require.NoError(t, err)
	require.NoError(t, m.Check(e.Ctx, e.DB))
	return &legacy{env: e, m: m}
}

func (l *legacy) reconciler(mut ...func(*reconcile.Config)) *reconcile.Reconciler {
	r, _ := l.env.reconciler(append([]func(*reconcile.Config){func(c *reconcile.Config) { c.Mapping = l.m }}, mut...)...)
	return r
}

// followedLegacy is newLegacy with a template per budget (ids 1, 2, … in
// order) and the cdc following the shop.
func followedLegacy(t *testing.T, redisPattern string, budgets ...int64) *legacy {
	t.Helper()
	l := newLegacy(t, redisPattern)
	for i, budget := range budgets {
		l.newTemplate(int64(i+1), budget)
	}
	l.StartCDC(l.m)
	return l
}

func (l *legacy) newTemplate(id, budget int64) {
	l.exec(`INSERT INTO t_coupon_tpl (id, budget) VALUES (?, ?)`, id, budget)
}

// claim is the legacy application's claim: the coupon row and its own
// issued count, in one transaction.
func (l *legacy) claim(tpl int64, n int) []int64 {
	l.T.Helper()
	var ids []int64
	for range n {
		l.tx(func(tx *sql.Tx) {
			res, err := tx.Exec(`INSERT INTO t_user_coupon (uid, tpl_id, state, expire_time) VALUES (?, ?, 0, NOW() + INTERVAL 1 DAY)`,
				fmt.Sprint("u", l.seq.Add(1)), tpl)
			require.NoError(l.T, err)
			id, err := res.LastInsertId()
			require.NoError(l.T, err)
			ids = append(ids, id)
			_, err = tx.Exec(`UPDATE t_coupon_tpl SET issued = issued + 1 WHERE id = ?`, tpl)
			require.NoError(l.T, err)
		})
	}
	return ids
}

// redeem is the legacy redemption: status, write-off row and used count.
func (l *legacy) redeem(tpl, id int64) {
	l.T.Helper()
	l.tx(func(tx *sql.Tx) {
		_, err := tx.Exec(`UPDATE t_user_coupon SET state = 1, order_no = ? WHERE id = ?`, fmt.Sprint("o", id), id)
		require.NoError(l.T, err)
		_, err = tx.Exec(`INSERT INTO t_writeoff (coupon_id, order_no) VALUES (?, ?)`, id, fmt.Sprint("o", id))
		require.NoError(l.T, err)
		_, err = tx.Exec(`UPDATE t_coupon_tpl SET used = used + 1 WHERE id = ?`, tpl)
		require.NoError(l.T, err)
	})
}

func (l *legacy) tx(fn func(*sql.Tx)) {
	l.T.Helper()
	tx, err := l.DB.BeginTx(l.Ctx, nil)
	require.NoError(l.T, err)
	fn(tx)
	require.NoError(l.T, tx.Commit())
}

// own reads the legacy template table: budget, issued, used.
func (l *legacy) own() map[int64][3]int64 {
	l.T.Helper()
	return l.Triples(`SELECT id, budget, issued, used FROM t_coupon_tpl`)
}

func (l *legacy) key(tpl int64) string { return fmt.Sprintf("%slg:stock:%d", l.Keys.Prefix, tpl) }

// A legacy template's own counts off are flagged for a person; couponlink
// never writes the legacy table. Over-issue of a budget is flagged too.
func TestLegacyCountersOffNeedReview(t *testing.T) {
	t.Parallel()
	l := followedLegacy(t, "", 100, 50, 2)
	for _, id := range l.claim(1, 8)[:3] {
		l.redeem(1, id)
	}
	l.claim(2, 4)
	l.claim(3, 3) // one more than the budget
	l.WaitCheckpoint()

	r := l.reconciler()
	rep := l.pass(r)
	require.True(t, rep.CountersCompared, rep.Note)
	require.Equal(t, []string{"quota 3/over_issue 2 3 needs_review"}, diffs(rep.Differences), "the legacy counts agree before the drift")

	l.exec(`UPDATE t_coupon_tpl SET issued = issued + 4 WHERE id = 1`)
	l.exec(`UPDATE t_coupon_tpl SET used = 2 WHERE id = 2`)
	before := l.own()
	require.Equal(t, map[int64][3]int64{1: {100, 12, 3}, 2: {50, 4, 2}, 3: {2, 3, 0}}, before)
	l.WaitCheckpoint()

	rep = l.pass(r)
	require.Equal(t, "needs_review", rep.Status)
	require.True(t, rep.CountersCompared, rep.Note)
	require.Equal(t, []string{
		"legacy 1/issued 8 12 needs_review",
		"legacy 2/used 0 2 needs_review",
		"quota 3/over_issue 2 3 needs_review",
	}, diffs(rep.Differences), "the cdc's own counters equal the truth: no counter difference")
	require.Contains(t, find(t, rep.Differences, "legacy", "1/issued").Reason, "never writes a legacy table")
	require.Empty(t, l.corrections())
	require.Equal(t, before, l.own(), "the legacy table is untouched")
}

// Corrector mode: a legacy front end's stock key (named by the mapping)
// that is off, or missing, is set by compare-and-set when quiet:
// budget − (held + used + frozen).
func TestLegacyRedisKeyOffIsFixedWhenQuiet(t *testing.T) {
	t.Parallel()
	l := followedLegacy(t, "lg:stock:{template}", 100, 50)
	for _, id := range l.claim(1, 8)[:3] {
		l.redeem(1, id)
	}
	l.claim(2, 4)
	l.WaitCheckpoint()
	require.NoError(t, l.RDB.Set(l.Ctx, l.key(1), 99, 0).Err()) // 92 true
	// key 2 missing: 46 true

	r := l.reconciler()
	rep := l.pass(r)
	require.Equal(t, "auto_fixed", rep.Status)
	require.Equal(t, []string{
		"redis " + l.key(1) + " 92 99 fixed",
		"redis " + l.key(2) + " 46 nil fixed",
	}, diffs(rep.Differences))
	require.ElementsMatch(t, []string{
		"redis " + l.key(1) + " 99->92",
		"redis " + l.key(2) + " nil->46",
	}, l.correctionsOf(rep.TaskID))
	require.Equal(t, "92", str(l.redisGet(l.key(1))))
	require.Equal(t, "46", str(l.redisGet(l.key(2))))
	require.Equal(t, map[int64][3]int64{1: {100, 8, 3}, 2: {50, 4, 0}}, l.own())

	// the front end claims (DECR and row), and a refund (USED → RETURNED, code 9) frees nothing: still right
	require.NoError(t, l.RDB.Decr(l.Ctx, l.key(2)).Err())
	l.claim(2, 1)
	l.tx(func(tx *sql.Tx) {
		_, err := tx.Exec(`UPDATE t_user_coupon SET state = 9 WHERE tpl_id = 1 AND state = 1 LIMIT 1`)
		require.NoError(t, err)
		_, err = tx.Exec(`UPDATE t_coupon_tpl SET used = used - 1 WHERE id = 1`)
		require.NoError(t, err)
	})
	l.WaitCheckpoint()
	rep = l.pass(r)
	require.Equal(t, "clean", rep.Status, "%v", diffs(rep.Differences))
}
