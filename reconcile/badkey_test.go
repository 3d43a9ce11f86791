package reconcile_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/reconcile"
)

// Owner mode: stock keys holding something else than an integer (a string
// that is not one, an integer in a form DECR refuses, a hash) are drift like
// a missing key: recorded with what they held, set to the truth by
// compare-and-set, and every other key and the counters are still checked
// and fixed in the same pass; the task records all of it.
func TestRedisKeyNotAnIntegerIsFixed(t *testing.T) {
	t.Parallel()
	e, tpl := driftEnv(t)
	other := e.Template(map[string]int64{"sms": 20}, time.Hour)
	e.claim(other, "sms", 2)
	e.Settle()
	app, web, all, sms := e.Keys.Stock(tpl, "app"), e.Keys.Stock(tpl, "web"), e.Keys.TemplateStock(tpl), e.Keys.Stock(other, "sms")
	e.exec(`UPDATE inventory_counter SET held = held + 2 WHERE template_id = ? AND channel = 'app'`, tpl)
	require.NoError(t, e.RDB.Set(e.Ctx, app, "garbage", 0).Err())
	require.NoError(t, e.RDB.Del(e.Ctx, web).Err())
	require.NoError(t, e.RDB.HSet(e.Ctx, web, "n", 45).Err())
	require.NoError(t, e.RDB.Set(e.Ctx, all, "085", 0).Err()) // INCR/DECR refuse a leading zero
	require.NoError(t, e.RDB.Set(e.Ctx, sms, 0, 0).Err())     // an integer, wrong

	r, _ := e.reconciler()
	rep := e.pass(r)
	require.Equal(t, "auto_fixed", rep.Status)
	require.ElementsMatch(t, []string{
		"counter " + target(tpl, "app", "held") + " 7 9 fixed",
		"redis " + app + ` 40 "garbage" fixed`,
		"redis " + web + " 45 <hash> fixed",
		"redis " + all + ` 85 "085" fixed`,
		"redis " + sms + " 18 0 fixed",
	}, diffs(rep.Differences))
	require.Nil(t, find(t, rep.Differences, "redis", app).Found)
	require.Contains(t, find(t, rep.Differences, "redis", app).Reason, `held "garbage", not an integer`)
	require.ElementsMatch(t, []string{
		"counter " + target(tpl, "app", "held") + " 9->7",
		"redis " + app + " nil->40",
		"redis " + web + " nil->45",
		"redis " + all + " nil->85",
		"redis " + sms + " 0->18",
	}, e.correctionsOf(rep.TaskID))
	for _, c := range e.corrections() {
		if c.Target == app {
			require.Contains(t, c.Reason, `held "garbage"`, "the correction says what the key held")
		}
	}
	for k, v := range e.OwnerKeys() {
		require.Equal(t, "string", e.RDB.Type(e.Ctx, k).Val(), k)
		require.Equal(t, str(ptr(v)), str(e.redisGet(k)), k)
	}
	require.Equal(t, e.Truth(), e.CounterRows())
	task := e.task(rep.TaskID)
	require.Equal(t, `"garbage"`, task.Redis[app], "the task records what the key held")
	require.Equal(t, "<hash>", task.Redis[web])
	require.EqualValues(t, 0, task.Redis[sms])

	require.Equal(t, "clean", e.pass(r).Status)
}

// A wrong-type key that changes between the check and the compare-and-set
// is not overwritten: the compare-and-set compares the whole value, not
// only its type.
func TestRedisWrongTypeKeyChangedIsNotOverwritten(t *testing.T) {
	t.Parallel()
	e, tpl := driftEnv(t)
	web := e.Keys.Stock(tpl, "web")
	require.NoError(t, e.RDB.Del(e.Ctx, web).Err())
	require.NoError(t, e.RDB.HSet(e.Ctx, web, "n", 1).Err())
	h := &hook{evalKey: web}
	change := func() { require.NoError(t, e.RDB.HSet(e.Ctx, web, "m", 2).Err()) }
	h.beforeEval.Store(&change)
	r, _ := e.reconciler(func(c *reconcile.Config) { c.Redis = hookedClient(t, h) })

	rep := e.pass(r)
	d := find(t, rep.Differences, "redis", web)
	require.Equal(t, reconcile.ActionInFlight, d.Action)
	require.Contains(t, d.Reason, "moved between the check and the compare-and-set")
	require.Empty(t, e.correctionsOf(rep.TaskID))
	require.Equal(t, map[string]string{"n": "1", "m": "2"}, e.RDB.HGetAll(e.Ctx, web).Val())

	rep = e.pass(r)
	require.Equal(t, []string{"redis " + web + " 45 <hash> fixed"}, diffs(rep.Differences))
	require.Equal(t, "45", str(e.redisGet(web)))
}

// Corrector mode: a legacy front end's key that holds no integer is left
// for a person (the front end owns the key and its format); the other keys
// are still fixed.
func TestLegacyRedisKeyNotAnIntegerNeedsReview(t *testing.T) {
	t.Parallel()
	l := followedLegacy(t, "lg:stock:{template}", 100, 50)
	l.claim(1, 8)
	l.claim(2, 4)
	l.WaitCheckpoint()
	require.NoError(t, l.RDB.Set(l.Ctx, l.key(1), "garbage", 0).Err()) // 92 true
	require.NoError(t, l.RDB.Set(l.Ctx, l.key(2), 40, 0).Err())        // 46 true

	rep := l.pass(l.reconciler())
	require.Equal(t, "needs_review", rep.Status)
	require.Equal(t, []string{
		"redis " + l.key(1) + ` 92 "garbage" needs_review`,
		"redis " + l.key(2) + " 46 40 fixed",
	}, diffs(rep.Differences))
	require.Contains(t, find(t, rep.Differences, "redis", l.key(1)).Reason, "legacy front end")
	require.Equal(t, []string{"redis " + l.key(2) + " 40->46"}, l.correctionsOf(rep.TaskID))
	require.Equal(t, "garbage", l.RDB.Get(l.Ctx, l.key(1)).Val(), "not touched")
}

// A pass that stops on an error is recorded with status error, the
// differences it found and what it did before (here a counter fix), and
// the error; its corrections stay under its task.
func TestPassErrorKeepsWhatItDid(t *testing.T) {
	t.Parallel()
	e, tpl, web := counterAndKeyDrift(t, 2)
	h := &hook{}
	failNext := func() { h.failPipelines.Store(true) } // the second read of the drifting keys fails
	h.afterPipeline.Store(&failNext)
	r, _ := e.reconciler(func(c *reconcile.Config) { c.Redis = hookedClient(t, h) })

	rep, err := r.Pass(e.Ctx)
	require.ErrorContains(t, err, "injected Redis failure")
	require.Equal(t, "error", rep.Status)
	want := []string{
		"counter " + target(tpl, "app", "held") + " 7 9 fixed",
		"redis " + web + " 45 1 in_flight",
	}
	require.Equal(t, want, diffs(rep.Differences))
	require.Contains(t, find(t, rep.Differences, "redis", web).Reason, "not handled")
	task := e.task(rep.TaskID)
	require.Equal(t, "error", task.Status)
	require.True(t, task.Finished)
	require.Equal(t, want, diffs(task.Differences), "the task records what the pass found and did")
	require.True(t, strings.HasPrefix(task.Summary, "error after 2 differences (1 fixed, 0 need review, 1 in flight): "), task.Summary)
	require.Contains(t, task.Summary, "injected Redis failure")
	require.EqualValues(t, 1, task.Redis[web], "the keys as first read")
	require.Equal(t, []string{"counter " + target(tpl, "app", "held") + " 9->7"}, e.correctionsOf(rep.TaskID))
	require.Equal(t, e.Truth(), e.CounterRows())

	// the next pass fixes the key; the counter fixed by the failed pass is right
	h.failPipelines.Store(false)
	rep = e.pass(r)
	require.Equal(t, []string{"redis " + web + " 45 1 fixed"}, diffs(rep.Differences))
}
