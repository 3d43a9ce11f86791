package httpapi_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/api"
	"github.com/couponlink/couponlink/coupon/httpapi"
	"github.com/couponlink/couponlink/quota"
	"github.com/couponlink/couponlink/webhook"
)

// The console's routes of issue 28: the per-campaign review flag, the
// policy preview, findings with where and reopen, via console, and the
// cdc's metrics found without a setting.

// A pass that needs review marks only the campaigns its item names, and
// once the item is resolved, the campaign it named shows resolved and the others stay clean.
func TestTemplatesReviewFlagPerCampaign(t *testing.T) {
	e := newEnv(t)
	named := e.template(t, map[string]any{"name": "named"})
	other := e.template(t, map[string]any{"name": "other"})
	_, err := e.db.Exec(`INSERT INTO reconcile_task (started_at, finished_at, status, summary, differences) VALUES (NOW(6), NOW(6), 'needs_review', 'one', ?)`,
		fmt.Sprintf(`[{"store":"mysql","target":"x","template":%d,"expected":1,"found":2,"action":"needs_review"}]`, named))
	require.NoError(t, err)
	reconcileOf := func() map[int64]string {
		var p catalogPage
		e.expect(t, http.StatusOK, "GET", "/v1/templates", nil, &p)
		out := map[int64]string{}
		for _, tp := range p.Templates {
			out[tp.ID] = tp.Reconcile
		}
		return out
	}
	assert.Equal(t, map[int64]string{named: "needs_review", other: "clean"}, reconcileOf())

	var tasks api.ReconcileTasks
	e.expect(t, http.StatusOK, "GET", "/v1/reconcile/tasks", nil, &tasks)
	require.Len(t, tasks.Open, 1)
	e.expect(t, http.StatusOK, "POST", fmt.Sprintf("/v1/reconcile/tasks/%d/resolve", tasks.Open[0].TaskID), map[string]any{"operator": "ops", "note": "checked"}, nil)
	assert.Equal(t, map[int64]string{named: "resolved", other: "clean"}, reconcileOf())
}

// dbMirror is the rebalancer's mirror read from the database: the
// counters the preview reads, so that both see the same numbers.
type dbMirror struct {
	t   *testing.T
	e   *env
	tpl int64
}

func (m dbMirror) Buckets() map[int64][]quota.Channel {
	cs, err := quota.Channels(context.Background(), m.e.db, m.tpl)
	require.NoError(m.t, err)
	out := make([]quota.Channel, len(cs))
	for i, c := range cs {
		out[i] = c.Channel
	}
	return map[int64][]quota.Channel{m.tpl: out}
}

func (m dbMirror) Counts(tpl int64, channel string) quota.Channel {
	for _, c := range m.Buckets()[tpl] {
		if c.Name == channel {
			return c
		}
	}
	return quota.Channel{}
}

// The preview of a policy change is the transfer the rule then makes in
// auto mode on the same numbers; before the change it says which
// condition stops the move.
func TestPolicyPreviewIsWhatTheRuleDoes(t *testing.T) {
	e := newEnv(t, envConfig{realClock: true})
	tpl := e.template(t, nil) // app 60, sms 40
	// app: 10 claims, 1 used (rate 0.10); sms: sold out, 30 of 40 used (0.75)
	_, err := e.db.Exec(`UPDATE channel_quota SET claimed = IF(channel = 'app', 10, 40) WHERE template_id = ?`, tpl)
	require.NoError(t, err)
	_, err = e.db.Exec(`INSERT INTO inventory_counter (template_id, channel, held, used) VALUES (?, 'app', 9, 1), (?, 'sms', 10, 30)`, tpl, tpl)
	require.NoError(t, err)

	var now api.PolicyPreview
	e.expect(t, http.StatusOK, "POST", fmt.Sprintf("/v1/templates/%d/quota-policy/preview", tpl), nil, &now)
	assert.Equal(t, "signal", now.Policy.Mode, "the policy in force")
	assert.Empty(t, now.Moves)
	assert.Contains(t, now.Stop, "younger than min_age")
	require.Len(t, now.Channels, 2)
	assert.Equal(t, "10 claims < min_claims 100: too few to judge", now.Channels[0].Why, "app")
	assert.True(t, now.Channels[1].SoldOut)

	change := map[string]any{"mode": "auto", "min_claims": 5, "min_age_seconds": 0}
	var pv api.PolicyPreview
	e.expect(t, http.StatusOK, "POST", fmt.Sprintf("/v1/templates/%d/quota-policy/preview", tpl), change, &pv)
	assert.Empty(t, pv.Stop)
	require.Len(t, pv.Moves, 1)
	assert.Equal(t, api.PreviewMove{From: "app", To: "sms", Amount: 25, Why: pv.Moves[0].Why}, pv.Moves[0], "max_share 0.5 of app's 50 claimable")
	assert.Equal(t, "giver", pv.Channels[0].Role)
	assert.Equal(t, "receiver", pv.Channels[1].Role)
	assert.Equal(t, 0, e.count(t, `SELECT COUNT(*) FROM quota_policy WHERE template_id = ?`, tpl), "a preview saves nothing")

	bad := e.must(t, "POST", fmt.Sprintf("/v1/templates/%d/quota-policy/preview", tpl), map[string]any{"low": 0.9})
	assert.Equal(t, "low", expectError(t, bad, http.StatusBadRequest, "invalid_argument").Field)

	change["changed_by"], change["reason"] = "ops", "TICKET-1"
	e.expect(t, http.StatusOK, "PUT", fmt.Sprintf("/v1/templates/%d/quota-policy", tpl), change, nil)
	r, err := quota.NewRebalancer(quota.RebalancerConfig{DB: e.db, Mirror: dbMirror{t, e, tpl},
		Fence:   func(context.Context, *sql.Tx) error { return nil },
		Enqueue: func(context.Context, *sql.Tx, []webhook.Event) error { return nil }, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	require.NoError(t, r.Pass(context.Background()))
	assert.Equal(t, []string{fmt.Sprintf("app sms %d auto", pv.Moves[0].Amount)},
		e.strings(t, `SELECT CONCAT_WS(' ', from_channel, to_channel, amount, mode) FROM quota_transfer_log WHERE template_id = ?`, tpl))
	assert.Equal(t, []string{"app 35", "sms 65"}, e.strings(t, `SELECT CONCAT_WS(' ', channel, quota) FROM channel_quota WHERE template_id = ? ORDER BY channel`, tpl))

	e.expect(t, http.StatusOK, "POST", fmt.Sprintf("/v1/templates/%d/quota-policy/preview", tpl), nil, &now)
	assert.Contains(t, now.Stop, "within the cooldown", "the move just made starts the cooldown")
	require.NotNil(t, now.LastDecision)
}

// A change sent by the console is recorded as via console; a script's as api.
func TestPolicyChangeViaConsole(t *testing.T) {
	e := newEnv(t)
	tpl := e.template(t, nil)
	put := func(header bool, low float64) {
		b, err := json.Marshal(map[string]any{"low": low, "changed_by": "ops", "reason": "why"})
		require.NoError(t, err)
		req, err := http.NewRequest("PUT", fmt.Sprintf("%s/v1/templates/%d/quota-policy", e.url, tpl), bytes.NewReader(b))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		if header {
			req.Header.Set(httpapi.ClientHeader, "console")
		}
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		require.Equal(t, http.StatusOK, res.StatusCode)
	}
	put(true, 0.2)
	put(false, 0.1)
	var h api.PolicyHistory
	e.expect(t, http.StatusOK, "GET", fmt.Sprintf("/v1/templates/%d/quota-policy/history", tpl), nil, &h)
	require.Len(t, h.Entries, 2)
	assert.Equal(t, "api", h.Entries[0].Source, "the script's, newest first")
	assert.Equal(t, "console", h.Entries[1].Source)
}

// Without COUPONLINK_CDC_METRICS_URL the API reads the metrics of the
// checkpoint's leader from the address it recorded; without one it says
// which setting is missing.
func TestCDCStatusFindsTheLeadersMetrics(t *testing.T) {
	metrics := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "couponlink_cdc_leader 1\ncouponlink_redis_behind_batches 0\n")
	}))
	t.Cleanup(metrics.Close)
	e := newEnv(t)
	var st api.CDCStatus
	e.expect(t, http.StatusOK, "GET", "/v1/cdc/status", nil, &st)
	assert.False(t, st.Process.Reachable)
	assert.Contains(t, st.Process.Error, "set COUPONLINK_CDC_METRICS_URL")

	_, err := e.db.Exec(`INSERT INTO cdc_checkpoint (name, binlog_file, binlog_pos, gtid_set, leader, epoch) VALUES ('default', 'bin.000001', 4, '', 'host-b:7', 1)`)
	require.NoError(t, err)
	_, err = e.db.Exec(`INSERT INTO cdc_process (leader, checkpoint, metrics_url, started_at) VALUES ('host-a:1', 'default', 'http://127.0.0.1:1/metrics', NOW(6)), ('host-b:7', 'default', ?, NOW(6))`,
		metrics.URL+"/metrics")
	require.NoError(t, err)
	e.expect(t, http.StatusOK, "GET", "/v1/cdc/status", nil, &st)
	require.True(t, st.Process.Reachable, "%+v", st.Process)
	assert.Equal(t, metrics.URL+"/metrics", st.Process.MetricsURL, "the leader's, not the standby's")
	assert.Equal(t, 1.0, *st.Process.Leader)
}

// A cdc finding lists with the rows it names and where it was seen,
// filters by campaign, kind and state, and moves open -> acknowledged ->
// open again (reopen) -> closed -> open again.
func TestFindingsWhereFiltersAndReopen(t *testing.T) {
	e := newEnv(t, envConfig{checkpoint: "east"})
	tpl := e.template(t, nil)
	_, err := e.db.Exec(`INSERT INTO cdc_anomaly (kind, user_coupon_id, template_id, channel, detail, binlog_file, binlog_pos, event_time)
		VALUES ('illegal_transition', 42, ?, 'app', 'USED -> AVAILABLE', 'bin.000003', 1234, NOW(6))`, tpl)
	require.NoError(t, err)
	_, err = e.db.Exec(`INSERT INTO finding (fingerprint, source, kind, subject, content, summary, first_seen, last_seen) VALUES
		('00000000000000a1', 'cdc', 'illegal_transition', 'coupon 42', '0', 'USED -> AVAILABLE', NOW(6), NOW(6)),
		('00000000000000a2', 'cdc', 'over_issue', 'template 999 channel "sms"', '0', 'over', NOW(6), NOW(6))`)
	require.NoError(t, err)

	var fs api.Findings
	e.expect(t, http.StatusOK, "GET", fmt.Sprintf("/v1/findings?template=%d", tpl), nil, &fs)
	require.Len(t, fs.Findings, 1)
	w := fs.Findings[0].Where
	require.NotNil(t, w)
	assert.Equal(t, api.FindingWhere{Template: tpl, Channel: "app", Coupon: 42, Source: "east", Position: "bin.000003:1234", EventTime: w.EventTime, Anomaly: w.Anomaly}, *w)
	e.expect(t, http.StatusOK, "GET", "/v1/findings?kind=over_issue", nil, &fs)
	require.Len(t, fs.Findings, 1)
	assert.Equal(t, int64(999), fs.Findings[0].Where.Template)

	fp := "/v1/findings/00000000000000a1/"
	r := e.must(t, "POST", fp+"reopen", map[string]any{"operator": "ops", "reason": "x"})
	expectError(t, r, http.StatusConflict, "not_open")
	e.expect(t, http.StatusOK, "POST", fp+"ack", map[string]any{"operator": "ops", "reason": "known"}, nil)
	e.expect(t, http.StatusOK, "GET", "/v1/findings?state=acknowledged", nil, &fs)
	require.Len(t, fs.Findings, 1)
	var f api.Finding
	e.expect(t, http.StatusOK, "POST", fp+"reopen", map[string]any{"operator": "lead", "reason": "not known after all"}, &f)
	assert.Equal(t, "open", f.State)
	assert.Equal(t, "lead", f.ReopenedBy)
	assert.Equal(t, "known", f.AcknowledgedReason, "the acknowledgement is kept")
	e.expect(t, http.StatusOK, "POST", fp+"close", map[string]any{"operator": "ops", "reason": "fixed"}, nil)
	e.expect(t, http.StatusOK, "POST", fp+"reopen", map[string]any{"operator": "ops", "reason": "again"}, &f)
	assert.Equal(t, "open", f.State)
	require.NotNil(t, f.ReopenedAt)
	assert.WithinDuration(t, time.Now(), *f.ReopenedAt, time.Minute)
}
