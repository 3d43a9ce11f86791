package main

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/audit"
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

	exec := func(q string, args ...any) {
		t.Helper()
		_, err := db.Exec(q, args...)
		require.NoError(t, err, q)
	}
	exec(`INSERT INTO coupon_template (id, name, total_quota, valid_seconds) VALUES (7, 'spring', 1, 3600)`)
	exec(`INSERT INTO channel_quota (template_id, channel, quota, claimed) VALUES (7, 'app', 1, 1)`)
	exec(`INSERT INTO user_coupon (id, template_id, user_id, channel, status, claimed_at, expires_at, order_id) VALUES
		(1, 7, 'u1', 'app', 2, NOW() - INTERVAL 2 DAY, NOW() - INTERVAL 1 DAY, 'o-1'),
		(2, 7, 'u2', 'app', 2, NOW(), NOW() + INTERVAL 1 DAY, 'o-2')`)
	exec(`INSERT INTO redemption_log (user_coupon_id, template_id, channel, order_id, redeemed_at, idempotency_key)
		VALUES (1, 7, 'app', 'o-1', NOW(), 'k1')`)

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
