package reconcile_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/api"
	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/inventory"
	"github.com/couponlink/couponlink/reconcile"
	"github.com/couponlink/couponlink/webhook"
)

// A one-off drift the reconciler fixes by itself is seen all the same: a
// counter off by 3 and a Redis stock key off by 7, both corrected in one
// pass, are each counted in couponlink_reconcile_corrected_total by store
// and bucket, recorded as a finding of kind corrected/<store>/<field> with
// the value found and the value set, listed in one reconcile.corrected
// event, and kept in the drift gauge until the next pass proves them gone.
func TestEveryCorrectionIsSeen(t *testing.T) {
	t.Parallel()
	e, tpl := driftEnv(t)
	r, reg := e.reconciler(func(c *reconcile.Config) { c.Events = true })
	require.Equal(t, "clean", e.pass(r).Status)
	require.Empty(t, series(t, reg, "couponlink_reconcile_corrected_total"), "nothing corrected yet")

	e.exec(`UPDATE inventory_counter SET held = held + 3 WHERE template_id = ? AND channel = 'app'`, tpl)
	key := e.Keys.Stock(tpl, "web")
	require.NoError(t, e.RDB.IncrBy(e.Ctx, key, 7).Err())
	rep := e.pass(r)
	require.Equal(t, "auto_fixed", rep.Status, "%v", diffs(rep.Differences))
	tp := fmt.Sprint(tpl)
	require.ElementsMatch(t, []string{
		"channel=app,store=counter,template=" + tp + " 1",
		"channel=web,store=redis,template=" + tp + " 1",
	}, series(t, reg, "couponlink_reconcile_corrected_total"))
	require.ElementsMatch(t, []string{
		"channel=app,store=counter,template=" + tp + " 3",
		"channel=web,store=redis,template=" + tp + " 7",
	}, series(t, reg, "couponlink_reconcile_drift"), "the drift found, kept until a pass proves it gone")

	// the findings: the value found and the value set
	fs, err := inventory.ListFindings(e.Ctx, e.DB, inventory.FindingsQuery{Source: api.FindingFromReconcile})
	require.NoError(t, err)
	got := map[string]string{}
	for _, f := range fs {
		require.Equal(t, api.FindingOpen, f.State, "%s", f.Kind)
		got[f.Kind] = f.Summary
	}
	require.Len(t, got, 2, "%v", got)
	require.Contains(t, got["corrected/counter/held"], target(tpl, "app", "held")+": was 10, corrected to 7")
	require.Contains(t, got["corrected/redis"], key+": was 52, corrected to 45")

	// the event: both corrections, with the values
	evs := testenv.OutboxEvents(t, e.DB, webhook.ReconcileCorrected)
	require.Len(t, evs, 1)
	data := evs[0]["data"].(map[string]any)
	require.EqualValues(t, rep.TaskID, data["task"])
	require.EqualValues(t, 2, data["corrections"])
	byStore := map[string]map[string]any{}
	for _, c := range data["sample"].([]any) {
		byStore[c.(map[string]any)["store"].(string)] = c.(map[string]any)
	}
	require.EqualValues(t, 10, byStore["counter"]["before"])
	require.EqualValues(t, 7, byStore["counter"]["after"])
	require.Equal(t, "held", byStore["counter"]["field"])
	require.EqualValues(t, 52, byStore["redis"]["before"])
	require.EqualValues(t, 45, byStore["redis"]["after"])
	require.NotEmpty(t, byStore["redis"]["fingerprint"])

	// the next pass proves both gone: no drift, no new correction, no event
	require.Equal(t, "clean", e.pass(r).Status)
	require.Empty(t, series(t, reg, "couponlink_reconcile_drift"))
	require.Len(t, series(t, reg, "couponlink_reconcile_corrected_total"), 2)
	require.Len(t, testenv.OutboxEvents(t, e.DB, webhook.ReconcileCorrected), 1)
	require.Empty(t, e.reviewEvents(), "a correction needs no person")
}
