package reconcile_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/reconcile"
)

// claimScript is a front end's claim: take one from the stock key if any is left.
var claimScript = redis.NewScript(`if tonumber(redis.call('GET', KEYS[1])) > 0 then return redis.call('DECR', KEYS[1]) else return -1 end`)

// claimers are front-end clients claiming through claimScript in a tight loop.
type claimers struct {
	ok   atomic.Int64 // successful DECRs
	fail atomic.Value // first error
	stop chan struct{}
	wg   sync.WaitGroup
}

func startClaimers(t *testing.T, rdb *redis.Client, key string, n int) *claimers {
	c := &claimers{stop: make(chan struct{})}
	for range n {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			for {
				select {
				case <-c.stop:
					return
				default:
				}
				v, err := claimScript.Run(context.Background(), rdb, []string{key}).Int64()
				if err != nil {
					c.fail.CompareAndSwap(nil, err)
					return
				}
				if v >= 0 {
					c.ok.Add(1)
				}
			}
		}()
	}
	t.Cleanup(c.halt)
	return c
}

func (c *claimers) halt() {
	select {
	case <-c.stop:
	default:
		close(c.stop)
	}
	c.wg.Wait()
}

// frontEnd is a Redis client of the test's own, with a pool for 16 clients.
func frontEnd(t *testing.T) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(t), PoolSize: 32})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// hook runs functions at chosen points of a Redis client's traffic.
type hook struct {
	// beforeEval runs once, before the next EVAL/EVALSHA with arguments on
	// key: the reconciler's compare-and-set (its read of a wrong-type key has none).
	evalKey    string
	beforeEval atomic.Pointer[func()]
	// afterPipeline runs once, after the next pipeline (the reconciler's reads of the stock keys).
	afterPipeline atomic.Pointer[func()]
	// failPipelines makes every pipeline fail.
	failPipelines atomic.Bool
}

func (h *hook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *hook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if n := cmd.Name(); (n == "evalsha" || n == "eval") && len(cmd.Args()) > 4 && fmt.Sprint(cmd.Args()[3]) == h.evalKey {
			if fn := h.beforeEval.Swap(nil); fn != nil {
				(*fn)()
			}
		}
		return next(ctx, cmd)
	}
}

func (h *hook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if h.failPipelines.Load() {
			err := fmt.Errorf("injected Redis failure")
			for _, c := range cmds {
				c.SetErr(err)
			}
			return err
		}
		err := next(ctx, cmds)
		if fn := h.afterPipeline.Swap(nil); fn != nil {
			(*fn)()
		}
		return err
	}
}

func hookedClient(t *testing.T, h redis.Hook) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(t)})
	c.AddHook(h)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// casDelta is what the task's compare-and-sets added to key: Σ(new − old).
func (e *env) casDelta(task int64, key string) (delta int64, n int) {
	e.T.Helper()
	for _, c := range e.corrections() {
		if c.TaskID == task && c.Store == "redis" && c.Target == key {
			require.NotNil(e.T, c.Old, "a correction of a key that existed records its old value")
			delta += *c.New - *c.Old
			n++
		}
	}
	return delta, n
}

// A pass runs while 16 clients DECR the stock key through a claim script:
// no DECR is ever lost (the final value is the start minus the successful
// DECRs, plus what a compare-and-set added, if one happened), and the pass
// skips the busy key; a quiet key is fixed; a DECR that lands between the
// pass's check and its compare-and-set makes the compare-and-set refuse.
func TestClaimsDuringPassAreNeverLost(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.StartCDC(nil)
	tpl := e.Template(map[string]int64{"app": 1000}, time.Hour)
	e.claim(tpl, "app", 3)
	e.Settle()
	key := e.Keys.Stock(tpl, "app")
	const truth = 997
	fe := frontEnd(t)
	h := &hook{evalKey: key}
	r, _ := e.reconciler(func(c *reconcile.Config) { c.Redis = hookedClient(t, h) })

	// 1. busy: the clients DECR all through the pass
	const start = 1_000_000
	require.NoError(t, e.RDB.Set(e.Ctx, key, start, 0).Err())
	c := startClaimers(t, fe, key, 16)
	cdctest.WaitFor(t, testCatchUp, "the clients are claiming", func() bool { return c.ok.Load() >= 16*10 })
	before := c.ok.Load()
	rep := e.pass(r)
	during := c.ok.Load() - before
	c.halt()
	require.Nil(t, c.fail.Load(), "a claim failed")
	require.Positive(t, during, "the clients claimed during the pass")
	final := *e.redisGet(key)
	added, fixes := e.casDelta(rep.TaskID, key)
	require.Equal(t, start-c.ok.Load()+added, final, "a DECR was lost: start %d, %d DECRs, compare-and-set added %d", start, c.ok.Load(), added)
	d := find(t, rep.Differences, "redis", key)
	require.Equal(t, reconcile.ActionInFlight, d.Action, "the key moved all through the quiet window")
	require.Contains(t, d.Reason, "busy key")
	require.Zero(t, fixes, "a busy key is not written")

	// 2. quiet: the clients stopped; the key is set to the truth
	rep = e.pass(r)
	require.Equal(t, []string{fmt.Sprintf("redis %s %d %d fixed", key, truth, final)}, diffs(rep.Differences))
	require.Equal(t, []string{fmt.Sprintf("redis %s %d->%d", key, final, truth)}, e.correctionsOf(rep.TaskID))
	require.Equal(t, int64(truth), *e.redisGet(key))

	// 3. a claim between the pass's last check and its compare-and-set
	require.NoError(t, e.RDB.Set(e.Ctx, key, 5000, 0).Err())
	var claimed int64
	claim := func() {
		v, err := claimScript.Run(e.Ctx, fe, []string{key}).Int64()
		require.NoError(t, err)
		claimed = v
	}
	h.beforeEval.Store(&claim)
	rep = e.pass(r)
	require.Equal(t, int64(4999), claimed, "the claim ran just before the compare-and-set")
	d = find(t, rep.Differences, "redis", key)
	require.Equal(t, reconcile.ActionInFlight, d.Action)
	require.Contains(t, d.Reason, "moved between the check and the compare-and-set")
	require.Empty(t, e.correctionsOf(rep.TaskID))
	require.Equal(t, int64(4999), *e.redisGet(key), "the claim's DECR survived the pass")

	// the next pass finds it quiet and fixes it
	rep = e.pass(r)
	require.Equal(t, []string{fmt.Sprintf("redis %s 4999->%d", key, truth)}, e.correctionsOf(rep.TaskID))

	// 4. the clients again, from the truth, while a pass runs: still nothing lost
	c = startClaimers(t, fe, key, 16)
	cdctest.WaitFor(t, testCatchUp, "the clients are claiming", func() bool { return c.ok.Load() >= 16 })
	rep = e.pass(r)
	c.halt()
	require.Nil(t, c.fail.Load())
	added, _ = e.casDelta(rep.TaskID, key)
	require.Equal(t, truth-c.ok.Load()+added, *e.redisGet(key), "a DECR was lost")
	for _, d := range rep.Differences {
		require.True(t, d.Action == reconcile.ActionFixed || strings.Contains(d.Reason, "busy key"), "%+v", d)
	}
}

// Two reconcilers started at once on one database take turns (a MySQL
// named lock per database): the second pass waits for the first, then
// finds the drift fixed, so a counter fix (relative: by the error found)
// is applied once, not twice. A pass that cannot get the lock within
// CatchUpWait fails without a task.
func TestTwoPassesAtOnceFixOnce(t *testing.T) {
	t.Parallel()
	e, tpl, web := counterAndKeyDrift(t, 3)

	var reps [2]*reconcile.Report
	var errs [2]error
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range reps {
		r, _ := e.reconciler()
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			reps[i], errs[i] = r.Pass(e.Ctx)
		}()
	}
	close(start)
	wg.Wait()
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	require.ElementsMatch(t, []string{"auto_fixed", "clean"}, []string{reps[0].Status, reps[1].Status})
	var all []string
	for _, c := range e.corrections() {
		all = append(all, fmt.Sprintf("%s %s %s->%s", c.Store, c.Target, str(c.Old), str(c.New)))
	}
	require.ElementsMatch(t, []string{"counter " + target(tpl, "app", "held") + " 10->7", "redis " + web + " 1->45"}, all,
		"each value corrected once")
	require.Equal(t, e.Truth(), e.CounterRows())
	require.Equal(t, "45", str(e.redisGet(web)))

	// a pass that holds the lock longer than another waits for it
	require.NoError(t, e.RDB.Set(e.Ctx, web, 2, 0).Err())
	slow, _ := e.reconciler(func(c *reconcile.Config) { c.QuietWindow = 3 * time.Second })
	done := make(chan error, 1)
	go func() { _, err := slow.Pass(e.Ctx); done <- err }()
	cdctest.WaitFor(t, testCatchUp, "the slow pass holds the lock and runs", func() bool {
		return e.int(`SELECT COUNT(*) FROM reconcile_task WHERE status = 'running'`) == 1
	})
	tasks := e.int(`SELECT COUNT(*) FROM reconcile_task`)
	impatient, _ := e.reconciler(func(c *reconcile.Config) { c.CatchUpWait = time.Second })
	rep, err := impatient.Pass(e.Ctx)
	require.ErrorContains(t, err, "another reconcile pass is running")
	require.Nil(t, rep)
	require.NoError(t, <-done)
	require.Equal(t, tasks, e.int(`SELECT COUNT(*) FROM reconcile_task`), "no task for a pass that did not run")
}
