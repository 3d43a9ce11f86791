package quota_test

import (
	"context"
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
