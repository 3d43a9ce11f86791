package quota_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/api"
	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/quota"
)

func ptr[T any](v T) *T { return &v }

// template inserts a template with the given channel quotas.
func template(t *testing.T, db *sql.DB, channels map[string]int64) int64 {
	t.Helper()
	res, err := db.Exec(`INSERT INTO coupon_template (name, total_quota, valid_seconds) VALUES ('campaign', 1000, 3600)`)
	require.NoError(t, err)
	id, err := res.LastInsertId()
	require.NoError(t, err)
	for name, q := range channels {
		_, err := db.Exec(`INSERT INTO channel_quota (template_id, channel, quota) VALUES (?, ?, ?)`, id, name, q)
		require.NoError(t, err)
	}
	return id
}

func count(t *testing.T, db *sql.DB, q string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, db.QueryRow(q, args...).Scan(&n), q)
	return n
}

func requireInvalid(t *testing.T, err error, field string) {
	t.Helper()
	e, ok := coupon.AsError(err)
	require.True(t, ok, "want a *coupon.Error, got %v", err)
	assert.Equal(t, api.CodeInvalidArgument, e.Code, "%v", err)
	assert.Equal(t, field, e.Field, "%v", err)
	assert.NotEmpty(t, e.Message)
}

func requireNotFound(t *testing.T, err error) {
	t.Helper()
	e, ok := coupon.AsError(err)
	require.True(t, ok, "want a *coupon.Error, got %v", err)
	assert.Equal(t, api.CodeNotFound, e.Code, "%v", err)
}

func TestSetPolicyMergesValidatesAndAudits(t *testing.T) {
	db, _ := testenv.MySQL(t)
	ctx := context.Background()
	tpl := template(t, db, map[string]int64{"app": 100})

	v, err := quota.GetPolicy(ctx, db, tpl)
	require.NoError(t, err)
	assert.Equal(t, quota.Defaults(), v.Effective)
	assert.Equal(t, quota.Defaults(), v.Defaults)
	assert.True(t, v.Override.Empty())
	assert.Zero(t, v.Version)
	assert.Nil(t, v.UpdatedAt)

	v, err = quota.SetPolicy(ctx, db, tpl, quota.Override{Mode: ptr(quota.ModeAuto), Low: ptr(0.2)}, "alice", "TICKET-1", quota.SourceCLI, "")
	require.NoError(t, err)
	want := quota.Defaults()
	want.Mode, want.Low = quota.ModeAuto, 0.2
	assert.Equal(t, want, v.Effective)
	assert.Equal(t, int64(1), v.Version)
	assert.Equal(t, "alice", v.UpdatedBy)
	require.NotNil(t, v.UpdatedAt)
	assert.WithinDuration(t, time.Now(), *v.UpdatedAt, time.Minute, "updated_at is UTC now")

	// a partial change keeps the fields it does not name
	v, err = quota.SetPolicy(ctx, db, tpl, quota.Override{High: ptr(0.7)}, "bob", "TICKET-2", quota.SourceAPI, "")
	require.NoError(t, err)
	want.High = 0.7
	assert.Equal(t, want, v.Effective)
	assert.Equal(t, quota.Override{Mode: ptr(quota.ModeAuto), Low: ptr(0.2), High: ptr(0.7)}, v.Override)
	assert.Equal(t, int64(2), v.Version)
	assert.Equal(t, "bob", v.UpdatedBy)
	got, err := quota.GetPolicy(ctx, db, tpl)
	require.NoError(t, err)
	assert.Equal(t, v, got, "GetPolicy reads what SetPolicy returned")

	// a change that changes nothing writes nothing
	same, err := quota.SetPolicy(ctx, db, tpl, quota.Override{Low: ptr(0.2)}, "carol", "again", quota.SourceCLI, "")
	require.NoError(t, err)
	assert.Equal(t, v, same)
	assert.Equal(t, 2, count(t, db, `SELECT COUNT(*) FROM quota_policy_audit WHERE template_id = ?`, tpl))

	entries, err := quota.Audit(ctx, db, tpl, 0)
	require.NoError(t, err)
	require.Len(t, entries, 2)
	newest, first := entries[0], entries[1]
	assert.Equal(t, int64(2), newest.Version)
	assert.Equal(t, quota.ActionSet, newest.Action)
	assert.Equal(t, "bob", newest.ChangedBy)
	assert.Equal(t, "TICKET-2", newest.Reason)
	assert.Equal(t, quota.SourceAPI, newest.Source)
	require.NotNil(t, newest.Before)
	assert.Equal(t, quota.Override{Mode: ptr(quota.ModeAuto), Low: ptr(0.2)}, *newest.Before)
	require.NotNil(t, newest.After)
	assert.Equal(t, v.Override, *newest.After)
	assert.Nil(t, first.Before, "the first change had no row before it")
	assert.Equal(t, int64(1), first.Version)
	assert.Equal(t, quota.SourceCLI, first.Source)

	limited, err := quota.Audit(ctx, db, tpl, 1)
	require.NoError(t, err)
	require.Len(t, limited, 1)
	assert.Equal(t, newest.ID, limited[0].ID)
}

func TestSetPolicyRefusesBadChanges(t *testing.T) {
	db, _ := testenv.MySQL(t)
	ctx := context.Background()
	tpl := template(t, db, map[string]int64{"app": 100})
	_, err := quota.SetPolicy(ctx, db, tpl, quota.Override{Low: ptr(0.1)}, "alice", "start", quota.SourceCLI, "")
	require.NoError(t, err)
	before := count(t, db, `SELECT COUNT(*) FROM quota_policy_audit`)

	for _, c := range []struct {
		name       string
		change     quota.Override
		by, reason string
		field      string
	}{
		{"bad mode", quota.Override{Mode: ptr("sometimes")}, "a", "r", "mode"},
		{"fraction above 1", quota.Override{MaxShare: ptr(1.5)}, "a", "r", "max_share"},
		{"low above the default high", quota.Override{Low: ptr(0.9)}, "a", "r", "low"},
		{"high below the override's low", quota.Override{High: ptr(0.05)}, "a", "r", "low"},
		{"no claims", quota.Override{MinClaims: ptr(int64(0))}, "a", "r", "min_claims"},
		{"negative cooldown", quota.Override{CooldownSeconds: ptr(int64(-1))}, "a", "r", "cooldown_seconds"},
		{"nothing set", quota.Override{}, "a", "r", ""},
		{"no author", quota.Override{Low: ptr(0.2)}, " ", "r", "changed_by"},
		{"no reason", quota.Override{Low: ptr(0.2)}, "a", "", "reason"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := quota.SetPolicy(ctx, db, tpl, c.change, c.by, c.reason, quota.SourceCLI, "")
			requireInvalid(t, err, c.field)
		})
	}
	assert.Equal(t, before, count(t, db, `SELECT COUNT(*) FROM quota_policy_audit`), "a refused change writes nothing")
	v, err := quota.GetPolicy(ctx, db, tpl)
	require.NoError(t, err)
	assert.Equal(t, quota.Override{Low: ptr(0.1)}, v.Override)
	assert.Equal(t, int64(1), v.Version)
}

func TestMissingTemplate(t *testing.T) {
	db, _ := testenv.MySQL(t)
	ctx := context.Background()
	_, err := quota.GetPolicy(ctx, db, 999)
	requireNotFound(t, err)
	_, err = quota.SetPolicy(ctx, db, 999, quota.Override{Low: ptr(0.2)}, "a", "r", quota.SourceAPI, "")
	requireNotFound(t, err)
	_, err = quota.ResetPolicy(ctx, db, 999, "a", "r", quota.SourceAPI, "")
	requireNotFound(t, err)
	_, err = quota.Audit(ctx, db, 999, 10)
	requireNotFound(t, err)
	_, err = quota.Channels(ctx, db, 999)
	requireNotFound(t, err)
	assert.Zero(t, count(t, db, `SELECT COUNT(*) FROM quota_policy`))
	assert.Zero(t, count(t, db, `SELECT COUNT(*) FROM quota_policy_audit`))
}

func TestResetPolicy(t *testing.T) {
	db, _ := testenv.MySQL(t)
	ctx := context.Background()
	tpl := template(t, db, map[string]int64{"app": 100})

	// nothing to reset: not an error, nothing written
	v, err := quota.ResetPolicy(ctx, db, tpl, "alice", "cleanup", quota.SourceCLI, "")
	require.NoError(t, err)
	assert.Equal(t, quota.Defaults(), v.Effective)
	assert.Zero(t, count(t, db, `SELECT COUNT(*) FROM quota_policy_audit`))

	_, err = quota.SetPolicy(ctx, db, tpl, quota.Override{Mode: ptr(quota.ModeOff)}, "alice", "pause", quota.SourceCLI, "")
	require.NoError(t, err)
	_, err = quota.ResetPolicy(ctx, db, tpl, "", "cleanup", quota.SourceCLI, "")
	requireInvalid(t, err, "changed_by")

	v, err = quota.ResetPolicy(ctx, db, tpl, "bob", "campaign resumed", quota.SourceAPI, "")
	require.NoError(t, err)
	assert.Equal(t, quota.Defaults(), v.Effective)
	assert.True(t, v.Override.Empty())
	assert.Zero(t, v.Version)
	assert.Zero(t, count(t, db, `SELECT COUNT(*) FROM quota_policy WHERE template_id = ?`, tpl))

	entries, err := quota.Audit(ctx, db, tpl, 10)
	require.NoError(t, err)
	require.Len(t, entries, 2)
	r := entries[0]
	assert.Equal(t, quota.ActionReset, r.Action)
	assert.Equal(t, int64(2), r.Version)
	assert.Equal(t, "bob", r.ChangedBy)
	assert.Equal(t, "campaign resumed", r.Reason)
	assert.Equal(t, quota.SourceAPI, r.Source)
	require.NotNil(t, r.Before)
	assert.Equal(t, quota.Override{Mode: ptr(quota.ModeOff)}, *r.Before)
	assert.Nil(t, r.After)

	// a set after a reset continues the versions of the audit
	v, err = quota.SetPolicy(ctx, db, tpl, quota.Override{Mode: ptr(quota.ModeAuto)}, "carol", "again", quota.SourceCLI, "")
	require.NoError(t, err)
	assert.Equal(t, int64(3), v.Version)
}

func TestPublishedDefaultsApplyUnderOverrides(t *testing.T) {
	db, _ := testenv.MySQL(t)
	ctx := context.Background()
	a := template(t, db, map[string]int64{"app": 100})
	b := template(t, db, map[string]int64{"app": 100})

	bad := quota.Defaults()
	bad.Reserve = -0.1
	_, err := quota.PublishDefaults(ctx, db, bad, "cdc-1")
	requireInvalid(t, err, "reserve")

	cfg := quota.Defaults()
	cfg.Mode, cfg.High, cfg.MinClaims = quota.ModeAuto, 0.8, 50
	changed, err := quota.PublishDefaults(ctx, db, cfg, "cdc-1")
	require.NoError(t, err)
	assert.True(t, changed)
	changed, err = quota.PublishDefaults(ctx, db, cfg, "cdc-2")
	require.NoError(t, err)
	assert.False(t, changed, "the same defaults again change nothing")
	assert.Equal(t, 1, count(t, db, `SELECT COUNT(*) FROM quota_policy_audit WHERE template_id = 0 AND source = 'config'`))

	_, err = quota.SetPolicy(ctx, db, a, quota.Override{Low: ptr(0.5)}, "alice", "tighter", quota.SourceCLI, "")
	require.NoError(t, err)

	defaults, overrides, err := quota.LoadPolicies(ctx, db)
	require.NoError(t, err)
	assert.Equal(t, cfg, defaults)
	assert.Equal(t, map[int64]quota.Override{a: {Low: ptr(0.5)}}, overrides, "row 0 is not an override")
	want := cfg
	want.Low = 0.5
	assert.Equal(t, want, overrides[a].Apply(defaults))

	va, err := quota.GetPolicy(ctx, db, a)
	require.NoError(t, err)
	assert.Equal(t, want, va.Effective)
	assert.Equal(t, cfg, va.Defaults)
	vb, err := quota.GetPolicy(ctx, db, b)
	require.NoError(t, err)
	assert.Equal(t, cfg, vb.Effective)

	// validation uses the published defaults: low 0.7 is below their high 0.8, not the built-in 0.6
	_, err = quota.SetPolicy(ctx, db, b, quota.Override{Low: ptr(0.7)}, "alice", "ok under 0.8", quota.SourceCLI, "")
	require.NoError(t, err)
	cfg.High = 0.65
	changed, err = quota.PublishDefaults(ctx, db, cfg, "cdc-1")
	require.NoError(t, err)
	assert.True(t, changed)
	_, err = quota.SetPolicy(ctx, db, a, quota.Override{Low: ptr(0.66)}, "alice", "above the new high", quota.SourceCLI, "")
	requireInvalid(t, err, "low")

	entries, err := quota.Audit(ctx, db, 0, 10)
	require.NoError(t, err)
	require.Len(t, entries, 2)
	assert.Equal(t, int64(2), entries[0].Version)
	assert.Equal(t, "cdc-1", entries[0].ChangedBy)
	require.NotNil(t, entries[0].After)
	assert.Equal(t, cfg.Full(), *entries[0].After)
}

func TestPublishDefaultsConcurrently(t *testing.T) {
	db, _ := testenv.MySQL(t)
	ctx := context.Background()
	cfg := quota.Defaults()
	cfg.Mode = quota.ModeAuto
	var wg sync.WaitGroup
	results := make([]bool, 4)
	errs := make([]error, len(results))
	for i := range results {
		wg.Go(func() { results[i], errs[i] = quota.PublishDefaults(ctx, db, cfg, "cdc") })
	}
	wg.Wait()
	changed := 0
	for i := range results {
		require.NoError(t, errs[i])
		if results[i] {
			changed++
		}
	}
	assert.Equal(t, 1, changed, "one replica writes the defaults, the others find them")
	assert.Equal(t, 1, count(t, db, `SELECT COUNT(*) FROM quota_policy_audit`))
}

func TestChannels(t *testing.T) {
	db, _ := testenv.MySQL(t)
	ctx := context.Background()
	tpl := template(t, db, map[string]int64{"sms": 200, "app": 500, "web": 100})
	other := template(t, db, map[string]int64{"app": 10})
	_, err := db.Exec(`UPDATE channel_quota SET claimed = 300 WHERE template_id = ? AND channel = 'app'`, tpl)
	require.NoError(t, err)
	_, err = db.Exec(`INSERT INTO inventory_counter (template_id, channel, held, used, expired, returned, released)
		VALUES (?, 'app', 100, 150, 40, 10, 20), (?, 'sms', 5, 0, 0, 0, 5)`, tpl, tpl)
	require.NoError(t, err)
	at := time.Date(2026, 11, 29, 14, 0, 0, 0, time.UTC)
	_, err = db.Exec(`INSERT INTO quota_transfer_log (template_id, decision, from_channel, to_channel, amount, rule, mode, created_at)
		VALUES (?, 'd1', 'sms', 'app', 100, 'old', 'auto', ?),
		       (?, 'd2', 'sms', 'app', 60, 'rates', 'auto', ?),
		       (?, 'd3', 'web', 'app', 999, 'only recommended', 'signal', ?),
		       (?, 'd4', 'sms', 'app', 7, 'other template', 'auto', ?)`,
		tpl, at.Add(-time.Hour), tpl, at, tpl, at.Add(time.Hour), other, at.Add(2*time.Hour))
	require.NoError(t, err)

	got, err := quota.Channels(ctx, db, tpl)
	require.NoError(t, err)
	require.Len(t, got, 3)
	assert.Equal(t, []string{"app", "sms", "web"}, []string{got[0].Name, got[1].Name, got[2].Name})

	app := got[0]
	assert.Equal(t, quota.Channel{Name: "app", Quota: 500, Claimed: 300, Held: 100, Used: 150, Expired: 40, Returned: 10, Released: 20}, app.Channel)
	assert.Equal(t, int64(200), app.Claimable)
	require.NotNil(t, app.RedemptionRate)
	assert.InDelta(t, 150.0/280.0, *app.RedemptionRate, 1e-12)
	require.NotNil(t, app.LastTransfer)
	assert.Equal(t, quota.Transfer{ID: app.LastTransfer.ID, Decision: "d2", From: "sms", To: "app", Amount: 60, Rule: "rates", Mode: "auto", At: at},
		*app.LastTransfer, "the newest auto row of this template, not the signal or the other template's")
	require.NotNil(t, got[1].LastTransfer)
	assert.Equal(t, "d2", got[1].LastTransfer.Decision, "a giver's last transfer too")
	assert.Nil(t, got[1].RedemptionRate, "all of sms's claims were released: no rate")

	web := got[2]
	assert.Equal(t, quota.Channel{Name: "web", Quota: 100}, web.Channel, "no counter row: counts 0")
	assert.Equal(t, int64(100), web.Claimable)
	assert.Nil(t, web.RedemptionRate)
	assert.Nil(t, web.LastTransfer, "a signal row is not a transfer")

	buf, err := json.Marshal(app)
	require.NoError(t, err)
	var flat map[string]any
	require.NoError(t, json.Unmarshal(buf, &flat))
	for _, k := range []string{"channel", "quota", "claimed", "claimable", "held", "used", "expired", "returned", "released", "redemption_rate", "last_transfer"} {
		assert.Contains(t, flat, k)
	}
	assert.Equal(t, "sms", flat["last_transfer"].(map[string]any)["from"])
}
