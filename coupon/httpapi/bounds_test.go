package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/quota"
)

// Every duration and number of a policy or a template is bounded: above
// its maximum the request is invalid_argument naming the field, and
// nothing is written; at the maximum it is accepted.
func TestBoundsOverHTTP(t *testing.T) {
	e := newEnv(t)
	tpl := e.template(t, nil)
	put := func(field string, v any) reply {
		return e.must(t, "PUT", policyPath(tpl), map[string]any{field: v, "changed_by": "ann", "reason": "bounds"})
	}
	for _, tc := range []struct {
		field string
		v     any
	}{
		{"cooldown_seconds", int64(1e10)},
		{"cooldown_seconds", rawNumber("1e10")},
		{"cooldown_seconds", coupon.MaxSeconds + 1},
		{"min_age_seconds", int64(1e10)},
		{"min_age_seconds", coupon.MaxSeconds + 1},
		{"min_claims", int64(coupon.MaxQuota) + 1},
	} {
		r := put(tc.field, tc.v)
		assert.Equal(t, tc.field, expectError(t, r, http.StatusBadRequest, "invalid_argument").Field, "%s = %v", tc.field, tc.v)
	}
	assert.Equal(t, 0, e.count(t, `SELECT COUNT(*) FROM quota_policy_audit`), "refused changes write nothing")

	var v quota.PolicyView
	e.expect(t, http.StatusOK, "PUT", policyPath(tpl), map[string]any{"cooldown_seconds": coupon.MaxSeconds,
		"min_age_seconds": coupon.MaxSeconds, "min_claims": coupon.MaxQuota, "changed_by": "ann", "reason": "never again"}, &v)
	assert.Equal(t, [3]int64{coupon.MaxSeconds, coupon.MaxSeconds, coupon.MaxQuota},
		[3]int64{v.Effective.CooldownSeconds, v.Effective.MinAgeSeconds, v.Effective.MinClaims})

	before := e.ledgers(t)
	for _, tc := range []struct {
		field string
		body  map[string]any
	}{
		{"total_quota", map[string]any{"total_quota": int64(coupon.MaxQuota) + 1, "channels": map[string]int64{"app": coupon.MaxQuota + 1}}},
		{"valid_seconds", map[string]any{"valid_seconds": int64(1e10)}},
		{"release_cooldown_seconds", map[string]any{"release_cooldown_seconds": int64(1e10)}},
		{"per_user_limit", map[string]any{"per_user_limit": int64(coupon.MaxPerUserLimit) + 1}},
	} {
		b := map[string]any{"name": "big", "total_quota": 10, "channels": map[string]int{"app": 10}, "valid_seconds": 60}
		for k, v := range tc.body {
			b[k] = v
		}
		r := e.must(t, "POST", "/v1/templates", b)
		assert.Equal(t, tc.field, expectError(t, r, http.StatusBadRequest, "invalid_argument").Field)
	}
	assert.Equal(t, before, e.ledgers(t), "refused templates write nothing")
	e.template(t, map[string]any{"total_quota": coupon.MaxQuota, "channels": map[string]int64{"app": coupon.MaxQuota},
		"valid_seconds": coupon.MaxSeconds, "release_cooldown_seconds": coupon.MaxSeconds, "per_user_limit": coupon.MaxPerUserLimit})
}

// rawNumber is a JSON number sent as written.
type rawNumber string

func (n rawNumber) MarshalJSON() ([]byte, error) { return []byte(n), nil }
