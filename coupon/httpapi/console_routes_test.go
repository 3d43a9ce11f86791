package httpapi_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/inventory/view"
	"github.com/couponlink/couponlink/quota"
)

// The read and operations routes the operator console uses.

type catalogPage struct {
	Templates []struct {
		ID             int64    `json:"id"`
		Name           string   `json:"name"`
		TotalQuota     int64    `json:"total_quota"`
		Quota          int64    `json:"quota"`
		Claimed        int64    `json:"claimed"`
		Claimable      int64    `json:"claimable"`
		Held           int64    `json:"held"`
		Used           int64    `json:"used"`
		Frozen         int64    `json:"frozen"`
		RedemptionRate *float64 `json:"redemption_rate"`
		Anomalies      int64    `json:"anomalies"`
		Reconcile      string   `json:"reconcile"`
	} `json:"templates"`
	NextAfter int64 `json:"next_after"`
}

// bulkTemplates inserts n templates named prefix-i in one statement.
func (e *env) bulkTemplates(t *testing.T, prefix string, n int) {
	t.Helper()
	var b strings.Builder
	args := make([]any, 0, n)
	b.WriteString(`INSERT INTO coupon_template (name, total_quota, valid_seconds) VALUES `)
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString("(?, 10, 3600)")
		args = append(args, fmt.Sprintf("%s-%d", prefix, i))
	}
	_, err := e.db.Exec(b.String(), args...)
	require.NoError(t, err)
}

func TestTemplatesListPagesPastAThousand(t *testing.T) {
	e := newEnv(t)
	first := e.template(t, map[string]any{"name": "needle campaign"})
	e.bulkTemplates(t, "bulk", 1030)

	seen := map[int64]bool{}
	after, pages := int64(0), 0
	for {
		var p catalogPage
		e.expect(t, http.StatusOK, "GET", fmt.Sprintf("/v1/templates?limit=400&after=%d", after), nil, &p)
		pages++
		for _, tp := range p.Templates {
			require.Greater(t, tp.ID, after, "ids ascend across pages")
			require.False(t, seen[tp.ID], "template %d twice", tp.ID)
			seen[tp.ID] = true
		}
		if p.NextAfter == 0 {
			break
		}
		require.Len(t, p.Templates, 400, "a page that is not the last is full")
		after = p.NextAfter
	}
	assert.Len(t, seen, 1031)
	assert.Equal(t, 3, pages)

	var p catalogPage
	e.expect(t, http.StatusOK, "GET", "/v1/templates?q=NEEDLE", nil, &p)
	require.Len(t, p.Templates, 1, "search by name, without case")
	assert.Equal(t, first, p.Templates[0].ID)
	e.expect(t, http.StatusOK, "GET", fmt.Sprintf("/v1/templates?q=%d", first), nil, &p)
	require.NotEmpty(t, p.Templates)
	assert.Equal(t, first, p.Templates[0].ID, "search by id")
	e.expect(t, http.StatusOK, "GET", "/v1/templates?q="+url.QueryEscape("bulk-102"), nil, &p)
	assert.Len(t, p.Templates, 11, "bulk-102 and bulk-1020..1029")
	e.expect(t, http.StatusOK, "GET", "/v1/templates?q=%25", nil, &p)
	assert.Empty(t, p.Templates, "a %% is a character, not a wildcard")
	e.expect(t, http.StatusOK, "GET", "/v1/templates", nil, &p)
	assert.Len(t, p.Templates, view.DefaultCatalogLimit)
}

func TestTemplatesListStates(t *testing.T) {
	e := newEnv(t)
	tpl := e.template(t, map[string]any{"name": "states"}) // app 60, sms 40
	other := e.template(t, map[string]any{"name": "other"})
	for i := range 3 {
		e.claim(t, tpl, fmt.Sprintf("u%d", i), "app")
	}
	// the cdc's counters (no cdc runs here): 1 held, 1 used, 1 returned and released
	_, err := e.db.Exec(`INSERT INTO inventory_counter (template_id, channel, held, used, returned, released) VALUES (?, 'app', 1, 1, 1, 1), (?, 'sms', 0, 0, 2, 0)`, tpl, tpl)
	require.NoError(t, err)
	_, err = e.db.Exec(`INSERT INTO cdc_anomaly (kind, template_id, detail, binlog_file, binlog_pos) VALUES ('illegal_transition', ?, 'x', 'b.1', 4), ('over_issue', ?, 'y', 'b.1', 5)`, tpl, tpl)
	require.NoError(t, err)
	_, err = e.db.Exec(`INSERT INTO reconcile_task (started_at, finished_at, status, differences) VALUES (NOW(6), NOW(6), 'needs_review', ?), (NOW(6), NOW(6), 'clean', '[]')`,
		fmt.Sprintf(`[{"store":"mysql","target":"x","template":%d,"expected":1,"found":2,"action":"needs_review"}]`, tpl))
	require.NoError(t, err)

	var p catalogPage
	e.expect(t, http.StatusOK, "GET", "/v1/templates", nil, &p)
	require.Len(t, p.Templates, 2)
	got := p.Templates[0]
	assert.Equal(t, tpl, got.ID)
	assert.Equal(t, "states", got.Name)
	assert.Equal(t, int64(100), got.TotalQuota)
	assert.Equal(t, int64(100), got.Quota)
	assert.Equal(t, int64(3), got.Claimed)
	assert.Equal(t, int64(97), got.Claimable)
	assert.Equal(t, int64(1), got.Held)
	assert.Equal(t, int64(1), got.Used)
	assert.Equal(t, int64(2), got.Frozen, "expired + returned - released: (1-1) + 2")
	require.NotNil(t, got.RedemptionRate)
	assert.InDelta(t, 0.25, *got.RedemptionRate, 1e-9, "used / (issued - released) = 1 / (5-1)")
	assert.Equal(t, int64(2), got.Anomalies)
	assert.Equal(t, "needs_review", got.Reconcile)
	assert.Equal(t, other, p.Templates[1].ID)
	assert.Nil(t, p.Templates[1].RedemptionRate, "nothing held or used")
	assert.Equal(t, "clean", p.Templates[1].Reconcile, "the last pass")
}

func TestConsoleRoutesBadInput(t *testing.T) {
	e := newEnv(t)
	tpl := e.template(t, nil)
	for _, c := range []struct {
		name, method, path string
		body               any
		status             int
		code, field        string
	}{
		{"limit not a number", "GET", "/v1/templates?limit=x", nil, 400, "invalid_argument", "limit"},
		{"limit too large", "GET", "/v1/templates?limit=501", nil, 400, "invalid_argument", "limit"},
		{"limit zero", "GET", "/v1/templates?limit=0", nil, 400, "invalid_argument", "limit"},
		{"negative cursor", "GET", "/v1/templates?after=-1", nil, 400, "invalid_argument", "after"},
		{"unknown parameter", "GET", "/v1/templates?offset=3", nil, 400, "invalid_argument", "offset"},
		{"a parameter twice", "GET", "/v1/templates?q=a&q=b", nil, 400, "invalid_argument", "q"},
		{"a long search", "GET", "/v1/templates?q=" + strings.Repeat("a", 201), nil, 400, "invalid_argument", "q"},
		{"history limit", "GET", fmt.Sprintf("/v1/templates/%d/quota-policy/history?limit=1001", tpl), nil, 400, "invalid_argument", "limit"},
		{"history of a missing template", "GET", "/v1/templates/424242/quota-policy/history", nil, 404, "not_found", ""},
		{"history of a bad id", "GET", "/v1/templates/x/quota-policy/history", nil, 400, "invalid_argument", "id"},
		{"lookup without user_id", "GET", fmt.Sprintf("/v1/templates/%d/user-coupons", tpl), nil, 400, "invalid_argument", "user_id"},
		{"lookup in a missing template", "GET", "/v1/templates/424242/user-coupons?user_id=u", nil, 404, "not_found", ""},
		{"passes limit", "GET", "/v1/reconcile/tasks?limit=201", nil, 400, "invalid_argument", "limit"},
		{"resolve without note", "POST", "/v1/reconcile/tasks/1/resolve", map[string]any{"operator": "ann"}, 400, "invalid_argument", "note"},
		{"resolve without operator", "POST", "/v1/reconcile/tasks/1/resolve", map[string]any{"note": "checked"}, 400, "invalid_argument", "operator"},
		{"resolve with an unknown field", "POST", "/v1/reconcile/tasks/1/resolve", map[string]any{"operator": "a", "note": "n", "force": true}, 400, "invalid_argument", "force"},
		{"resolve a missing task", "POST", "/v1/reconcile/tasks/99/resolve", map[string]any{"operator": "a", "note": "n"}, 409, "not_open", "id"},
		{"cdc status with a parameter", "GET", "/v1/cdc/status?x=1", nil, 400, "invalid_argument", "x"},
		{"templates list by PUT", "PUT", "/v1/templates", map[string]any{}, 405, "method_not_allowed", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := expectError(t, e.must(t, c.method, c.path, c.body), c.status, c.code)
			assert.Equal(t, c.field, got.Field)
		})
	}
}

func TestPolicyHistoryRoute(t *testing.T) {
	e := newEnv(t)
	tpl := e.template(t, nil)
	e.expect(t, http.StatusOK, "PUT", policyPath(tpl), map[string]any{"mode": "signal", "changed_by": "ann", "reason": "watch"}, nil)
	e.expect(t, http.StatusOK, "PUT", policyPath(tpl), map[string]any{"mode": "auto", "low": 0.3, "changed_by": "bob", "reason": "move"}, nil)
	var h struct {
		Template int64              `json:"template"`
		Entries  []quota.AuditEntry `json:"entries"`
	}
	e.expect(t, http.StatusOK, "GET", policyPath(tpl)+"/history", nil, &h)
	assert.Equal(t, tpl, h.Template)
	require.Len(t, h.Entries, 2)
	newest := h.Entries[0]
	assert.Equal(t, "bob", newest.ChangedBy)
	assert.Equal(t, "move", newest.Reason)
	require.NotNil(t, newest.Before)
	require.NotNil(t, newest.After)
	assert.Equal(t, "signal", *newest.Before.Mode, "old")
	assert.Equal(t, "auto", *newest.After.Mode, "new")
	assert.Equal(t, 0.3, *newest.After.Low)
	assert.Nil(t, h.Entries[1].Before, "the first change had no row before")
	e.expect(t, http.StatusOK, "GET", policyPath(tpl)+"/history?limit=1", nil, &h)
	assert.Len(t, h.Entries, 1)
}

func TestUserCouponsRoute(t *testing.T) {
	e := newEnv(t, envConfig{realClock: true})
	tpl := e.template(t, map[string]any{"per_user_limit": 3})
	a := e.claim(t, tpl, "alice", "app")
	b := e.claim(t, tpl, "alice", "sms")
	e.claim(t, tpl, "bob", "app")
	e.redeem(t, a.UserCouponID, "order-1")
	e.void(t, uniq("void"), b.UserCouponID)

	var got struct {
		Template int64            `json:"template"`
		UserID   string           `json:"user_id"`
		Coupons  []coupon.History `json:"coupons"`
	}
	e.expect(t, http.StatusOK, "GET", fmt.Sprintf("/v1/templates/%d/user-coupons?user_id=alice", tpl), nil, &got)
	assert.Equal(t, "alice", got.UserID)
	require.Len(t, got.Coupons, 2)
	assert.Equal(t, a.UserCouponID, got.Coupons[0].UserCouponID)
	assert.Equal(t, "USED", got.Coupons[0].Status)
	assert.Equal(t, []string{"claimed", "redeemed"}, events(got.Coupons[0]))
	assert.Equal(t, "RETURNED", got.Coupons[1].Status)
	assert.Equal(t, []string{"claimed", "voided"}, events(got.Coupons[1]))
	assert.Equal(t, "fraud", got.Coupons[1].Events[1].Reason)

	e.expect(t, http.StatusOK, "GET", fmt.Sprintf("/v1/templates/%d/user-coupons?user_id=carol", tpl), nil, &got)
	assert.NotNil(t, got.Coupons)
	assert.Empty(t, got.Coupons)
}

func events(h coupon.History) []string {
	var out []string
	for _, ev := range h.Events {
		out = append(out, ev.Event)
	}
	return out
}

func TestConsoleRoutesNeedTheToken(t *testing.T) {
	e := newEnv(t, envConfig{token: "s3cret"})
	tpl := e.template(t, nil)
	anonymous := newClient(e.url, "")
	t.Cleanup(anonymous.hc.CloseIdleConnections)
	for _, path := range []string{"/v1/templates", fmt.Sprintf("/v1/templates/%d/quota-policy/history", tpl),
		fmt.Sprintf("/v1/templates/%d/user-coupons?user_id=u", tpl), "/v1/reconcile/tasks", "/v1/cdc/status"} {
		r, err := anonymous.do("GET", path, nil)
		require.NoError(t, err)
		expectError(t, r, http.StatusUnauthorized, "unauthorized")
		e.expect(t, http.StatusOK, "GET", path, nil, nil)
	}
	r, err := anonymous.do("POST", "/v1/reconcile/tasks/1/resolve", map[string]any{"operator": "a", "note": "n"})
	require.NoError(t, err)
	expectError(t, r, http.StatusUnauthorized, "unauthorized")
}

func TestCDCStatusRoute(t *testing.T) {
	metrics := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "# HELP couponlink_cdc_leader x\n# TYPE couponlink_cdc_leader gauge\ncouponlink_cdc_leader 1\n"+
			"couponlink_redis_behind_batches 3\ncouponlink_cdc_lag_seconds 0.25\ncouponlink_other{a=\"b\"} 7\n")
	}))
	t.Cleanup(metrics.Close)
	e := newEnv(t, envConfig{cdcMetrics: metrics.URL})

	type status struct {
		Checkpoint string `json:"checkpoint"`
		Found      bool   `json:"found"`
		Position   string `json:"position"`
		Leader     string `json:"leader"`
		Webhooks   struct {
			Pending, Delivered, Dropped, Failing int64
		} `json:"webhooks"`
		Process struct {
			Reachable          bool     `json:"reachable"`
			Leader             *float64 `json:"leader"`
			RedisBehindBatches *float64 `json:"redis_behind_batches"`
			LagSeconds         *float64 `json:"lag_seconds"`
		} `json:"process"`
		LastReconcile *struct {
			TaskID int64  `json:"task_id"`
			Status string `json:"status"`
		} `json:"last_reconcile"`
	}
	var st status
	e.expect(t, http.StatusOK, "GET", "/v1/cdc/status", nil, &st)
	assert.Equal(t, "default", st.Checkpoint)
	assert.False(t, st.Found, "no cdc has run")
	assert.Nil(t, st.LastReconcile)
	require.True(t, st.Process.Reachable)
	assert.Equal(t, 1.0, *st.Process.Leader)
	assert.Equal(t, 3.0, *st.Process.RedisBehindBatches)
	assert.Equal(t, 0.25, *st.Process.LagSeconds)

	_, err := e.db.Exec(`INSERT INTO cdc_checkpoint (name, binlog_file, binlog_pos, gtid_set, leader, epoch) VALUES ('default', 'bin.000001', 4, '', 'host-a', 2)`)
	require.NoError(t, err)
	_, err = e.db.Exec(`INSERT INTO webhook_outbox (event_id, event, body, status, attempts) VALUES
		('e1', 'x', '{}', 'pending', 0), ('e2', 'x', '{}', 'pending', 3), ('e3', 'x', '{}', 'delivered', 1)`)
	require.NoError(t, err)
	_, err = e.db.Exec(`INSERT INTO reconcile_task (started_at, finished_at, status, summary) VALUES (NOW(6), NOW(6), 'auto_fixed', 'fixed 1')`)
	require.NoError(t, err)
	metrics.Close() // the cdc's metrics stop answering: shown, not an error
	e.expect(t, http.StatusOK, "GET", "/v1/cdc/status", nil, &st)
	assert.True(t, st.Found)
	assert.Equal(t, "bin.000001:4", st.Position[:len("bin.000001:4")])
	assert.Equal(t, "host-a", st.Leader)
	assert.Equal(t, int64(2), st.Webhooks.Pending)
	assert.Equal(t, int64(1), st.Webhooks.Failing)
	assert.Equal(t, int64(1), st.Webhooks.Delivered)
	require.NotNil(t, st.LastReconcile)
	assert.Equal(t, "auto_fixed", st.LastReconcile.Status)
	assert.False(t, st.Process.Reachable)
	assert.Nil(t, st.Process.RedisBehindBatches)
}

func TestReconcileTasksAndResolve(t *testing.T) {
	e := newEnv(t)
	_, err := e.db.Exec(`INSERT INTO reconcile_task (started_at, finished_at, status, summary, differences) VALUES
		(NOW(6), NOW(6), 'clean', 'all equal', '[]'),
		(NOW(6), NOW(6), 'needs_review', 'drift on 7/app', '[{"store":"mysql","target":"inventory_counter","template":7,"channel":"app","field":"held","expected":3,"found":4,"action":"needs_review"},{"store":"redis","target":"k","template":7,"expected":1,"found":1,"action":"fixed"}]')`)
	require.NoError(t, err)
	type tasks struct {
		Passes []struct {
			TaskID     int64   `json:"task_id"`
			Status     string  `json:"status"`
			Summary    string  `json:"summary"`
			ResolvedBy string  `json:"resolved_by"`
			FinishedAt *string `json:"finished_at"`
		} `json:"passes"`
		Open []struct {
			TaskID      int64  `json:"task_id"`
			Summary     string `json:"summary"`
			Differences []struct {
				Template int64  `json:"template"`
				Channel  string `json:"channel"`
				Action   string `json:"action"`
			} `json:"differences"`
		} `json:"open"`
	}
	var got tasks
	e.expect(t, http.StatusOK, "GET", "/v1/reconcile/tasks", nil, &got)
	require.Len(t, got.Passes, 2)
	assert.Equal(t, "needs_review", got.Passes[0].Status, "newest first")
	assert.NotNil(t, got.Passes[0].FinishedAt)
	require.Len(t, got.Open, 1)
	open := got.Open[0]
	assert.Equal(t, got.Passes[0].TaskID, open.TaskID)
	require.Len(t, open.Differences, 1, "only what needs review")
	assert.Equal(t, "app", open.Differences[0].Channel)
	e.expect(t, http.StatusOK, "GET", "/v1/reconcile/tasks?limit=1", nil, &got)
	assert.Len(t, got.Passes, 1)

	path := fmt.Sprintf("/v1/reconcile/tasks/%d/resolve", open.TaskID)
	expectError(t, e.must(t, "POST", path, rawBody(`operator=ann&note=x`)), http.StatusBadRequest, "invalid_argument")
	var res struct {
		TaskID     int64  `json:"task_id"`
		ResolvedBy string `json:"resolved_by"`
		Note       string `json:"note"`
	}
	e.expect(t, http.StatusOK, "POST", path, map[string]any{"operator": "ann", "note": "counter fixed by hand"}, &res)
	assert.Equal(t, open.TaskID, res.TaskID)
	assert.Equal(t, "ann", res.ResolvedBy)
	assert.Equal(t, []string{"ann counter fixed by hand manual"},
		e.strings(t, `SELECT CONCAT_WS(' ', actor, reason, mode) FROM correction_log WHERE task_id = ?`, open.TaskID))
	expectError(t, e.must(t, "POST", path, map[string]any{"operator": "ann", "note": "again"}), http.StatusConflict, "not_open")

	e.expect(t, http.StatusOK, "GET", "/v1/reconcile/tasks", nil, &got)
	assert.Empty(t, got.Open)
	assert.Equal(t, "ann", got.Passes[0].ResolvedBy)
}

func TestResolveIsNotReachableCrossSite(t *testing.T) {
	e := newEnv(t)
	_, err := e.db.Exec(`INSERT INTO reconcile_task (started_at, finished_at, status) VALUES (NOW(6), NOW(6), 'needs_review')`)
	require.NoError(t, err)
	for name, h := range map[string]map[string]string{
		"another origin":   {"Origin": "https://evil.example", "Content-Type": "application/json"},
		"cross-site fetch": {"Sec-Fetch-Site": "cross-site", "Content-Type": "application/json"},
		"a form body":      {"Content-Type": "text/plain"},
	} {
		req, err := http.NewRequest("POST", e.url+"/v1/reconcile/tasks/1/resolve", strings.NewReader(`{"operator":"a","note":"n"}`))
		require.NoError(t, err)
		for k, v := range h {
			req.Header.Set(k, v)
		}
		res, err := e.api.hc.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		assert.Contains(t, []int{http.StatusForbidden, http.StatusUnsupportedMediaType}, res.StatusCode, name)
	}
	assert.Equal(t, 0, e.count(t, `SELECT COUNT(*) FROM reconcile_task WHERE resolved_at IS NOT NULL`))
}

func TestChannelsShowTheCDCPosition(t *testing.T) {
	e := newEnv(t, envConfig{checkpoint: "default"})
	tpl := e.template(t, nil)
	type channels struct {
		CDC *struct {
			Checkpoint string  `json:"checkpoint"`
			Found      bool    `json:"found"`
			Position   string  `json:"position"`
			EventTime  *string `json:"event_time"`
		} `json:"cdc"`
	}
	var got channels
	e.expect(t, http.StatusOK, "GET", fmt.Sprintf("/v1/templates/%d/channels", tpl), nil, &got)
	require.NotNil(t, got.CDC)
	assert.False(t, got.CDC.Found)
	_, err := e.db.Exec(`INSERT INTO cdc_checkpoint (name, binlog_file, binlog_pos, gtid_set, event_time) VALUES ('default', 'bin.000002', 77, '0-1-9', NOW(6))`)
	require.NoError(t, err)
	e.expect(t, http.StatusOK, "GET", fmt.Sprintf("/v1/templates/%d/channels", tpl), nil, &got)
	assert.True(t, got.CDC.Found)
	assert.Equal(t, "bin.000002:77 gtid=0-1-9", got.CDC.Position)
	assert.NotNil(t, got.CDC.EventTime)

	plain := newEnv(t)
	tpl = plain.template(t, nil)
	got = channels{}
	plain.expect(t, http.StatusOK, "GET", fmt.Sprintf("/v1/templates/%d/channels", tpl), nil, &got)
	assert.Nil(t, got.CDC, "no checkpoint named: no position")
}
