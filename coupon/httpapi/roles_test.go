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
	"github.com/couponlink/couponlink/auth"
	"github.com/couponlink/couponlink/coupon/httpapi"
	"github.com/couponlink/couponlink/inventory"
)

// The tokens of the role tests: one per role, and an operator named alice.
const (
	viewerToken   = "viewer-token-0123456789abcdef0123456789abcdef"
	operatorToken = "operator-token-0123456789abcdef0123456789abcdef"
	adminToken    = "admin-token-0123456789abcdef0123456789abcdef"
)

func roleTokens() *auth.Tokens {
	return auth.Static(map[string]auth.Identity{
		viewerToken:   {Name: "vera", Role: auth.Viewer},
		operatorToken: {Name: "alice", Role: auth.Operator},
		adminToken:    {Name: "root-admin", Role: auth.Admin},
	})
}

// roleState is everything a route can write: the ledgers, policies, void
// requests, reconcile tasks and findings.
func roleState(t *testing.T, e *env) []any {
	t.Helper()
	return append(e.writeState(t), e.dump(t, `SELECT * FROM reconcile_task ORDER BY id`), e.dump(t, `SELECT * FROM finding ORDER BY fingerprint`),
		e.dump(t, `SELECT * FROM coupon_template ORDER BY id`))
}

// Every route × every role: a role below the route's answers 403
// forbidden in the error shape and writes nothing; the others are let
// through (any answer but 401 and 403). Each route of Routes must have a
// request here, so a new route is tested too.
func TestEveryRouteEveryRole(t *testing.T) {
	e := newEnv(t, envConfig{tokens: roleTokens(), token: adminToken})
	tpl := e.template(t, nil)
	c := e.claim(t, tpl, "u1", "app")
	red := e.claim(t, tpl, "u2", "app")
	e.redeem(t, red.UserCouponID, "o-1")
	_, err := e.db.Exec(`INSERT INTO reconcile_task (started_at, finished_at, status) VALUES (NOW(6), NOW(6), 'needs_review')`)
	require.NoError(t, err)
	seen := inventory.Seen{Source: api.FindingFromCDC, Kind: "double_spend", Subject: "coupon 9", Content: "x", Summary: "coupon 9 spent twice"}
	require.NoError(t, inventory.RecordFindings(context.Background(), e.db, time.Now(), []inventory.Seen{seen}))
	fp := seen.Fingerprint()
	id := func(n int64) string { return strconv.FormatInt(n, 10) }
	requests := map[string]struct {
		path string
		body any
	}{
		"POST /v1/templates":                                  {"/v1/templates", map[string]any{"name": "r", "total_quota": 10, "channels": map[string]int{"app": 10}, "valid_seconds": 3600}},
		"GET /v1/templates/{id}":                              {"/v1/templates/" + id(tpl), nil},
		"GET /v1/templates/{id}/inventory":                    {"/v1/templates/" + id(tpl) + "/inventory", nil},
		"POST /v1/claims":                                     {"/v1/claims", map[string]any{"template_id": tpl, "user_id": "u-role", "channel": "app", "request_id": uniq("rc")}},
		"POST /v1/redemptions":                                {"/v1/redemptions", map[string]any{"user_coupon_id": c.UserCouponID, "order_id": uniq("o")}},
		"POST /v1/refunds":                                    {"/v1/refunds", map[string]any{"user_coupon_id": red.UserCouponID, "order_id": "o-1", "mode": "restore"}},
		"POST /v1/voids":                                      {"/v1/voids", map[string]any{"user_coupon_ids": []int64{c.UserCouponID}, "reason": "r", "operator": "x", "request_id": uniq("v")}},
		"POST /v1/expire":                                     {"/v1/expire", nil},
		"GET /v1/templates/{id}/channels":                     {"/v1/templates/" + id(tpl) + "/channels", nil},
		"GET /v1/templates/{id}/quota-policy":                 {"/v1/templates/" + id(tpl) + "/quota-policy", nil},
		"PUT /v1/templates/{id}/quota-policy":                 {"/v1/templates/" + id(tpl) + "/quota-policy", map[string]any{"mode": "signal", "changed_by": "x", "reason": "r"}},
		"DELETE /v1/templates/{id}/quota-policy":              {"/v1/templates/" + id(tpl) + "/quota-policy?changed_by=x&reason=r", nil},
		"GET /v1/user-coupons/{id}/history":                   {"/v1/user-coupons/" + id(c.UserCouponID) + "/history", nil},
		"GET /v1/templates":                                   {"/v1/templates", nil},
		"GET /v1/templates/{id}/quota-policy/history":         {"/v1/templates/" + id(tpl) + "/quota-policy/history", nil},
		"GET /v1/templates/{id}/user-coupons":                 {"/v1/templates/" + id(tpl) + "/user-coupons", nil},
		"GET /v1/templates/{id}/trends":                       {"/v1/templates/" + id(tpl) + "/trends", nil},
		"GET /v1/reconcile/tasks":                             {"/v1/reconcile/tasks", nil},
		"POST /v1/reconcile/tasks/{id}/resolve":               {"/v1/reconcile/tasks/1/resolve", map[string]any{"operator": "x", "note": "n"}},
		"GET /v1/findings":                                    {"/v1/findings", nil},
		"POST /v1/findings/{fingerprint}/ack":                 {"/v1/findings/" + fp + "/ack", map[string]any{"operator": "x", "reason": "r"}},
		"POST /v1/findings/{fingerprint}/close":               {"/v1/findings/" + fp + "/close", map[string]any{"operator": "x", "reason": "r"}},
		"GET /v1/cdc/status":                                  {"/v1/cdc/status", nil},
		"POST /v1/findings/{fingerprint}/reopen":              {"/v1/findings/" + fp + "/reopen", map[string]any{"operator": "x", "reason": "r"}},
		"POST /v1/templates/{id}/quota-policy/preview":        {"/v1/templates/" + id(tpl) + "/quota-policy/preview", map[string]any{"mode": "off"}},
		"GET /v1/legacy":                                      {"/v1/legacy", nil},
		"GET /v1/legacy/templates/{id}":                       {"/v1/legacy/templates/1", nil},
		"GET /v1/legacy/templates/{id}/quota-policy":          {"/v1/legacy/templates/1/quota-policy", nil},
		"PUT /v1/legacy/templates/{id}/quota-policy":          {"/v1/legacy/templates/1/quota-policy", map[string]any{"mode": "signal", "changed_by": "x", "reason": "r"}},
		"POST /v1/legacy/templates/{id}/quota-policy/preview": {"/v1/legacy/templates/1/quota-policy/preview", map[string]any{"mode": "off"}},
		"GET /v1/legacy/templates/{id}/quota-policy/history":  {"/v1/legacy/templates/1/quota-policy/history", nil},
		"DELETE /v1/legacy/templates/{id}/quota-policy":       {"/v1/legacy/templates/1/quota-policy?changed_by=x&reason=r", nil},
	}
	roles := []struct {
		role  auth.Role
		token string
	}{{auth.Viewer, viewerToken}, {auth.Operator, operatorToken}, {auth.Admin, adminToken}}
	tested := 0
	for _, pattern := range e.srv.Routes() {
		method, path, _ := strings.Cut(pattern, " ")
		if !strings.HasPrefix(path, "/v1/") {
			continue
		}
		req, ok := requests[pattern]
		if !assert.True(t, ok, "route %s has no request in TestEveryRouteEveryRole", pattern) {
			continue
		}
		tested++
		need := httpapi.RoleOf(pattern)
		for _, r := range roles {
			before := roleState(t, e)
			got, err := newClient(e.url, r.token).do(method, req.path, req.body)
			require.NoError(t, err)
			if r.role < need {
				expectError(t, got, http.StatusForbidden, "forbidden")
				assert.Contains(t, string(got.Body), "nothing was written")
				assert.Equal(t, before, roleState(t, e), "%s by a %s wrote something", pattern, r.role)
			} else {
				assert.NotContains(t, []int{http.StatusUnauthorized, http.StatusForbidden}, got.Status, "%s by a %s: %s", pattern, r.role, got)
			}
		}
	}
	assert.Equal(t, len(requests), tested, "a request of the table names no route")
	// the roles asked of the writes
	assert.Equal(t, auth.Admin, httpapi.RoleOf("POST /v1/templates"))
	assert.Equal(t, auth.Operator, httpapi.RoleOf("POST /v1/voids"))
	assert.Equal(t, auth.Viewer, httpapi.RoleOf("GET /v1/findings"))
	// no token, or an unknown one: 401, whatever the route
	got, err := newClient(e.url, "").do("GET", "/v1/templates", nil)
	require.NoError(t, err)
	expectError(t, got, http.StatusUnauthorized, "unauthorized")
	got, err = newClient(e.url, operatorToken+"x").do("GET", "/v1/templates", nil)
	require.NoError(t, err)
	expectError(t, got, http.StatusUnauthorized, "unauthorized")
}

// The audit rows carry the token's name whatever the body says; the
// body's operator, when another name, is kept beside it (on_behalf_of),
// and the free text as written.
func TestAuditRowsCarryTheTokensName(t *testing.T) {
	e := newEnv(t, envConfig{tokens: roleTokens(), token: operatorToken})
	admin := newClient(e.url, adminToken)
	var tpl struct{ ID int64 }
	got, err := admin.do("POST", "/v1/templates", map[string]any{"name": "a", "total_quota": 10, "channels": map[string]int{"app": 10}, "valid_seconds": 3600})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, got.Status, got.String())
	require.NoError(t, got.decode(&tpl))
	c := e.claim(t, tpl.ID, "u1", "app")

	e.void(t, "v-audit", c.UserCouponID) // the helper's body says operator "ops-1"
	assert.Equal(t, []string{"alice ops-1 fraud"}, e.strings(t, `SELECT CONCAT_WS(' ', operator, on_behalf_of, reason) FROM void_request WHERE request_id = 'v-audit'`))
	assert.Equal(t, []string{"alice ops-1 fraud"}, e.strings(t, `SELECT CONCAT_WS(' ', operator, on_behalf_of, reason) FROM inventory_flow WHERE user_coupon_id = ? AND kind = 'void'`, c.UserCouponID))
	var h api.History
	e.expect(t, http.StatusOK, "GET", "/v1/user-coupons/"+strconv.FormatInt(c.UserCouponID, 10)+"/history", nil, &h)
	require.Len(t, h.Events, 2)
	assert.Equal(t, api.HistoryEvent{At: h.Events[1].At, Event: "voided", From: "AVAILABLE", To: "RETURNED", Reason: "fraud", Operator: "alice", OnBehalfOf: "ops-1", RequestID: "v-audit"}, h.Events[1])

	policy := "/v1/templates/" + strconv.FormatInt(tpl.ID, 10) + "/quota-policy"
	e.expect(t, http.StatusOK, "PUT", policy, map[string]any{"mode": "signal", "changed_by": "mallory", "reason": "TICKET-1"}, nil)
	e.expect(t, http.StatusOK, "DELETE", policy+"?changed_by=alice&reason=back", nil, nil)
	assert.Equal(t, []string{"alice mallory TICKET-1", "alice <null> back"},
		e.strings(t, `SELECT CONCAT_WS(' ', changed_by, COALESCE(on_behalf_of, '<null>'), reason) FROM quota_policy_audit WHERE template_id = ? ORDER BY id`, tpl.ID))
	var ph api.PolicyHistory
	e.expect(t, http.StatusOK, "GET", policy+"/history", nil, &ph)
	require.Len(t, ph.Entries, 2)
	assert.Equal(t, []string{"alice", "", "back"}, []string{ph.Entries[0].ChangedBy, ph.Entries[0].OnBehalfOf, ph.Entries[0].Reason})
	assert.Equal(t, []string{"alice", "mallory", "TICKET-1"}, []string{ph.Entries[1].ChangedBy, ph.Entries[1].OnBehalfOf, ph.Entries[1].Reason})

	_, err = e.db.Exec(`INSERT INTO reconcile_task (started_at, finished_at, status) VALUES (NOW(6), NOW(6), 'needs_review')`)
	require.NoError(t, err)
	var res api.Resolved
	e.expect(t, http.StatusOK, "POST", "/v1/reconcile/tasks/1/resolve", map[string]any{"operator": "mallory", "note": "fixed"}, &res)
	assert.Equal(t, api.Resolved{TaskID: 1, ResolvedBy: "alice", OnBehalfOf: "mallory", Note: "fixed"}, res)
	assert.Equal(t, []string{"alice mallory fixed"}, e.strings(t, `SELECT CONCAT_WS(' ', resolved_by, resolved_on_behalf_of, resolved_note) FROM reconcile_task WHERE id = 1`))
	assert.Equal(t, []string{"alice mallory fixed"}, e.strings(t, `SELECT CONCAT_WS(' ', actor, on_behalf_of, reason) FROM correction_log WHERE task_id = 1`))
	var tasks api.ReconcileTasks
	e.expect(t, http.StatusOK, "GET", "/v1/reconcile/tasks", nil, &tasks)
	require.Len(t, tasks.Passes, 1)
	assert.Equal(t, []string{"alice", "mallory", "fixed"}, []string{tasks.Passes[0].ResolvedBy, tasks.Passes[0].ResolvedOnBehalfOf, tasks.Passes[0].ResolvedNote})

	seen := inventory.Seen{Source: api.FindingFromCDC, Kind: "double_spend", Subject: "coupon 9", Content: "x", Summary: "s"}
	require.NoError(t, inventory.RecordFindings(context.Background(), e.db, time.Now(), []inventory.Seen{seen}))
	var f api.Finding
	e.expect(t, http.StatusOK, "POST", "/v1/findings/"+seen.Fingerprint()+"/ack", map[string]any{"operator": "alice", "reason": "known"}, &f) // the token's own name: none beside it
	assert.Equal(t, []string{"alice", "", "known"}, []string{f.AcknowledgedBy, f.AcknowledgedOnBehalfOf, f.AcknowledgedReason})
	e.expect(t, http.StatusOK, "POST", "/v1/findings/"+seen.Fingerprint()+"/close", map[string]any{"operator": "mallory", "reason": "done"}, &f)
	assert.Equal(t, []string{"alice", "mallory", "done"}, []string{f.ClosedBy, f.ClosedOnBehalfOf, f.ClosedReason})
	e.expect(t, http.StatusOK, "POST", "/v1/findings/"+seen.Fingerprint()+"/reopen", map[string]any{"operator": "bob", "reason": "again"}, &f)
	assert.Equal(t, []string{"alice", "bob", "again"}, []string{f.ReopenedBy, f.ReopenedOnBehalfOf, f.ReopenedReason})
	assert.Equal(t, []string{"alice <null> alice mallory alice bob"}, e.strings(t, `SELECT CONCAT_WS(' ', acknowledged_by, COALESCE(acknowledged_on_behalf_of, '<null>'),
		closed_by, closed_on_behalf_of, reopened_by, reopened_on_behalf_of) FROM finding WHERE fingerprint = ?`, seen.Fingerprint()))
	var fs api.Findings
	e.expect(t, http.StatusOK, "GET", "/v1/findings", nil, &fs)
	require.Len(t, fs.Findings, 1)
	assert.Equal(t, []string{"mallory", "bob"}, []string{fs.Findings[0].ClosedOnBehalfOf, fs.Findings[0].ReopenedOnBehalfOf})
}
