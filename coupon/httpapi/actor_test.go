package httpapi_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/api"
	"github.com/couponlink/couponlink/inventory"
)

// actorFixture is what the actor cases write to: a template with an
// available coupon, a reconcile task that needs review and an open
// finding; the same on every env it is made on.
type actorFixture struct {
	tpl, coupon int64
	finding     string
}

func newActorFixture(t *testing.T, e *env) actorFixture {
	t.Helper()
	tpl := e.template(t, nil)
	c := e.claim(t, tpl, "u1", "app")
	_, err := e.db.Exec(`INSERT INTO reconcile_task (started_at, finished_at, status) VALUES (NOW(6), NOW(6), 'needs_review')`)
	require.NoError(t, err)
	seen := inventory.Seen{Source: api.FindingFromCDC, Kind: "double_spend", Subject: "coupon 9", Content: "x", Summary: "s"}
	require.NoError(t, inventory.RecordFindings(context.Background(), e.db, time.Now(), []inventory.Seen{seen}))
	return actorFixture{tpl: tpl, coupon: c.UserCouponID, finding: seen.Fingerprint()}
}

// One rule for operator and changed_by, with a token or without: the
// body's value is checked as openapi.json describes it (required, not
// blank, at most 64 bytes) before the token's name applies, and refused
// with the very error an open server answers; nothing is written.
func TestActorCheckedAsSentWithAToken(t *testing.T) {
	open := newEnv(t)
	token := newEnv(t, envConfig{tokens: roleTokens(), token: adminToken})
	fo, ft := newActorFixture(t, open), newActorFixture(t, token)
	require.Equal(t, fo, ft, "the two servers' fixtures are alike")
	fx := ft
	long := func(n int) string { return strings.Repeat("a", n) }
	void := func(op any) map[string]any {
		b := map[string]any{"user_coupon_ids": []int64{fx.coupon}, "reason": "fraud", "request_id": uniq("v")}
		if op != nil {
			b["operator"] = op
		}
		return b
	}
	policy := "/v1/templates/" + strconv.FormatInt(fx.tpl, 10) + "/quota-policy"
	put := func(by *string) map[string]any {
		b := map[string]any{"mode": "signal", "reason": "TICKET-1"}
		if by != nil {
			b["changed_by"] = *by
		}
		return b
	}
	ptr := func(s string) *string { return &s }
	cases := []struct {
		name, method, path string
		body               any
		field              string
	}{
		{"void operator null", "POST", "/v1/voids", void(nil), "operator"},
		{"void operator empty", "POST", "/v1/voids", void(""), "operator"},
		{"void operator blank", "POST", "/v1/voids", void("   "), "operator"},
		{"void operator 65 bytes", "POST", "/v1/voids", void(long(65)), "operator"},
		{"policy changed_by missing", "PUT", policy, put(nil), "changed_by"},
		{"policy changed_by blank", "PUT", policy, put(ptr(" ")), "changed_by"},
		{"policy changed_by 65 bytes", "PUT", policy, put(ptr(long(65))), "changed_by"},
		{"policy changed_by 129 bytes", "PUT", policy, put(ptr(long(129))), "changed_by"},
		{"policy reset changed_by missing", "DELETE", policy + "?reason=back", nil, "changed_by"},
		{"policy reset changed_by 200 bytes", "DELETE", policy + "?changed_by=" + long(200) + "&reason=back", nil, "changed_by"},
		{"resolve operator blank", "POST", "/v1/reconcile/tasks/1/resolve", map[string]any{"operator": " ", "note": "n"}, "operator"},
		{"resolve operator 65 bytes", "POST", "/v1/reconcile/tasks/1/resolve", map[string]any{"operator": long(65), "note": "n"}, "operator"},
		{"ack operator missing", "POST", "/v1/findings/" + fx.finding + "/ack", map[string]any{"reason": "r"}, "operator"},
		{"close operator 65 bytes", "POST", "/v1/findings/" + fx.finding + "/close", map[string]any{"operator": long(65), "reason": "r"}, "operator"},
		{"reopen operator blank", "POST", "/v1/findings/" + fx.finding + "/reopen", map[string]any{"operator": "\t", "reason": "r"}, "operator"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want := expectError(t, open.must(t, c.method, c.path, c.body), http.StatusBadRequest, "invalid_argument")
			assert.Equal(t, c.field, want.Field)
			before := roleState(t, token)
			got := expectError(t, token.must(t, c.method, c.path, c.body), http.StatusBadRequest, "invalid_argument")
			assert.Equal(t, want, got, "the same error as on a server without tokens")
			assert.Equal(t, before, roleState(t, token), "nothing was written")
		})
	}
	// the document says so: required, at least one character, at most 64 bytes
	assert.Equal(t, "changed_by is longer than 64 bytes", expectError(t, token.must(t, "PUT", policy, put(ptr(long(65)))), http.StatusBadRequest, "invalid_argument").Message)
}

// The reason is kept as written, and its limit is the user's text alone:
// 250 bytes for someone else ("x") is accepted and stored intact, the
// token's name as the operator and x beside it.
func TestVoidReasonKeptAsWrittenWithAToken(t *testing.T) {
	e := newEnv(t, envConfig{tokens: roleTokens(), token: adminToken})
	fx := newActorFixture(t, e)
	reason := strings.Repeat("r", 250)
	var out voidReply
	e.expect(t, http.StatusOK, "POST", "/v1/voids", map[string]any{"user_coupon_ids": []int64{fx.coupon}, "reason": reason, "operator": "x", "request_id": "v-250"}, &out)
	require.Len(t, out.Results, 1)
	assert.Equal(t, "voided", out.Results[0].Result)
	want := []string{"root-admin|x|" + reason}
	assert.Equal(t, want, e.strings(t, `SELECT CONCAT_WS('|', operator, on_behalf_of, reason) FROM void_request WHERE request_id = 'v-250'`))
	assert.Equal(t, want, e.strings(t, `SELECT CONCAT_WS('|', operator, on_behalf_of, reason) FROM inventory_flow WHERE user_coupon_id = ? AND kind = 'void'`, fx.coupon))
	// a replay is the same request; another on_behalf_of under its request_id is not
	e.expect(t, http.StatusOK, "POST", "/v1/voids", map[string]any{"user_coupon_ids": []int64{fx.coupon}, "reason": reason, "operator": "x", "request_id": "v-250"}, &out)
	assert.True(t, out.Results[0].Replayed)
	expectError(t, e.must(t, "POST", "/v1/voids", map[string]any{"user_coupon_ids": []int64{fx.coupon}, "reason": reason, "operator": "y", "request_id": "v-250"}),
		http.StatusConflict, "idempotency_conflict")
	// the token's own name: nothing beside it
	c2 := e.claim(t, fx.tpl, "u2", "app")
	e.expect(t, http.StatusOK, "POST", "/v1/voids", map[string]any{"user_coupon_ids": []int64{c2.UserCouponID}, "reason": "r", "operator": " root-admin ", "request_id": "v-own"}, &out)
	assert.Equal(t, []string{"root-admin <null>"}, e.strings(t, `SELECT CONCAT_WS(' ', operator, COALESCE(on_behalf_of, '<null>')) FROM void_request WHERE request_id = 'v-own'`))
}
