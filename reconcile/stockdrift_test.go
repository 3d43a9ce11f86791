package reconcile_test

import (
	"database/sql"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/inventory"
	"github.com/couponlink/couponlink/reconcile"
	"github.com/couponlink/couponlink/sink"
)

// newStockLegacy is the legacy schema whose template table also has the
// shop's remaining-stock column (its claim guard), mapped.
func newStockLegacy(t *testing.T) *legacy {
	t.Helper()
	l := newLegacy(t, "")
	l.exec("ALTER TABLE t_coupon_tpl ADD COLUMN stock BIGINT NULL")
	m, err := canal.LoadMapping([]byte(strings.Replace(fmt.Sprintf(legacyYAML, l.DBName), "used: used}", "used: used, remaining: stock}", 1)))
	require.NoError(t, err)
	require.NoError(t, m.Check(l.Ctx, l.DB))
	l.m = m
	return l
}

// claimGuarded is the shop's claim: the stock guard, the coupon row and
// its own issued count, in one transaction.
func (l *legacy) claimGuarded(tpl int64, n int) []int64 {
	l.T.Helper()
	ids := l.claim(tpl, n)
	l.exec(`UPDATE t_coupon_tpl SET stock = stock - ? WHERE id = ?`, n, tpl)
	return ids
}

// The shop's remaining-stock column is compared with its budget minus the
// coupons taken, read in one snapshot: a lost or doubled decrement, or a
// budget raised without the stock, is stock_column_drift for a person;
// a NULL stock or budget is not compared; the table is never written.
func TestLegacyStockColumnDrift(t *testing.T) {
	t.Parallel()
	l := newStockLegacy(t)
	l.exec(`INSERT INTO t_coupon_tpl (id, budget, stock) VALUES (1, 100, 100), (2, 50, 50), (3, 10, NULL)`)
	l.StartCDC(l.m)
	for _, id := range l.claimGuarded(1, 8)[:3] {
		l.redeem(1, id) // a use takes nothing more
	}
	l.claimGuarded(2, 4)
	l.claim(3, 2)
	l.WaitCheckpoint()
	r := l.reconciler()
	rep := l.pass(r)
	require.Equal(t, "clean", rep.Status, "%v", diffs(rep.Differences))

	l.exec(`UPDATE t_coupon_tpl SET stock = stock - 2 WHERE id = 1`)      // decremented twice more
	l.exec(`UPDATE t_coupon_tpl SET budget = 60 WHERE id = 2`)            // a top-up without the stock
	l.exec(`UPDATE t_user_coupon SET state = 3 WHERE tpl_id = 2 LIMIT 1`) // a void: still taken (frozen)
	l.WaitCheckpoint()
	before := l.Triples(`SELECT id, budget, COALESCE(stock, -1), issued FROM t_coupon_tpl`)
	rep = l.pass(r)
	require.Equal(t, "needs_review", rep.Status)
	require.Equal(t, []string{
		"legacy 1/remaining 92 90 needs_review",
		"legacy 2/remaining 56 46 needs_review",
	}, diffs(rep.Differences))
	d := find(t, rep.Differences, reconcile.StoreLegacy, "1/remaining")
	require.Equal(t, "remaining", d.Field)
	require.True(t, strings.HasPrefix(d.Reason, "stock_column_drift:"), d.Reason)
	require.Empty(t, l.corrections())
	require.Equal(t, before, l.Triples(`SELECT id, budget, COALESCE(stock, -1), issued FROM t_coupon_tpl`), "the legacy table is untouched")

	// the shop's claims go on while the reconciler reads: the stock and the
	// coupons are read in one snapshot, so a guarded claim is never drift
	l.exec(`UPDATE t_coupon_tpl SET budget = 100000, stock = 99992 WHERE id = 1`)
	l.exec(`UPDATE t_coupon_tpl SET stock = 56 WHERE id = 2`)
	stop, done := make(chan struct{}), make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			if err := guardedClaim(l.DB); err != nil {
				done <- err
				return
			}
		}
	}()
	for range 10 {
		rep = l.pass(r)
		for _, d := range rep.Differences {
			require.NotEqual(t, reconcile.StoreLegacy, d.Store, "%v", diffs(rep.Differences))
		}
	}
	close(stop)
	require.NoError(t, <-done)
}

// guardedClaim is one claim of template 1 with its stock guard and count.
func guardedClaim(db *sql.DB) error {
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.Exec(`INSERT INTO t_user_coupon (uid, tpl_id, state, expire_time) VALUES ('g', 1, 0, NOW())`); err != nil {
		return err
	}
	if _, err := tx.Exec(`UPDATE t_coupon_tpl SET stock = stock - 1, issued = issued + 1 WHERE id = 1 AND stock > 0`); err != nil {
		return err
	}
	return tx.Commit()
}

// With channel quotas too (the shop keeps per-channel buckets beside its
// template's stock column), the stock column is compared the same way;
// over-issue stays judged per bucket.
func TestLegacyStockColumnDriftWithChannelQuotas(t *testing.T) {
	t.Parallel()
	l := newStockLegacy(t)
	l.exec("CREATE TABLE t_quota (tpl_id INT NOT NULL, ch VARCHAR(32) NOT NULL, quota BIGINT NOT NULL, claimed BIGINT NOT NULL, PRIMARY KEY (tpl_id, ch))")
	m, err := canal.LoadMapping([]byte(strings.Replace(fmt.Sprintf(legacyYAML, l.DBName), "used: used}", "used: used, remaining: stock}", 1) +
		"channel_quota: {table: t_quota, template: tpl_id, channel: ch, quota: quota, claimed: claimed}\n"))
	require.NoError(t, err)
	require.NoError(t, m.Check(l.Ctx, l.DB))
	l.m = m
	l.exec(`INSERT INTO t_coupon_tpl (id, budget, stock) VALUES (1, 100, 100)`)
	l.exec(`INSERT INTO t_quota VALUES (1, 'legacy', 100, 0)`)
	l.StartCDC(l.m, func(cfg *sink.Config, _ *sink.Daemon) { cfg.RedisMode = inventory.RedisOff })
	l.claimGuarded(1, 6)
	l.exec(`UPDATE t_quota SET claimed = 6 WHERE tpl_id = 1`)
	l.WaitCheckpoint()
	r := l.reconciler(func(c *reconcile.Config) { c.RedisMode = inventory.RedisOff })
	rep := l.pass(r)
	require.Equal(t, "clean", rep.Status, "%v", diffs(rep.Differences))

	l.exec(`UPDATE t_coupon_tpl SET stock = stock + 1 WHERE id = 1`) // an increment the claims do not explain
	l.WaitCheckpoint()
	rep = l.pass(r)
	require.Equal(t, []string{"legacy 1/remaining 94 95 needs_review"}, diffs(rep.Differences))
}

// An unlimited campaign (template.unlimited: [0]) has no remaining stock
// to check: whatever the shop keeps in its remaining column, its coupons
// are no drift, and nothing over-issues.
func TestLegacyUnlimitedBudgetIsNoDrift(t *testing.T) {
	t.Parallel()
	l := newStockLegacy(t)
	m, err := canal.LoadMapping([]byte(strings.Replace(fmt.Sprintf(legacyYAML, l.DBName),
		"used: used}", "used: used, remaining: stock, unlimited: [0]}", 1)))
	require.NoError(t, err)
	require.NoError(t, m.Check(l.Ctx, l.DB))
	l.m = m
	l.exec(`INSERT INTO t_coupon_tpl (id, budget, stock) VALUES (1, 0, 0), (2, 10, 10)`)
	l.StartCDC(l.m)
	for _, id := range l.claim(1, 6)[:2] { // the shop leaves an unlimited campaign's stock as it is
		l.redeem(1, id)
	}
	l.claimGuarded(2, 3)
	l.WaitCheckpoint()
	rep := l.pass(l.reconciler())
	require.Equal(t, "clean", rep.Status, "%v", diffs(rep.Differences))

	l.exec(`UPDATE t_coupon_tpl SET stock = stock - 1 WHERE id = 2`) // a limited one still drifts
	l.WaitCheckpoint()
	rep = l.pass(l.reconciler())
	require.Equal(t, []string{"legacy 2/remaining 7 6 needs_review"}, diffs(rep.Differences))
}
