package sink_test

import (
	"database/sql"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/internal/cdcenv"
	"github.com/couponlink/couponlink/inventory"
	"github.com/couponlink/couponlink/sink"
)

// newRulesEnv is a legacy shop whose template table also holds a
// remaining-stock column, a per-member limit and an end time, all mapped.
func newRulesEnv(t *testing.T) *legacyEnv {
	t.Helper()
	l := newLegacyEnv(t)
	l.exec(`ALTER TABLE ` + l.tq("t_coupon_tpl") + ` ADD COLUMN stock BIGINT NULL, ADD COLUMN per_member INT NULL, ADD COLUMN ends DATETIME NULL`)
	l.yaml = strings.Replace(l.yaml, "total_quota: budget}", "total_quota: budget, remaining: stock, per_user_limit: per_member, end_time: ends}", 1)
	return l
}

// rulesTemplate adds a template with a per-member limit (nil: NULL) and an
// end time (an SQL expression, or "NULL").
func (l *legacyEnv) rulesTemplate(id int64, limit any, ends string) {
	l.T.Helper()
	l.exec(`INSERT INTO `+l.tq("t_coupon_tpl")+` (id, budget, stock, per_member, ends) VALUES (?, 100000, 100000, ?, `+ends+`)`, id, limit)
}

// give inserts an AVAILABLE coupon of tpl for user, as the shop's claim
// does, and returns its id.
func (l *legacyEnv) give(q interface {
	Exec(string, ...any) (sql.Result, error)
}, tpl int64, user string) int64 {
	l.T.Helper()
	res, err := q.Exec(`INSERT INTO `+l.tq("t_user_coupon")+` (tpl_id, source, state, uid) VALUES (?, 'app', 0, ?)`, tpl, user)
	require.NoError(l.T, err)
	id, err := res.LastInsertId()
	require.NoError(l.T, err)
	return id
}

// inTx runs the shop's statements in one transaction (one batch).
func (l *legacyEnv) inTx(fn func(tx *sql.Tx)) {
	l.T.Helper()
	tx, err := l.DB.Begin()
	require.NoError(l.T, err)
	fn(tx)
	require.NoError(l.T, tx.Commit())
}

// detailRows reads the anomalies of a kind as "coupon template detail",
// sorted.
func (l *legacyEnv) detailRows(kind string) []string {
	l.T.Helper()
	rows, err := l.DB.Query(`SELECT COALESCE(user_coupon_id, 0), COALESCE(template_id, 0), detail FROM cdc_anomaly WHERE kind = ?`, kind)
	require.NoError(l.T, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var c, tpl int64
		var d string
		require.NoError(l.T, rows.Scan(&c, &tpl, &d))
		out = append(out, fmt.Sprintf("%d %d %s", c, tpl, d))
	}
	require.NoError(l.T, rows.Err())
	sort.Strings(out)
	return out
}

// claimCounts is cdc_user_claim as "template/user" -> coupons.
func (l *legacyEnv) claimCounts(query string) map[string]int64 {
	l.T.Helper()
	rows, err := l.DB.Query(query)
	require.NoError(l.T, err)
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var tpl, n int64
		var user string
		require.NoError(l.T, rows.Scan(&tpl, &user, &n))
		out[fmt.Sprintf("%d/%s", tpl, user)] = n
	}
	require.NoError(l.T, rows.Err())
	return out
}

// assertClaimCounts checks cdc_user_claim against the coupons per
// (template, user) in the shop's table.
func (l *legacyEnv) assertClaimCounts() {
	l.T.Helper()
	l.WaitCheckpoint()
	want := l.claimCounts(`SELECT tpl_id, uid, COUNT(*) FROM ` + l.tq("t_user_coupon") + ` WHERE state IN (0, 1, 2, 3, 9) GROUP BY 1, 2`)
	require.Equal(l.T, want, l.claimCounts(`SELECT template_id, user_id, coupons FROM cdc_user_claim`), "coupons per user")
}

func exceeded(coupon, tpl int64, user string, holding, limit int) string {
	return fmt.Sprintf("%d %d user %q received coupon %d of template %d holding %d already; the per-user limit is %d",
		coupon, tpl, user, coupon, tpl, holding, limit)
}

// Per-user limits are judged in binlog order against the limit in force
// at each point: concurrent claims past the limit, a limit raised before
// a claim (and cut after one) in the same transaction, a deleted coupon
// freeing a slot, coupons moved to another user or template, the excess
// already in the table at the first start and the excess a --rebuild
// skips; a restart repeats nothing.
func TestLegacyPerUserLimit(t *testing.T) {
	l := newRulesEnv(t)
	l.rulesTemplate(1, 2, "NULL")
	l.rulesTemplate(2, nil, "NULL") // no limit
	var pre []int64
	for range 4 {
		pre = append(pre, l.give(l.DB, 1, "pre")) // two over the limit before the first start
	}
	start := func(rebuild bool) *cdcenv.CDC {
		c := l.StartCDC(l.mapping(), func(_ *sink.Config, d *sink.Daemon) { d.Rebuild = rebuild })
		l.WaitCheckpoint()
		return c
	}
	c := start(false)
	found := func(c int64, user string, holds, number int) string { // a bootstrap's anomaly names the coupon beyond the limit
		return fmt.Sprintf(`%d 1 found at the snapshot of a bootstrap: user %q holds %d coupons of template 1; the per-user limit is 2; coupon %d is number %d`,
			c, user, holds, c, number)
	}
	atStart := []string{found(pre[2], "pre", 4, 3), found(pre[3], "pre", 4, 4)}
	require.Equal(t, atStart, l.detailRows(inventory.AnomalyPerUserLimitExceeded))
	boot := map[string]bool{atStart[0]: true, atStart[1]: true}

	// ten users claim five coupons each of template 1, concurrently; and of template 2
	var wg sync.WaitGroup
	for u := range 10 {
		for range 5 {
			wg.Go(func() {
				l.give(l.DB, 1, fmt.Sprint("c", u))
				l.give(l.DB, 2, fmt.Sprint("c", u))
			})
		}
	}
	wg.Wait()
	l.WaitCheckpoint()
	per := map[string][]string{}
	concurrent := map[string]bool{atStart[0]: true, atStart[1]: true}
	for _, r := range l.detailRows(inventory.AnomalyPerUserLimitExceeded) {
		if boot[r] {
			continue
		}
		concurrent[r] = true
		var c, tpl int64
		var user string
		var holding, limit int
		_, err := fmt.Sscanf(r, "%d %d user %q received coupon", &c, &tpl, &user)
		require.NoError(t, err, r)
		_, err = fmt.Sscanf(r[strings.Index(r, "holding"):], "holding %d already; the per-user limit is %d", &holding, &limit)
		require.NoError(t, err, r)
		require.Equal(t, exceeded(c, 1, user, holding, 2), r)
		var owner string
		require.NoError(t, l.DB.QueryRow(`SELECT uid FROM `+l.tq("t_user_coupon")+` WHERE id = ? AND tpl_id = 1`, c).Scan(&owner))
		require.Equal(t, user, owner)
		per[user] = append(per[user], fmt.Sprint(holding))
	}
	require.Len(t, per, 10)
	for u, h := range per {
		sort.Strings(h)
		require.Equal(t, []string{"2", "3", "4"}, h, "user %s: the 3rd, 4th and 5th coupon, each once", u)
	}
	later := func() []string { // the anomalies after the concurrent claims
		var out []string
		for _, r := range l.detailRows(inventory.AnomalyPerUserLimitExceeded) {
			if !concurrent[r] || boot[r] {
				out = append(out, r)
			}
		}
		return out
	}

	// a limit raised before a claim in one transaction, and again after one
	var a, b int64
	l.give(l.DB, 1, "r")
	l.give(l.DB, 1, "r")
	l.inTx(func(tx *sql.Tx) {
		_, err := tx.Exec(`UPDATE ` + l.tq("t_coupon_tpl") + ` SET per_member = 3 WHERE id = 1`)
		require.NoError(t, err)
		l.give(tx, 1, "r") // the third of 3: fine
		a = l.give(tx, 1, "r")
		_, err = tx.Exec(`UPDATE ` + l.tq("t_coupon_tpl") + ` SET per_member = 10 WHERE id = 1`)
		require.NoError(t, err)
		l.give(tx, 1, "r") // the fifth of 10: fine
	})
	// a deleted coupon frees a slot (limit 2 again)
	l.exec(`UPDATE ` + l.tq("t_coupon_tpl") + ` SET per_member = 2 WHERE id = 1`)
	d1 := l.give(l.DB, 1, "d")
	l.give(l.DB, 1, "d")
	l.exec(`DELETE FROM `+l.tq("t_user_coupon")+` WHERE id = ?`, d1)
	l.give(l.DB, 1, "d")
	b = l.give(l.DB, 1, "d")
	// a coupon given to another user who holds the limit; one moved from template 2
	m := l.give(l.DB, 1, "x")
	l.exec(`UPDATE `+l.tq("t_user_coupon")+` SET uid = 'd' WHERE id = ?`, m)
	var moved int64
	require.NoError(t, l.DB.QueryRow(`SELECT MIN(id) FROM `+l.tq("t_user_coupon")+` WHERE tpl_id = 2 AND uid = 'c0'`).Scan(&moved))
	l.exec(`UPDATE `+l.tq("t_user_coupon")+` SET tpl_id = 1 WHERE id = ?`, moved)
	l.WaitCheckpoint()
	want := []string{atStart[0], atStart[1], exceeded(a, 1, "r", 3, 3), exceeded(b, 1, "d", 2, 2), exceeded(m, 1, "d", 3, 2), exceeded(moved, 1, "c0", 5, 2)}
	sort.Strings(want)
	require.Equal(t, want, later())
	l.assertClaimCounts()

	// a restart repeats nothing; a --rebuild counts only the excess it skipped
	c.Stop(t)
	c = start(false)
	require.Equal(t, want, later(), "after a restart")
	c.Stop(t)
	pre5 := l.give(l.DB, 1, "pre")
	r6 := l.give(l.DB, 1, "r") // r: 6 over a limit of 2 at a rebuild's snapshot; 5 were counted
	c = start(true)
	skipped := []string{found(pre5, "pre", 5, 5), found(r6, "r", 6, 6)}
	require.Equal(t, sortedCopy(append(want, skipped...)), later(), "after a --rebuild")
	l.assertClaimCounts()
	require.Equal(t, map[string]int{inventory.AnomalyPerUserLimitExceeded: len(want) + 2 + 30, inventory.AnomalyIllegalTransition: 1, inventory.AnomalyDeletedCoupon: 1},
		l.anomalies(), "the template move is also illegal, the delete is a deleted_coupon")
	c.Stop(t)
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}
