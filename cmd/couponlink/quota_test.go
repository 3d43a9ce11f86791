package main

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/quota"
)

// cli runs couponlink with args and returns its exit code and output.
func cli(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// newTemplate inserts a template with channels app (quota 60) and sms (40).
func newTemplate(t *testing.T, db *sql.DB) string {
	t.Helper()
	res, err := db.Exec(`INSERT INTO coupon_template (name, total_quota, valid_seconds) VALUES ('campaign', 100, 3600)`)
	require.NoError(t, err)
	id, err := res.LastInsertId()
	require.NoError(t, err)
	_, err = db.Exec(`INSERT INTO channel_quota (template_id, channel, quota, claimed) VALUES (?, 'app', 60, 10), (?, 'sms', 40, 0)`, id, id)
	require.NoError(t, err)
	return strconv.FormatInt(id, 10)
}

// fieldLine is the columns of the line of a table whose first column is field.
func fieldLine(t *testing.T, out, field string) []string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if cols := strings.Fields(line); len(cols) > 0 && cols[0] == field {
			return cols
		}
	}
	t.Fatalf("no line for %s in:\n%s", field, out)
	return nil
}

func TestQuotaPolicyCLI(t *testing.T) {
	db, dsn := testenv.MySQL(t)
	tpl := newTemplate(t, db)

	code, out, errs := cli(t, "quota", "policy", "show", "-dsn", dsn, "-template", tpl)
	require.Equal(t, 0, code, errs)
	assert.Contains(t, out, "no override")
	assert.Equal(t, []string{"low", "0.3", "default", "0.3"}, fieldLine(t, out, "low"))

	code, out, errs = cli(t, "quota", "policy", "set", "-dsn", dsn, "-template", tpl,
		"-mode", "auto", "-low", "0.2", "-cooldown", "30m", "-by", "alice", "-reason", "TICKET-9")
	require.Equal(t, 0, code, errs)
	assert.Equal(t, []string{"mode", "auto", "override", "signal"}, fieldLine(t, out, "mode"))

	code, out, errs = cli(t, "quota", "policy", "show", "-dsn", dsn, "-template", tpl)
	require.Equal(t, 0, code, errs)
	assert.Contains(t, out, "override version 1, by alice")
	assert.Equal(t, []string{"mode", "auto", "override", "signal"}, fieldLine(t, out, "mode"))
	assert.Equal(t, []string{"low", "0.2", "override", "0.3"}, fieldLine(t, out, "low"))
	assert.Equal(t, []string{"high", "0.6", "default", "0.6"}, fieldLine(t, out, "high"), "a flag not given changes nothing")
	assert.Equal(t, []string{"cooldown", "30m0s", "override", "1h0m0s"}, fieldLine(t, out, "cooldown"))

	v, err := quota.GetPolicy(t.Context(), db, mustInt(t, tpl))
	require.NoError(t, err)
	assert.Equal(t, quota.Override{Mode: ptr("auto"), Low: ptr(0.2), CooldownSeconds: ptr(int64(1800))}, v.Override)

	code, out, errs = cli(t, "quota", "policy", "audit", "-dsn", dsn, "-template", tpl)
	require.Equal(t, 0, code, errs)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2, out)
	assert.Contains(t, lines[1], "alice")
	assert.Contains(t, lines[1], "cli")
	assert.Contains(t, lines[1], "TICKET-9")
	assert.Contains(t, lines[1], `"low":0.2`)

	code, out, errs = cli(t, "quota", "policy", "reset", "-dsn", dsn, "-template", tpl, "-by", "bob", "-reason", "done")
	require.Equal(t, 0, code, errs)
	assert.Equal(t, []string{"mode", "signal", "default", "signal"}, fieldLine(t, out, "mode"))
	code, out, _ = cli(t, "quota", "policy", "audit", "-dsn", dsn, "-template", tpl, "-limit", "1")
	require.Equal(t, 0, code)
	lines = strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2, out)
	assert.Contains(t, lines[1], "reset")
}

func TestQuotaPolicyCLIErrors(t *testing.T) {
	db, dsn := testenv.MySQL(t)
	tpl := newTemplate(t, db)
	for _, c := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"a bad fraction", []string{"set", "-template", tpl, "-max-share", "1.5", "-by", "a", "-reason", "r"}, 1, "-max-share: max_share must be a fraction"},
		{"low above high", []string{"set", "-template", tpl, "-low", "0.9", "-by", "a", "-reason", "r"}, 1, "-low: low (0.9) must be below high (0.6)"},
		{"a bad mode", []string{"set", "-template", tpl, "-mode", "sometimes", "-by", "a", "-reason", "r"}, 1, "-mode: "},
		{"a fraction of a second", []string{"set", "-template", tpl, "-cooldown", "1500ms", "-by", "a", "-reason", "r"}, 1, "-cooldown: 1.5s is not a whole number of seconds"},
		{"no author", []string{"set", "-template", tpl, "-low", "0.2", "-reason", "r"}, 1, "-by: changed_by is required"},
		{"no reason", []string{"reset", "-template", tpl, "-by", "a"}, 1, "-reason: reason is required"},
		{"no field", []string{"set", "-template", tpl, "-by", "a", "-reason", "r"}, 2, "nothing to change"},
		{"no template", []string{"show"}, 2, "-template is required"},
		{"a missing template", []string{"show", "-template", "424242"}, 1, "template 424242 does not exist"},
		{"an unknown command", []string{"drop", "-template", tpl}, 2, `unknown command "drop"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"quota", "policy", c.args[0], "-dsn", dsn}, c.args[1:]...)
			code, _, errs := cli(t, args...)
			assert.Equal(t, c.code, code, errs)
			assert.Contains(t, errs, c.want)
		})
	}
	var n int
	require.NoError(t, db.QueryRow(`SELECT COUNT(*) FROM quota_policy_audit`).Scan(&n))
	assert.Zero(t, n, "refused changes write nothing")
}

func TestStatusTemplate(t *testing.T) {
	db, dsn := testenv.MySQL(t)
	tpl := newTemplate(t, db)
	_, err := db.Exec(`INSERT INTO inventory_counter (template_id, channel, held, used, expired, released) VALUES (?, 'app', 6, 3, 1, 0)`, tpl)
	require.NoError(t, err)
	_, err = db.Exec(`INSERT INTO quota_transfer_log (template_id, decision, from_channel, to_channel, amount, rule, mode, created_at)
		VALUES (?, 'd1', 'sms', 'app', 100, 'rates', 'auto', ?)`, tpl, time.Date(2026, 11, 29, 14, 0, 0, 0, time.UTC))
	require.NoError(t, err)

	code, out, errs := cli(t, "status", "-dsn", dsn, "-template", tpl)
	require.Equal(t, 0, code, errs)
	assert.Equal(t, strings.Fields("app 60 10 50 6 3 1 0 30.0% +100 from sms 2026-11-29T14:00Z"), fieldLine(t, out, "app"))
	assert.Equal(t, strings.Fields("sms 40 0 40 0 0 0 0 - -100 to app 2026-11-29T14:00Z"), fieldLine(t, out, "sms"))

	code, out, errs = cli(t, "status", "-dsn", dsn, "-template", tpl, "-json")
	require.Equal(t, 0, code, errs)
	var cs []quota.ChannelView
	require.NoError(t, json.Unmarshal([]byte(out), &cs), out)
	require.Len(t, cs, 2)
	assert.Equal(t, "app", cs[0].Name)
	assert.Equal(t, int64(50), cs[0].Claimable)
	require.NotNil(t, cs[0].RedemptionRate)
	assert.InDelta(t, 0.3, *cs[0].RedemptionRate, 1e-12)
	require.NotNil(t, cs[0].LastTransfer)
	assert.Equal(t, int64(100), cs[0].LastTransfer.Amount)

	code, _, errs = cli(t, "status", "-dsn", dsn, "-template", "424242")
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "template 424242 does not exist")
}

func mustInt(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	require.NoError(t, err)
	return n
}

func ptr[T any](v T) *T { return &v }
