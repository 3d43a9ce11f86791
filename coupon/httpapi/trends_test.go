package httpapi_test

import (
	"database/sql"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/api"
	"github.com/couponlink/couponlink/inventory/view"
)

// The console's trends: claims, redemptions and releases per minute and
// channel, from the ledger's rows at known minutes.
func TestTrendsRoute(t *testing.T) {
	e := newEnv(t) // the store's clock starts at 2030-01-01 00:00:00 UTC
	tpl := e.template(t, nil)
	other := e.template(t, map[string]any{"name": "other"})
	t0 := e.clock.Now()

	// by the write path: minute 00:00, two app claims (one redeemed at 00:03:59)
	a := e.claim(t, tpl, "u1", "app")
	e.claim(t, tpl, "u2", "app")
	e.claim(t, other, "u1", "app") // another template: not counted
	e.clock.Advance(3*time.Minute + 59*time.Second)
	e.redeem(t, a.UserCouponID, "o1")
	e.clock.Advance(1 * time.Second) // 00:04:00
	b := e.claim(t, tpl, "u3", "sms")
	e.redeem(t, b.UserCouponID, "o2")

	// rows at chosen times: the cdc's releases, and claims at the window's edges
	release := func(at time.Time, channel string, coupon int64) {
		_, err := e.db.Exec(`INSERT INTO inventory_flow (user_coupon_id, kind, template_id, channel, from_status, to_status, created_at)
			VALUES (?, 'release', ?, ?, 4, 4, ?)`, coupon, tpl, channel, at)
		require.NoError(t, err)
	}
	release(t0.Add(4*time.Minute+30*time.Second), "sms", 9001)
	release(t0.Add(4*time.Minute+31*time.Second), "sms", 9002)
	_, err := e.db.Exec(`INSERT INTO inventory_flow (user_coupon_id, kind, template_id, channel, from_status, to_status, created_at)
		VALUES (9003, 'void', ?, 'sms', 1, 4, ?)`, tpl, t0) // a void is not a release
	require.NoError(t, err)
	oldClaim := func(at time.Time, user string) {
		_, err := e.db.Exec(`INSERT INTO user_coupon (template_id, user_id, channel, status, claimed_at, expires_at) VALUES (?, ?, 'app', 1, ?, ?)`,
			tpl, user, at, at.Add(time.Hour))
		require.NoError(t, err)
	}
	e.clock.Advance(6 * time.Minute) // now 00:10:00: the window of 1 hour is [23:11, 00:11)
	from := t0.Add(-49 * time.Minute)
	oldClaim(from, "first")                        // the window's first instant: minute 0
	oldClaim(from.Add(-time.Microsecond), "early") // just before: not counted

	var got api.Trends
	e.expect(t, http.StatusOK, "GET", fmt.Sprintf("/v1/templates/%d/trends?hours=1", tpl), nil, &got)
	assert.Equal(t, tpl, got.Template)
	assert.Equal(t, 1, got.Hours)
	assert.True(t, got.From.Equal(from), "from %s", got.From)
	assert.True(t, got.To.Equal(t0.Add(11*time.Minute)), "to %s", got.To)
	series := func(counts map[int]int64) []int64 {
		out := make([]int64, 60)
		for m, n := range counts {
			out[m] = n
		}
		return out
	}
	assert.Equal(t, []api.ChannelTrend{
		{Channel: "app", Claims: series(map[int]int64{0: 1, 49: 2}), Redemptions: series(map[int]int64{52: 1}), Releases: series(nil)},
		{Channel: "sms", Claims: series(map[int]int64{53: 1}), Redemptions: series(map[int]int64{53: 1}), Releases: series(map[int]int64{53: 2})},
	}, got.Channels)

	e.expect(t, http.StatusOK, "GET", fmt.Sprintf("/v1/templates/%d/trends", tpl), nil, &got)
	assert.Equal(t, 3, got.Hours, "the default")
	assert.Len(t, got.Channels[0].Claims, 180)
	assert.Equal(t, int64(2), got.Channels[0].Claims[180-11], "00:00 is the 11th minute from the end")
}

func TestTrendsBadInput(t *testing.T) {
	e := newEnv(t)
	tpl := e.template(t, nil)
	for _, c := range []struct {
		query  string
		status int
		code   string
		field  string
	}{
		{"hours=0", 400, "invalid_argument", "hours"},
		{"hours=25", 400, "invalid_argument", "hours"},
		{"hours=-1", 400, "invalid_argument", "hours"},
		{"hours=junk", 400, "invalid_argument", "hours"},
		{"hours=1.5", 400, "invalid_argument", "hours"},
		{"hours=1&hours=2", 400, "invalid_argument", "hours"},
		{"minutes=5", 400, "invalid_argument", "minutes"},
	} {
		t.Run(c.query, func(t *testing.T) {
			got := expectError(t, e.must(t, "GET", fmt.Sprintf("/v1/templates/%d/trends?%s", tpl, c.query), nil), c.status, c.code)
			assert.Equal(t, c.field, got.Field)
		})
	}
	expectError(t, e.must(t, "GET", "/v1/templates/424242/trends", nil), 404, "not_found")
	expectError(t, e.must(t, "GET", "/v1/templates/x/trends", nil), 400, "invalid_argument")
	e.expect(t, http.StatusOK, "GET", fmt.Sprintf("/v1/templates/%d/trends?hours=24", tpl), nil, nil)
}

// Each series is read by a range of its (template, time) index, from the
// index alone, among many rows of other templates and older times.
func TestTrendsUseAnIndex(t *testing.T) {
	e := newEnv(t)
	tpl := e.template(t, nil)
	other := e.template(t, map[string]any{"name": "other"})
	old := e.clock.Now().Add(-48 * time.Hour)
	// 4000 rows per table: other's, and tpl's two days ago
	for _, q := range []string{
		`INSERT INTO user_coupon (template_id, user_id, channel, status, claimed_at, expires_at)
			SELECT IF(seq % 2 = 0, ?, ?), CONCAT('bulk', seq), 'app', 1, ?, ? FROM seq_1_to_4000`,
		`INSERT INTO redemption_log (user_coupon_id, template_id, channel, order_id, redeemed_at, idempotency_key)
			SELECT seq, IF(seq % 2 = 0, ?, ?), 'app', CONCAT('o', seq), ?, CONCAT('k', seq, ?) FROM seq_1_to_4000`,
		`INSERT INTO inventory_flow (user_coupon_id, kind, template_id, channel, from_status, to_status, created_at)
			SELECT seq, 'release', IF(seq % 2 = 0, ?, ?), 'app', 4, 4, ? FROM seq_1_to_4000 WHERE ? IS NOT NULL`,
	} {
		_, err := e.db.Exec(q, tpl, other, old, old)
		require.NoError(t, err, q)
	}
	_, err := e.db.Exec(`ANALYZE TABLE user_coupon, redemption_log, inventory_flow`)
	require.NoError(t, err)
	now := e.clock.Now()
	want := map[string]string{"claims": "idx_user_coupon_tpl_claimed", "redemptions": "idx_redemption_tpl_at", "releases": "idx_inventory_flow_tpl_kind_at"}
	for name, q := range view.TrendQueries() {
		plan := explain(t, e.db, q, now.Add(-3*time.Hour), tpl, now.Add(-3*time.Hour), now)
		require.Len(t, plan, 1, name)
		assert.Equal(t, want[name], plan[0]["key"], "%s: %v", name, plan[0])
		assert.Equal(t, "range", plan[0]["type"], "%s: %v", name, plan[0])
		assert.Contains(t, plan[0]["Extra"], "Using index", "%s: covering: %v", name, plan[0])
		assert.NotContains(t, plan[0]["Extra"], "filesort", "%s: %v", name, plan[0])
		rows, err := strconv.Atoi(plan[0]["rows"])
		require.NoError(t, err)
		assert.Less(t, rows, 100, "%s: the window's rows, not the 4000: %v", name, plan[0])
	}
}

// explain is EXPLAIN's rows, column by name.
func explain(t *testing.T, db *sql.DB, query string, args ...any) []map[string]string {
	t.Helper()
	cols, rows := queryRows(t, db, "EXPLAIN "+query, args...)
	var out []map[string]string
	for _, vals := range rows {
		row := map[string]string{}
		for i, c := range cols {
			row[c] = strings.TrimSpace(vals[i].String)
		}
		out = append(out, row)
	}
	return out
}
