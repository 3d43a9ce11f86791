package httpapi_test

import (
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/quota"
)

func policyPath(tpl int64) string { return fmt.Sprintf("/v1/templates/%d/quota-policy", tpl) }

func TestQuotaPolicyRoutes(t *testing.T) {
	e := newEnv(t)
	tpl := e.template(t, nil)

	var v quota.PolicyView
	e.expect(t, http.StatusOK, "GET", policyPath(tpl), nil, &v)
	assert.Equal(t, tpl, v.Template)
	assert.Equal(t, quota.Defaults(), v.Effective)
	assert.True(t, v.Override.Empty())
	assert.Nil(t, v.UpdatedAt)

	e.expect(t, http.StatusOK, "PUT", policyPath(tpl),
		map[string]any{"mode": "auto", "low": 0.25, "cooldown_seconds": 600, "changed_by": "alice", "reason": "TICKET-7"}, &v)
	want := quota.Defaults()
	want.Mode, want.Low, want.CooldownSeconds = quota.ModeAuto, 0.25, 600
	assert.Equal(t, want, v.Effective)
	assert.Equal(t, int64(1), v.Version)
	assert.Equal(t, "alice", v.UpdatedBy)

	var got quota.PolicyView
	e.expect(t, http.StatusOK, "GET", policyPath(tpl), nil, &got)
	assert.Equal(t, want, got.Effective)
	require.NotNil(t, got.UpdatedAt)
	assert.Equal(t, []string{"set alice TICKET-7 api"},
		e.strings(t, `SELECT CONCAT_WS(' ', action, changed_by, reason, source) FROM quota_policy_audit WHERE template_id = ?`, tpl))
	assert.Equal(t, []string{`{"mode":"auto","low":0.25,"cooldown_seconds":600}`},
		e.strings(t, `SELECT after_json FROM quota_policy_audit WHERE template_id = ?`, tpl))

	q := url.Values{"changed_by": {"bob"}, "reason": {"back to defaults"}}
	v = quota.PolicyView{}
	e.expect(t, http.StatusOK, "DELETE", policyPath(tpl)+"?"+q.Encode(), nil, &v)
	assert.Equal(t, quota.Defaults(), v.Effective)
	assert.True(t, v.Override.Empty())
	assert.Equal(t, []string{"reset bob back to defaults api", "set alice TICKET-7 api"},
		e.strings(t, `SELECT CONCAT_WS(' ', action, changed_by, reason, source) FROM quota_policy_audit WHERE template_id = ? ORDER BY id DESC`, tpl))
	assert.Equal(t, 0, e.count(t, `SELECT COUNT(*) FROM quota_policy`))
}

func TestQuotaPolicyErrors(t *testing.T) {
	e := newEnv(t)
	tpl := e.template(t, nil)
	ok := func(extra map[string]any) map[string]any {
		b := map[string]any{"low": 0.2, "changed_by": "alice", "reason": "why"}
		for k, v := range extra {
			if v == nil {
				delete(b, k)
			} else {
				b[k] = v
			}
		}
		return b
	}
	cases := []struct {
		name, method, path string
		body               any
		status             int
		code, field        string
	}{
		{"a bad mode", "PUT", policyPath(tpl), ok(map[string]any{"mode": "always"}), 400, "invalid_argument", "mode"},
		{"a fraction above 1", "PUT", policyPath(tpl), ok(map[string]any{"reserve": 2}), 400, "invalid_argument", "reserve"},
		{"low above high", "PUT", policyPath(tpl), ok(map[string]any{"low": 0.9}), 400, "invalid_argument", "low"},
		{"a string for a number", "PUT", policyPath(tpl), ok(map[string]any{"high": "0.7"}), 400, "invalid_argument", "high"},
		{"a number for the mode", "PUT", policyPath(tpl), ok(map[string]any{"mode": 1}), 400, "invalid_argument", "mode"},
		{"a fraction for an integer", "PUT", policyPath(tpl), ok(map[string]any{"min_claims": 1.5}), 400, "invalid_argument", "min_claims"},
		{"no changed_by", "PUT", policyPath(tpl), ok(map[string]any{"changed_by": nil}), 400, "invalid_argument", "changed_by"},
		{"no reason", "PUT", policyPath(tpl), ok(map[string]any{"reason": ""}), 400, "invalid_argument", "reason"},
		{"an unknown field", "PUT", policyPath(tpl), ok(map[string]any{"cooldown": 60}), 400, "invalid_argument", "cooldown"},
		{"nothing to change", "PUT", policyPath(tpl), map[string]any{"changed_by": "a", "reason": "r"}, 400, "invalid_argument", ""},
		{"an empty body", "PUT", policyPath(tpl), rawBody(``), 400, "invalid_argument", ""},
		{"a reset without changed_by", "DELETE", policyPath(tpl) + "?reason=r", nil, 400, "invalid_argument", "changed_by"},
		{"a reset with an unknown parameter", "DELETE", policyPath(tpl) + "?changed_by=a&reason=r&force=1", nil, 400, "invalid_argument", "force"},
		{"a policy of a missing template", "GET", policyPath(424242), nil, 404, "not_found", ""},
		{"a change of a missing template", "PUT", policyPath(424242), ok(nil), 404, "not_found", ""},
		{"a reset of a missing template", "DELETE", policyPath(424242) + "?changed_by=a&reason=r", nil, 404, "not_found", ""},
		{"channels of a missing template", "GET", "/v1/templates/424242/channels", nil, 404, "not_found", ""},
		{"a bad path id", "PUT", "/v1/templates/x/quota-policy", ok(nil), 400, "invalid_argument", "id"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := e.must(t, tc.method, tc.path, tc.body)
			got := expectError(t, r, tc.status, tc.code)
			assert.Equal(t, tc.field, got.Field, "field of %s", r)
		})
	}
	assert.Equal(t, 0, e.count(t, `SELECT COUNT(*) FROM quota_policy`), "refused changes write nothing")
	assert.Equal(t, 0, e.count(t, `SELECT COUNT(*) FROM quota_policy_audit`))
}

func TestQuotaRoutesMethodNotAllowed(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct{ method, path, allow string }{
		{"POST", "/v1/templates/1/quota-policy", "GET, PUT, DELETE"},
		{"PATCH", "/v1/templates/1/quota-policy", "GET, PUT, DELETE"},
		{"PUT", "/v1/templates/1/channels", "GET"},
		{"DELETE", "/v1/templates/1", "GET"},
		{"DELETE", "/v1/templates", "POST, GET"},
	} {
		r := e.must(t, c.method, c.path, nil)
		expectError(t, r, http.StatusMethodNotAllowed, "method_not_allowed")
		assert.Equal(t, c.allow, r.Header.Get("Allow"), "%s %s", c.method, c.path)
	}
}

func TestChannelsRoute(t *testing.T) {
	e := newEnv(t)
	tpl, _ := e.usedCoupon(t) // app 60, sms 40
	_, err := e.db.Exec(`INSERT INTO inventory_counter (template_id, channel, held, used) VALUES (?, 'app', 3, 1)`, tpl)
	require.NoError(t, err)
	at := time.Date(2026, 11, 29, 14, 0, 0, 0, time.UTC)
	_, err = e.db.Exec(`INSERT INTO quota_transfer_log (template_id, decision, from_channel, to_channel, amount, rule, mode, created_at)
		VALUES (?, 'abc', 'sms', 'app', 10, 'sms below low', 'auto', ?)`, tpl, at)
	require.NoError(t, err)

	var raw map[string]any
	e.expect(t, http.StatusOK, "GET", fmt.Sprintf("/v1/templates/%d/channels", tpl), nil, &raw)
	assert.Equal(t, float64(tpl), raw["template"])
	chans, ok := raw["channels"].([]any)
	require.True(t, ok, "channels is an array: %v", raw)
	require.Len(t, chans, 2)
	app := chans[0].(map[string]any)
	assert.Equal(t, map[string]any{
		"channel": "app", "quota": 60.0, "claimed": 1.0, "claimable": 59.0,
		"held": 3.0, "used": 1.0, "expired": 0.0, "returned": 0.0, "released": 0.0,
		"redemption_rate": 0.25,
		"last_transfer": map[string]any{"id": app["last_transfer"].(map[string]any)["id"], "decision": "abc",
			"from": "sms", "to": "app", "amount": 10.0, "rule": "sms below low", "mode": "auto", "at": "2026-11-29T14:00:00Z"},
	}, app)
	sms := chans[1].(map[string]any)
	assert.Equal(t, "sms", sms["channel"])
	assert.Contains(t, sms, "redemption_rate")
	assert.Nil(t, sms["redemption_rate"], "no slot held: null")
}
