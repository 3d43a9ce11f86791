package httpapi_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/api"
	"github.com/couponlink/couponlink/inventory"
)

// A finding through the API: listed open; acknowledged (who, why, when);
// found again as it was it stays acknowledged, seen twice; acknowledged
// again is not_open; found changed it is open again; closed, and found
// again once closed, open again. Bad input is 400, an unknown fingerprint
// 404.
func TestFindingsLifecycle(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	dup := inventory.Seen{Source: api.FindingFromReconcile, Kind: "legacy/write-offs", Subject: `all: coupon 5/order "o1"`,
		Content: "1 2 east, west", Summary: "coupon 5 is written off 2 times"}
	other := inventory.Seen{Source: api.FindingFromCDC, Kind: "double_spend", Subject: "coupon 9", Content: "x", Summary: "coupon 9 spent twice"}
	pass := func(seen ...inventory.Seen) {
		t.Helper()
		require.NoError(t, inventory.RecordFindings(ctx, e.db, time.Now(), seen))
	}
	pass(dup, other)
	fp := dup.Fingerprint()
	find := func(query string) api.Findings {
		t.Helper()
		var got api.Findings
		e.expect(t, http.StatusOK, "GET", "/v1/findings"+query, nil, &got)
		return got
	}
	got := find("?source=reconcile")
	require.Len(t, got.Findings, 1)
	assert.Equal(t, fp, got.Findings[0].Fingerprint)
	assert.Equal(t, api.FindingOpen, got.Findings[0].State)
	assert.Len(t, find("").Findings, 2)

	ack := "/v1/findings/" + fp + "/ack"
	expectError(t, e.must(t, "POST", ack, map[string]any{"operator": "ann"}), http.StatusBadRequest, "invalid_argument")
	expectError(t, e.must(t, "POST", ack, map[string]any{"operator": " ", "reason": "x"}), http.StatusBadRequest, "invalid_argument")
	expectError(t, e.must(t, "POST", "/v1/findings/nope/ack", map[string]any{"operator": "ann", "reason": "x"}), http.StatusNotFound, "not_found")
	expectError(t, e.must(t, "GET", "/v1/findings?state=gone", nil), http.StatusBadRequest, "invalid_argument")
	var f api.Finding
	e.expect(t, http.StatusOK, "POST", ack, map[string]any{"operator": "ann", "reason": "the shop re-sent the order by hand"}, &f)
	assert.Equal(t, api.FindingAcknowledged, f.State)
	assert.Equal(t, "ann", f.AcknowledgedBy)
	assert.Equal(t, "the shop re-sent the order by hand", f.AcknowledgedReason)
	require.NotNil(t, f.AcknowledgedAt)
	expectError(t, e.must(t, "POST", ack, map[string]any{"operator": "ann", "reason": "again"}), http.StatusConflict, "not_open")

	pass(dup) // the next pass: the same finding
	got = find("?state=acknowledged")
	require.Len(t, got.Findings, 1)
	assert.Equal(t, int64(2), got.Findings[0].TimesSeen)
	assert.Empty(t, find("?state=open&source=reconcile").Findings)
	assert.Equal(t, map[string]float64{"legacy/write-offs acknowledged": 1, "legacy/write-offs open": 0, "legacy/write-offs closed": 0},
		findingsGauge(t, e, api.FindingFromReconcile, nil), "the reconciler's couponlink_findings")
	assert.Equal(t, map[string]float64{"double_spend open": 1, "double_spend acknowledged": 0, "double_spend closed": 0,
		"deleted_coupon open": 0, "deleted_coupon acknowledged": 0, "deleted_coupon closed": 0},
		findingsGauge(t, e, api.FindingFromCDC, []string{"double_spend", "deleted_coupon"}), "the cdc's: every kind, every state")

	changed := dup
	changed.Content = "1 3 east, west" // a third write-off
	pass(changed)
	got = find("?state=open&source=reconcile")
	require.Len(t, got.Findings, 1, "a changed finding opens again")
	assert.Equal(t, fp, got.Findings[0].Fingerprint)
	assert.Equal(t, "ann", got.Findings[0].AcknowledgedBy, "the last acknowledgement is kept")

	e.expect(t, http.StatusOK, "POST", "/v1/findings/"+fp+"/close", map[string]any{"operator": "bob", "reason": "written off once again"}, &f)
	assert.Equal(t, api.FindingClosed, f.State)
	assert.Equal(t, "bob", f.ClosedBy)
	expectError(t, e.must(t, "POST", "/v1/findings/"+fp+"/close", map[string]any{"operator": "bob", "reason": "x"}), http.StatusConflict, "not_open")
	expectError(t, e.must(t, "POST", ack, map[string]any{"operator": "bob", "reason": "x"}), http.StatusConflict, "not_open")
	pass(changed)
	assert.Len(t, find("?state=open&source=reconcile").Findings, 1, "found again once closed: open again")
}

// findingsGauge is couponlink_findings of source's findings on e's
// database, "kind state" -> value.
func findingsGauge(t *testing.T, e *env, source string, kinds []string) map[string]float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	require.NoError(t, inventory.RegisterFindingsMetrics(reg, e.db, source, kinds))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			out[labels["kind"]+" "+labels["state"]] = m.GetGauge().GetValue()
		}
	}
	return out
}
