package quota_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/api"
	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/quota"
)

// A legacy template's policy: a quota_policy row of its own, audited;
// auto refused, and inherited auto in force as signal; an id that is also
// one of couponlink's own templates refused.
func TestLegacyPolicyStore(t *testing.T) {
	db, _ := testenv.MySQL(t)
	ctx := context.Background()
	const legacy = 990001 // the shop's id: no coupon_template row
	refused := func(err error, field string) {
		t.Helper()
		e, ok := coupon.AsError(err)
		require.True(t, ok, "want a *coupon.Error, got %v", err)
		assert.Equal(t, api.CodeLegacyPolicyRefused, e.Code)
		assert.Equal(t, field, e.Field)
		assert.Equal(t, 409, e.Code.Status())
	}

	_, err := quota.SetLegacyPolicy(ctx, db, legacy, quota.Override{Mode: ptr(quota.ModeAuto)}, "ann", "t", quota.SourceAPI, "")
	refused(err, "mode")
	assert.Zero(t, count(t, db, `SELECT COUNT(*) FROM quota_policy WHERE template_id = ?`, legacy), "nothing written")

	v, err := quota.SetLegacyPolicy(ctx, db, legacy, quota.Override{Mode: ptr(quota.ModeSignal), MinClaims: ptr(int64(5))}, "ann", "t", quota.SourceAPI, "")
	require.NoError(t, err)
	assert.Equal(t, quota.ModeSignal, v.Effective.Mode)
	assert.EqualValues(t, 5, v.Effective.MinClaims)
	assert.Equal(t, 1, count(t, db, `SELECT COUNT(*) FROM quota_policy_audit WHERE template_id = ?`, legacy))

	// the defaults say auto: a legacy campaign runs it as signal
	_, err = quota.PublishDefaults(ctx, db, func() quota.Policy { p := quota.Defaults(); p.Mode = quota.ModeAuto; return p }(), "cdc")
	require.NoError(t, err)
	_, err = quota.SetLegacyPolicy(ctx, db, legacy, quota.Override{Mode: ptr(quota.ModeOff)}, "ann", "t", quota.SourceAPI, "")
	require.NoError(t, err)
	v, err = quota.SetLegacyPolicy(ctx, db, legacy, quota.Override{Low: ptr(0.2)}, "ann", "t", quota.SourceAPI, "")
	require.NoError(t, err)
	assert.Equal(t, quota.ModeOff, v.Effective.Mode)
	_, err = db.Exec(`UPDATE quota_policy SET mode = NULL WHERE template_id = ?`, legacy)
	require.NoError(t, err)
	v, err = quota.GetLegacyPolicy(ctx, db, legacy)
	require.NoError(t, err)
	assert.Equal(t, quota.ModeAuto, v.Defaults.Mode)
	assert.Equal(t, quota.ModeSignal, v.Effective.Mode, "inherited auto is in force as signal")

	own := template(t, db, map[string]int64{"app": 10, "sms": 10})
	_, err = quota.SetLegacyPolicy(ctx, db, own, quota.Override{Mode: ptr(quota.ModeSignal)}, "ann", "t", quota.SourceAPI, "")
	refused(err, "id")
	_, err = quota.GetLegacyPolicy(ctx, db, own)
	refused(err, "id")
}

// One rule for changed_by with an identity (a token's name) or without:
// checked as given first, then the identity recorded and the name given
// beside it (on_behalf_of), the reason as written; own and legacy alike.
func TestPolicyChangedByWithAnIdentity(t *testing.T) {
	db, _ := testenv.MySQL(t)
	ctx := context.Background()
	const legacy = 990002
	own := template(t, db, map[string]int64{"app": 10, "sms": 10})
	long := strings.Repeat("a", 65)
	for _, identity := range []string{"", "admin"} {
		for _, by := range []string{"", "  ", long, strings.Repeat("a", 129)} {
			_, err := quota.SetPolicy(ctx, db, own, quota.Override{Mode: ptr(quota.ModeSignal)}, by, "t", quota.SourceAPI, identity)
			e, ok := coupon.AsError(err)
			require.True(t, ok, "by %q identity %q: %v", by, identity, err)
			assert.Equal(t, "changed_by", e.Field)
			_, err = quota.ResetLegacyPolicy(ctx, db, legacy, by, "t", quota.SourceAPI, identity)
			e, ok = coupon.AsError(err)
			require.True(t, ok, "by %q identity %q: %v", by, identity, err)
			assert.Equal(t, "changed_by", e.Field)
		}
		_, err := quota.SetLegacyPolicy(ctx, db, legacy, quota.Override{Mode: ptr(quota.ModeSignal)}, long, "t", quota.SourceAPI, identity)
		e, _ := coupon.AsError(err)
		require.NotNil(t, e)
		assert.Equal(t, "changed_by is longer than 64 bytes", e.Message)
	}
	assert.Zero(t, count(t, db, `SELECT COUNT(*) FROM quota_policy_audit WHERE template_id IN (?, ?)`, own, legacy), "nothing written")

	reason := strings.Repeat("r", 255)
	_, err := quota.SetLegacyPolicy(ctx, db, legacy, quota.Override{Mode: ptr(quota.ModeSignal)}, " ann ", reason, quota.SourceAPI, "admin")
	require.NoError(t, err)
	_, err = quota.ResetLegacyPolicy(ctx, db, legacy, "admin", "back", quota.SourceAPI, "admin")
	require.NoError(t, err)
	_, err = quota.SetPolicy(ctx, db, own, quota.Override{Mode: ptr(quota.ModeSignal)}, "bob", "cli", quota.SourceCLI, "")
	require.NoError(t, err)
	entries, err := quota.LegacyAudit(ctx, db, legacy, 10)
	require.NoError(t, err)
	require.Len(t, entries, 2)
	assert.Equal(t, []string{"admin", "", "back"}, []string{entries[0].ChangedBy, entries[0].OnBehalfOf, entries[0].Reason})
	assert.Equal(t, []string{"admin", "ann", reason}, []string{entries[1].ChangedBy, entries[1].OnBehalfOf, entries[1].Reason})
	entries, err = quota.Audit(ctx, db, own, 10)
	require.NoError(t, err)
	require.Len(t, entries, 1)
	assert.Equal(t, []string{"bob", ""}, []string{entries[0].ChangedBy, entries[0].OnBehalfOf}, "no identity: the name as given")
	assert.Equal(t, 1, count(t, db, `SELECT COUNT(*) FROM quota_policy_audit WHERE on_behalf_of IS NULL AND template_id = ?`, own))
}
