package reconcile_test

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/internal/testenv"
)

var findingRe = regexp.MustCompile(`finding ([0-9a-f]{16}) (open|acknowledged): `)

// A finding acknowledged through the CLI: the next pass finds it as it
// was and reports it acknowledged (task status acknowledged, exit 0);
// changed (another value) it is open again (exit 1); closed, and found
// again, open again. `couponlink anomalies list` shows each state.
func TestCLIAcknowledgedFindingPassesChangedReopens(t *testing.T) {
	t.Parallel()
	bin := testenv.BuildCouponlink(t)
	e, tpl := driftEnv(t)
	flags := passFlags(t, e)
	once := append([]string{"-once"}, flags...)
	list := func(state string) string {
		t.Helper()
		code, out, _ := command(t, bin, "anomalies", "list", "-dsn", e.DSN, "-source", "reconcile", "-state", state)
		require.Equal(t, 0, code)
		return out
	}

	e.exec(`UPDATE channel_quota SET claimed = claimed + 1 WHERE template_id = ? AND channel = 'web'`, tpl)
	e.Settle()
	code, out, _ := cli(t, bin, once...)
	require.Equal(t, 1, code)
	require.Contains(t, out, "reconcile task 1: needs_review")
	m := findingRe.FindStringSubmatch(out)
	require.NotNil(t, m, "the report names the finding")
	fp := m[1]
	require.Equal(t, "open", m[2])
	require.Contains(t, list("open"), fp)

	code, _, errOut := cli(t, bin, append([]string{"-ack", fp, "-operator", "ann"}, flags...)...)
	require.Equal(t, 1, code, "-ack without -note")
	require.Contains(t, errOut, "a reason is required")
	code, out, _ = cli(t, bin, append([]string{"-ack", fp, "-operator", "ann", "-note", "claimed bumped by the test"}, flags...)...)
	require.Equal(t, 0, code)
	require.Contains(t, out, "acknowledged by ann")
	require.Contains(t, list("acknowledged"), fp)

	code, out, _ = cli(t, bin, once...)
	require.Equal(t, 0, code, "the same finding, acknowledged: exit 0")
	require.Contains(t, out, "reconcile task 2: acknowledged")
	require.Contains(t, out, "finding "+fp+" acknowledged: ")
	require.NotContains(t, out, "needs_review", "the acknowledged difference's action says acknowledged")
	var summary string
	require.NoError(t, e.DB.QueryRow(`SELECT summary FROM reconcile_task WHERE id = 2`).Scan(&summary))
	require.Contains(t, summary, "1 difference (0 fixed, 0 need review, 0 in flight, 1 acknowledged)")
	require.NotContains(t, list("open"), fp)

	e.exec(`UPDATE channel_quota SET claimed = claimed + 1 WHERE template_id = ? AND channel = 'web'`, tpl)
	e.Settle()
	code, out, _ = cli(t, bin, once...)
	require.Equal(t, 1, code, "changed: open again")
	require.Contains(t, out, "reconcile task 3: needs_review")
	require.Contains(t, out, "finding "+fp+" open: ")
	require.Contains(t, list("open"), fp)

	code, _, _ = command(t, bin, "anomalies", "close", "-dsn", e.DSN, "-fingerprint", fp, "-operator", "ann", "-reason", "put back")
	require.Equal(t, 0, code)
	require.Contains(t, list("closed"), fp)
	code, _, errOut = command(t, bin, "anomalies", "ack", "-dsn", e.DSN, "-fingerprint", fp, "-operator", "ann", "-reason", "x")
	require.Equal(t, 1, code, "a closed finding cannot be acknowledged")
	require.Contains(t, errOut, "is closed")
	code, out, _ = command(t, bin, "anomalies", "reopen", "-dsn", e.DSN, "-fingerprint", fp, "-operator", "bob", "-reason", "not put back after all")
	require.Equal(t, 0, code)
	require.Contains(t, out, ") open by bob")
	require.Contains(t, list("open"), fp)
	code, out, _ = cli(t, bin, once...)
	require.Equal(t, 1, code, "found again once closed: open again")
	require.Contains(t, out, "finding "+fp+" open: ")
}
