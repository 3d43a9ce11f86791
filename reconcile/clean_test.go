package reconcile_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/internal/testenv"
)

// state is everything a pass might write.
type state struct {
	counters    any
	caches      [2][3]int64
	quotas      []string
	redis       map[string]string
	corrections int
}

func (e *env) state(tpls [2]int64) state {
	e.T.Helper()
	return state{counters: e.CounterRows(), caches: [2][3]int64{e.TemplateCaches()[tpls[0]], e.TemplateCaches()[tpls[1]]},
		quotas: e.quotaRows(), redis: e.redisDump(),
		corrections: len(e.corrections())}
}

// quotaRows lists channel_quota as "template/channel quota claimed version".
func (e *env) quotaRows() []string {
	e.T.Helper()
	return testenv.Column[string](e.T, e.DB, `SELECT CONCAT(template_id, '/', channel, ' ', quota, ' ', claimed, ' ', version)
		FROM channel_quota ORDER BY template_id, channel`)
}

// On a clean system a pass changes nothing and reports clean; after
// drift of every fixable kind is fixed, the next pass changes nothing.
func TestCleanSystemChangesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.StartCDC(nil)
	a := e.Template(map[string]int64{"app": 30, "web": 20}, time.Hour)
	b := e.Template(map[string]int64{"app": 10, "sms": 10}, time.Hour)
	ids := e.claim(a, "app", 6)
	e.claim(a, "web", 4)
	e.claim(b, "sms", 3)
	for _, id := range ids[:4] {
		e.redeem(id)
	}
	_, err := e.Store.Refund(e.Ctx, coupon.RefundRequest{UserCouponID: ids[0], OrderID: "o-" + itoa(ids[0]), Mode: coupon.RefundRestore})
	require.NoError(t, err)
	_, err = e.Store.Refund(e.Ctx, coupon.RefundRequest{UserCouponID: ids[1], OrderID: "o-" + itoa(ids[1]), Mode: coupon.RefundRecycle})
	require.NoError(t, err)
	_, err = e.Store.Void(e.Ctx, coupon.VoidRequest{UserCouponIDs: []int64{ids[5]}, Reason: "test", Operator: "op", RequestID: "void-1"})
	require.NoError(t, err)
	e.Settle()
	require.Equal(t, e.Truth(), e.CounterRows())

	r, reg := e.reconciler()
	before := e.state([2]int64{a, b})
	rep := e.pass(r)
	require.Equal(t, "clean", rep.Status)
	require.Empty(t, rep.Differences)
	require.True(t, rep.CountersCompared, rep.Note)
	require.Empty(t, rep.Note)
	require.Equal(t, int64(13), rep.Coupons)
	require.Equal(t, 3, rep.Pairs)
	require.Equal(t, before, e.state([2]int64{a, b}), "a clean pass writes nothing")
	task := e.task(rep.TaskID)
	require.Equal(t, "clean", task.Status)
	require.Empty(t, task.Differences)
	require.Len(t, task.Redis, 6, "every stock key was read")
	v, _ := cdctest.Metric(t, reg, "couponlink_reconcile_runs_total", map[string]string{"result": "clean"})
	require.Equal(t, 1.0, v)

	// drift of every kind that is fixed: all fixed in one pass ...
	e.exec(`UPDATE inventory_counter SET held = held + 1 WHERE template_id = ? AND channel = 'web'`, a)
	e.exec(`UPDATE coupon_template SET used_count = used_count + 1 WHERE id = ?`, b)
	require.NoError(t, e.RDB.Set(e.Ctx, e.Keys.Stock(b, "sms"), 99, 0).Err())
	require.NoError(t, e.RDB.Del(e.Ctx, e.Keys.TemplateStock(a)).Err())
	rep = e.pass(r)
	require.Equal(t, "auto_fixed", rep.Status)
	require.Len(t, rep.Differences, 4, "%v", diffs(rep.Differences))
	require.Len(t, e.correctionsOf(rep.TaskID), 4)
	fixed := e.state([2]int64{a, b})
	require.Equal(t, before.counters, fixed.counters)
	require.Equal(t, before.caches, fixed.caches)
	require.Equal(t, before.redis, fixed.redis)

	// ... and the next passes change nothing
	for range 2 {
		rep = e.pass(r)
		require.Equal(t, "clean", rep.Status, "%v", diffs(rep.Differences))
		require.Empty(t, rep.Differences)
		require.Equal(t, fixed, e.state([2]int64{a, b}))
	}
}
