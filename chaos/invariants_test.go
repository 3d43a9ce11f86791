package chaos

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/internal/testenv"
)

// The checker reports each broken invariant with the rows involved, and
// nothing once the state is right again.
func TestCheckerFindsViolations(t *testing.T) {
	ctx := context.Background()
	db, _ := testenv.MySQL(t)
	rdb := testenv.Redis(t)
	prefix := testenv.KeyPrefix(t)
	exec := func(q string, args ...any) {
		t.Helper()
		_, err := db.Exec(q, args...)
		require.NoError(t, err, q)
	}
	exec(`INSERT INTO coupon_template (id, name, total_quota, valid_seconds) VALUES (1, 't', 10, 3600)`)
	exec(`INSERT INTO channel_quota (template_id, channel, quota, claimed) VALUES (1, 'app', 10, 3)`)
	exec(`INSERT INTO user_coupon (id, template_id, user_id, channel, status, claimed_at, expires_at, request_id)
		VALUES (1, 1, 'u', 'app', 1, NOW(), NOW() + INTERVAL 1 HOUR, 'c-1'), (2, 1, 'u', 'app', 2, NOW(), NOW() + INTERVAL 1 HOUR, 'c-2')`)
	exec(`INSERT INTO inventory_counter (template_id, channel, held, used) VALUES (1, 'app', 1, 0)`)

	rows, err := checkCounters(ctx, db)
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.Contains(t, rows[0], `template 1 channel "app": truth {held:1 used:1`)

	rows, err = checkConservation(ctx, db) // claimed 3, held 1 + used 1
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.Contains(t, rows[0], "claimed 3, held 1, used 1")

	rows, err = checkRedemptions(ctx, db) // coupon 2 USED without a redemption row
	require.NoError(t, err)
	require.Equal(t, []string{"user_coupon 2: status 2, 0 redemptions in effect"}, rows)

	exec(`INSERT INTO coupon_template (id, name, total_quota, valid_seconds) VALUES (2, 't2', 5, 3600)`)
	exec(`INSERT INTO channel_quota (template_id, channel, quota) VALUES (2, 'app', 3), (2, 'web', 1)`)
	rows, err = checkQuotaSum(ctx, db) // a transfer that lost one
	require.NoError(t, err)
	require.Equal(t, []string{"template 2: total_quota 5, channel quotas add up to 4"}, rows)
	exec(`DELETE FROM channel_quota WHERE template_id = 2`)
	exec(`DELETE FROM coupon_template WHERE id = 2`)

	rows, err = checkRedis(ctx, db, rdb, prefix) // no keys at all
	require.NoError(t, err)
	require.Len(t, rows, 2)

	k := newAcks()
	k.claims["c-1"] = 1
	k.claims["c-9"] = 9
	k.redemptions[redKey("o-1", 2)] = 1
	rows, err = k.checkAcked(ctx, db)
	require.NoError(t, err)
	require.Equal(t, []string{"claim c-9 answered coupon 9; user_coupon has (none)",
		"redemption o-1/2 answered id 1; redemption_log has (none)"}, rows)

	// put everything right: the checker finds nothing
	exec(`UPDATE channel_quota SET claimed = 2`)
	exec(`UPDATE inventory_counter SET used = 1`)
	exec(`INSERT INTO redemption_log (id, user_coupon_id, template_id, channel, order_id, redeemed_at, idempotency_key)
		VALUES (1, 2, 1, 'app', 'o-1', NOW(), 'o-1/2')`)
	require.NoError(t, rdb.Set(ctx, prefix+"stock:{1}:app", 8, 0).Err())
	require.NoError(t, rdb.Set(ctx, prefix+"stock:{1}", 8, 0).Err())
	delete(k.claims, "c-9")
	for name, fn := range map[string]func() ([]string, error){
		"counters":     func() ([]string, error) { return checkCounters(ctx, db) },
		"conservation": func() ([]string, error) { return checkConservation(ctx, db) },
		"quota sum":    func() ([]string, error) { return checkQuotaSum(ctx, db) },
		"redemptions":  func() ([]string, error) { return checkRedemptions(ctx, db) },
		"redis":        func() ([]string, error) { return checkRedis(ctx, db, rdb, prefix) },
		"acked":        func() ([]string, error) { return k.checkAcked(ctx, db) },
		"idempotency":  func() ([]string, error) { return k.checkIdempotency(ctx, db) },
		"anomalies":    func() ([]string, error) { return checkAnomalies(ctx, db) },
		"corrections":  func() ([]string, error) { return checkCorrections(ctx, db) },
	} {
		rows, err := fn()
		require.NoError(t, err, name)
		require.Empty(t, rows, name+": "+strings.Join(rows, "; "))
	}

	// a refund ends the redemption's effect: a USED coupon then has none
	exec(`INSERT INTO inventory_flow (user_coupon_id, kind, seq, template_id, channel, from_status, to_status, mode, order_id)
		VALUES (2, 'refund', 1, 1, 'app', 2, 1, 'restore', 'o-1')`)
	rows, err = checkRedemptions(ctx, db)
	require.NoError(t, err)
	require.Equal(t, []string{"user_coupon 2: status 2, 0 redemptions in effect"}, rows)
}

// The first violated invariant is the first recorded that failed, with
// its rows (at most 20 and a count of the rest).
func TestChecksFirstViolation(t *testing.T) {
	c := newChecks()
	c.record("a", nil)
	c.skip("b")
	rows := make([]string, 25)
	for i := range rows {
		rows[i] = "row"
	}
	c.record("c", rows)
	c.record("d", []string{"x"})
	name, got := c.firstViolation()
	require.Equal(t, "c", name)
	require.Len(t, got, 21)
	require.Equal(t, "... and 5 more", got[20])
}

// The legacy comparison names what was not reported, what was invented and
// what was reported twice, and leaves out coupons of unknown outcome.
func TestLegacyDiff(t *testing.T) {
	w := &legacyWriter{expected: map[string]string{}, unknown: map[int64]bool{7: true}}
	w.expect("deleted_coupon", 1, "DELETE")
	w.expect("illegal_transition", 2, "USED -> EXPIRED")
	w.expect("duplicate_redemption", 3, "second write-off")
	got := map[string]int{
		"deleted_coupon coupon 1":       1,
		"duplicate_redemption coupon 3": 2,
		"illegal_transition coupon 4":   1,
		"deleted_coupon coupon 7":       1, // its DELETE's COMMIT failed: unknown
	}
	require.Equal(t, []string{
		"invented: illegal_transition coupon 4 (reported 1 times)",
		"not reported: illegal_transition coupon 2 (USED -> EXPIRED)",
		"reported 2 times: duplicate_redemption coupon 3",
	}, w.legacyDiff(got))
	got["illegal_transition coupon 2"] = 1
	got["duplicate_redemption coupon 3"] = 1
	delete(got, "illegal_transition coupon 4")
	require.Empty(t, w.legacyDiff(got))
}

// The claimed set's check names the members without a coupon and the
// holders missing from the set, and nothing when they are equal.
func TestClaimedDiff(t *testing.T) {
	require.Equal(t, []string{
		"holds a coupon, missing from the set: member 3",
		"in the set without a coupon: member 9",
	}, claimedDiff([]string{"1", "9", "2"}, []string{"1", "2", "3"}))
	require.Empty(t, claimedDiff([]string{"2", "1"}, []string{"1", "2"}))
}
