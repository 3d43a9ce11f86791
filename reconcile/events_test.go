package reconcile_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/reconcile"
	"github.com/couponlink/couponlink/webhook"
)

// reviewEvents reads the outbox's reconcile.needs_review events.
func (e *env) reviewEvents() []map[string]any {
	e.T.Helper()
	return testenv.OutboxEvents(e.T, e.DB, webhook.ReconcileReview)
}

// A pass that leaves a difference for a person writes one
// reconcile.needs_review event with its task (the task id, the
// differences left, a sample of them); a clean or fixed pass writes none,
// and neither does a reconciler with Events off.
func TestNeedsReviewWritesItsEvent(t *testing.T) {
	t.Parallel()
	e, tpl := driftEnv(t)
	on := func(c *reconcile.Config) { c.Events = true }
	r, _ := e.reconciler(on)
	require.Equal(t, "clean", e.pass(r).Status)
	e.exec(`UPDATE inventory_counter SET held = held + 1 WHERE template_id = ? AND channel = 'app'`, tpl)
	require.Equal(t, "auto_fixed", e.pass(r).Status)
	require.Empty(t, e.reviewEvents(), "an event for a pass that needs no person")

	e.exec(`UPDATE inventory_counter SET held = held + 500 WHERE template_id = ? AND channel = 'web'`, tpl)
	off, _ := e.reconciler()
	require.Equal(t, "needs_review", e.pass(off).Status)
	require.Empty(t, e.reviewEvents(), "an event with Events off")

	rep := e.pass(r)
	require.Equal(t, "needs_review", rep.Status)
	evs := e.reviewEvents()
	require.Len(t, evs, 1)
	data := evs[0]["data"].(map[string]any)
	require.EqualValues(t, rep.TaskID, data["task"])
	require.EqualValues(t, 1, data["differences"])
	sample := data["sample"].([]any)
	require.Len(t, sample, 1)
	d := sample[0].(map[string]any)
	require.EqualValues(t, tpl, d["template"])
	require.Equal(t, "web", d["channel"])
	require.Equal(t, "held", d["field"])
	require.Equal(t, "needs_review", d["action"])
	require.Equal(t, rep.Position.String(), data["binlog"])
}
