package main

import (
	"database/sql"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/audit"
	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/internal/testenv"
)

// couponlink audit on couponlink's own schema: exit 0 on a clean
// database; 1 with inconsistencies, its -json naming them (a use after
// the coupon's expiry, which this schema's redemption_log dates, a use
// with no redemption row, a channel over its quota); 2 on an error.
func TestAuditCommand(t *testing.T) {
	db, dsn := testenv.MySQL(t)
	code, out, errs := cli(t, "audit", "-dsn", dsn)
	require.Equal(t, 0, code, errs)
	assert.Contains(t, out, "nothing found")

	seedAuditShop(t, db)
	code, out, errs = cli(t, "audit", "-dsn", dsn, "-json")
	require.Equal(t, 1, code, "inconsistencies found: exit 1; %s", errs)
	var rep audit.Report
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	found := map[audit.Kind][]string{}
	for _, k := range rep.Kinds {
		for _, f := range k.Examples {
			found[k.Kind] = append(found[k.Kind], f.Subject())
		}
	}
	assert.Equal(t, map[audit.Kind][]string{
		audit.UsedAfterExpiry:       {"coupon 1"},
		audit.UsedWithoutRedemption: {"coupon 2"},
		audit.OverIssue:             {`template 7 channel "app"`},
	}, found)
	assert.Equal(t, int64(3), rep.Found)
	assert.True(t, rep.Kind(audit.PerUserLimitExceeded).Checked, "the reference schema keeps its per-user limit")

	code, _, errs = cli(t, "audit", "-dsn", dsn, "-mapping", filepath.Join(t.TempDir(), "missing.yaml"))
	assert.Equal(t, 2, code, "an error: exit 2")
	assert.Contains(t, errs, "missing.yaml")
}

// seedAuditShop writes, before couponlink's first start, a use after
// expiry (coupon 1), a use without a redemption (coupon 2) and an
// over-issued channel (template 7's app).
func seedAuditShop(t *testing.T, db *sql.DB) {
	t.Helper()
	for _, q := range []string{
		`INSERT INTO coupon_template (id, name, total_quota, valid_seconds) VALUES (7, 'spring', 1, 3600)`,
		`INSERT INTO channel_quota (template_id, channel, quota, claimed) VALUES (7, 'app', 1, 1)`,
		`INSERT INTO user_coupon (id, template_id, user_id, channel, status, claimed_at, expires_at, order_id) VALUES
			(1, 7, 'u1', 'app', 2, NOW() - INTERVAL 2 DAY, NOW() - INTERVAL 1 DAY, 'o-1'),
			(2, 7, 'u2', 'app', 2, NOW(), NOW() + INTERVAL 1 DAY, 'o-2')`,
		`INSERT INTO redemption_log (user_coupon_id, template_id, channel, order_id, redeemed_at, idempotency_key)
			VALUES (1, 7, 'app', 'o-1', NOW(), 'k1')`,
	} {
		_, err := db.Exec(q)
		require.NoError(t, err, q)
	}
}

// The cdc audits at its bootstrap (-audit-at-bootstrap, on by default):
// what was wrong before its first snapshot is recorded as found_at_attach
// findings, and its log says so.
func TestCDCAuditsAtBootstrap(t *testing.T) {
	db, dsn := testenv.MySQL(t)
	seedAuditShop(t, db)
	c := startCDC(t, "-dsn", dsn, "-redis", "")
	kinds := func() []string {
		var out []string
		rows, err := db.Query(`SELECT kind FROM finding WHERE kind LIKE 'found_at_attach/%' ORDER BY kind`)
		require.NoError(t, err)
		defer rows.Close()
		for rows.Next() {
			var k string
			require.NoError(t, rows.Scan(&k))
			out = append(out, k)
		}
		return out
	}
	cdctest.WaitFor(t, 30*time.Second, "the audit at bootstrap recorded its findings", func() bool { return len(kinds()) == 3 })
	require.Equal(t, []string{"found_at_attach/over_issue", "found_at_attach/used_after_expiry", "found_at_attach/used_without_redemption"}, kinds())
	cdctest.WaitFor(t, 10*time.Second, "the log says so", func() bool {
		return strings.Contains(c.logs.String(), `msg="audit at bootstrap: the shop's tables held inconsistencies before this bootstrap`)
	})
	require.Contains(t, c.logs.String(), "found=3")
}
