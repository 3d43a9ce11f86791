package reconcile_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/api"
	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/inventory"
	"github.com/couponlink/couponlink/reconcile"
	"github.com/couponlink/couponlink/sink"
	"github.com/couponlink/couponlink/webhook"
)

// testClaimedQuiet is the claimed sets' quiet window of these tests: far
// longer than a test front end's claim takes from its SADD to its commit.
const testClaimedQuiet = 200 * time.Millisecond

// claimedShop is a legacy shop whose templates have a per-user limit and
// whose front end keeps a claimed set per template (redis.claimed_users).
type claimedShop struct {
	*legacy
}

func newClaimedShop(t *testing.T) *claimedShop {
	t.Helper()
	l := newLegacy(t, "")
	l.exec("ALTER TABLE t_coupon_tpl ADD COLUMN lim INT NULL")
	l.exec("ALTER TABLE t_user_coupon ADD KEY (tpl_id, uid)")
	y := strings.Replace(fmt.Sprintf(legacyYAML, l.DBName), "total_quota: budget", "total_quota: budget, per_user_limit: lim", 1) +
		fmt.Sprintf("redis: {claimed_users: %q}\n", l.Keys.Prefix+"shop:coupon:{template}:users")
	m, err := canal.LoadMapping([]byte(y))
	require.NoError(t, err)
	require.NoError(t, m.Check(l.Ctx, l.DB))
	l.m = m
	return &claimedShop{legacy: l}
}

// start creates templates 1, 2, ... with the per-user limits and starts
// the cdc.
func (s *claimedShop) start(limits ...int64) {
	for i, limit := range limits {
		s.exec(`INSERT INTO t_coupon_tpl (id, budget, lim) VALUES (?, 1000000, ?)`, i+1, limit)
	}
	s.StartCDC(s.m)
}

func (s *claimedShop) set(tpl int64) string {
	return fmt.Sprintf("%sshop:coupon:%d:users", s.Keys.Prefix, tpl)
}

func (s *claimedShop) reconciler(mut ...func(*reconcile.Config)) (*reconcile.Reconciler, *prometheus.Registry) {
	return s.env.reconciler(append([]func(*reconcile.Config){func(c *reconcile.Config) {
		c.Mapping, c.ClaimedQuiet = s.m, testClaimedQuiet
	}}, mut...)...)
}

// claim is the legacy front end's claim: SADD the user, then its order's
// transaction, committed or, with fail, rolled back (the SADD stays: the
// drift).
func (s *claimedShop) claim(tpl int64, user string, fail bool) {
	s.T.Helper()
	require.NoError(s.T, s.RDB.SAdd(s.Ctx, s.set(tpl), user).Err())
	require.NoError(s.T, s.order(s.Ctx, tpl, user, 0, fail))
}

// order is the front end's order transaction: the coupon row, committed
// after pause, or rolled back with fail.
func (s *claimedShop) order(ctx context.Context, tpl int64, user string, pause time.Duration, fail bool) error {
	tx, err := s.DB.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT INTO t_user_coupon (uid, tpl_id, state, expire_time) VALUES (?, ?, 0, NOW() + INTERVAL 1 DAY)`,
		user, tpl); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE t_coupon_tpl SET issued = issued + 1 WHERE id = ?`, tpl); err != nil {
		return err
	}
	time.Sleep(pause) // the order's payment: the claim is in flight
	if fail {
		return nil // rolled back
	}
	return tx.Commit()
}

func (s *claimedShop) members(tpl int64) []string {
	s.T.Helper()
	m, err := s.RDB.SMembers(s.Ctx, s.set(tpl)).Result()
	require.NoError(s.T, err)
	slices.Sort(m)
	return m
}

// holders lists the users holding a coupon of tpl in MySQL.
func (s *claimedShop) holders(tpl int64) []string {
	s.T.Helper()
	var out []string
	rows, err := s.DB.QueryContext(s.Ctx, `SELECT DISTINCT uid FROM t_user_coupon WHERE tpl_id = ? ORDER BY uid`, tpl)
	require.NoError(s.T, err)
	defer rows.Close()
	for rows.Next() {
		var u string
		require.NoError(s.T, rows.Scan(&u))
		out = append(out, u)
	}
	require.NoError(s.T, rows.Err())
	slices.Sort(out)
	return out
}

// removals lists the members the reconciler removed from tpl's set, as
// correction_log has them.
func (s *claimedShop) removals(tpl int64) []string {
	s.T.Helper()
	var out []string
	for _, c := range s.corrections() {
		if c.Store == reconcile.StoreClaimedUsers && str(c.New) == "0" && strings.HasPrefix(c.Target, s.set(tpl)+" ") {
			out = append(out, strings.Trim(strings.TrimPrefix(c.Target, s.set(tpl)+" "), `"`))
		}
	}
	return out
}

// claimedDiffs are a report's claimed-set differences, in short.
func claimedDiffs(rep *reconcile.Report) []string {
	out := []string{}
	for _, d := range rep.Differences {
		if d.Store == reconcile.StoreClaimedUsers {
			out = append(out, diff(d))
		}
	}
	return out
}

// A front end that SADDs a user and then fails its order leaves the user
// locked out: the member (and one below a limit of 2) is removed within
// the quiet window and one pass, seen like a stock key's correction (the
// counter series, the finding, the event, correction_log); members at the
// limit stay, and the next pass is clean.
func TestClaimedUsersFailedOrderIsRemoved(t *testing.T) {
	t.Parallel()
	s := newClaimedShop(t)
	s.start(1, 2)
	s.claim(1, "alice", false)
	s.claim(1, "bob", true) // locked out
	s.claim(2, "carol", false)
	s.claim(2, "carol", false) // at the limit of 2
	s.claim(2, "dave", false)  // one of two: not at the limit, yet in the set
	s.Settle()
	r, reg := s.reconciler(func(c *reconcile.Config) { c.Events = true })

	t0 := time.Now()
	rep := s.pass(r)
	took := time.Since(t0)
	require.Equal(t, "auto_fixed", rep.Status, "%v", diffs(rep.Differences))
	set1, set2 := s.set(1), s.set(2)
	require.ElementsMatch(t, []string{
		fmt.Sprintf("claimed_users %s %q 0 1 fixed", set1, "bob"),
		fmt.Sprintf("claimed_users %s %q 0 1 fixed", set2, "dave"),
	}, claimedDiffs(rep))
	require.GreaterOrEqual(t, took, testClaimedQuiet, "removed only after the quiet window")
	require.Equal(t, []string{"alice"}, s.members(1))
	require.Equal(t, []string{"carol"}, s.members(2))
	require.ElementsMatch(t, []string{
		fmt.Sprintf("claimed_users %s %q 1->0", set1, "bob"),
		fmt.Sprintf("claimed_users %s %q 1->0", set2, "dave"),
	}, s.correctionsOf(rep.TaskID))
	require.ElementsMatch(t, []string{"channel=,store=claimed_users,template=1 1", "channel=,store=claimed_users,template=2 1"},
		series(t, reg, "couponlink_reconcile_corrected_total"))

	fs, err := inventory.ListFindings(s.Ctx, s.DB, inventory.FindingsQuery{Source: api.FindingFromReconcile})
	require.NoError(t, err)
	var kinds []string
	for _, f := range fs {
		kinds = append(kinds, f.Kind)
	}
	require.Equal(t, []string{"corrected/claimed_users", "corrected/claimed_users"}, kinds)
	evs := testenv.OutboxEvents(t, s.DB, webhook.ReconcileCorrected)
	require.Len(t, evs, 1)
	require.EqualValues(t, 2, evs[0]["data"].(map[string]any)["corrections"])

	rep = s.pass(r)
	require.Empty(t, claimedDiffs(rep), "the next pass finds the sets right")
	require.Equal(t, []string{"alice"}, s.members(1))
}

// A lost marker (FLUSHALL, a failover that lost writes) would let a user
// claim again: every user at the limit missing from the set is added in
// one pass, without waiting. With -no-fix the same pass only reports:
// nothing is added, nothing removed, nothing recorded as corrected.
func TestClaimedUsersMissingAddedAndNoFixWritesNothing(t *testing.T) {
	t.Parallel()
	s := newClaimedShop(t)
	s.start(1)
	for _, u := range []string{"u1", "u2", "u3"} {
		s.claim(1, u, false)
	}
	s.claim(1, "ghost", true)
	require.NoError(t, s.RDB.SRem(s.Ctx, s.set(1), "u1", "u3").Err()) // lost
	s.Settle()
	set := s.set(1)

	noFix, reg := s.reconciler(func(c *reconcile.Config) { c.AutoFix = new(bool) })
	rep := s.pass(noFix)
	require.Equal(t, "needs_review", rep.Status)
	require.ElementsMatch(t, []string{
		fmt.Sprintf("claimed_users %s %q 1 0 reported", set, "u1"),
		fmt.Sprintf("claimed_users %s %q 1 0 reported", set, "u3"),
		fmt.Sprintf("claimed_users %s %q 0 1 reported", set, "ghost"),
	}, claimedDiffs(rep))
	require.Equal(t, []string{"ghost", "u2"}, s.members(1), "-no-fix writes nothing")
	require.Empty(t, s.correctionsOf(rep.TaskID))
	require.Empty(t, series(t, reg, "couponlink_reconcile_corrected_total"))

	r, _ := s.reconciler(func(c *reconcile.Config) { c.ClaimedQuiet = time.Hour }) // no removal in this test's time
	ctx, cancel := context.WithTimeout(s.Ctx, 3*time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = r.Pass(ctx) // waits the hour for ghost's second look: cancelled
	}()
	require.Eventually(t, func() bool { return len(s.members(1)) == 4 }, 3*time.Second, 10*time.Millisecond,
		"the missing users are added at the first look, before any wait")
	require.Equal(t, []string{"ghost", "u1", "u2", "u3"}, s.members(1))
	cancel()
	<-done
}

// A front end racing claims against passes every 100 ms (each SADD before
// its order commits, a share of the orders failing, holders trying again
// and refused by the set): no
// member whose claim committed is ever removed, on a single Redis and on
// a Redis Cluster; once the claims stop, one pass leaves exactly the
// users holding a coupon.
func TestClaimedUsersRaceNeverRemovesACommittedClaim(t *testing.T) {
	t.Parallel()
	t.Run("single", func(t *testing.T) {
		t.Parallel()
		raceClaims(t, newClaimedShop(t))
	})
	t.Run("cluster", func(t *testing.T) {
		t.Parallel()
		s := newClaimedShop(t)
		s.RDB = testenv.OwnRedisCluster(t).Client()
		raceClaims(t, s)
	})
}

func raceClaims(t *testing.T, s *claimedShop) {
	s.start(1)
	s.Settle()
	r, _ := s.reconciler()
	ctx, cancel := context.WithTimeout(s.Ctx, 2*time.Second)
	defer cancel()

	// the claims come in bursts, all front ends at once, with pauses
	// between: quiet sets get their members removed while claims start
	// again around the passes' looks
	start, rng := time.Now(), rand.New(rand.NewPCG(1, 2))
	var bursts []time.Duration // the ends of the bursts and pauses, in turn
	for at := time.Duration(0); at < 3*time.Second; {
		at += time.Duration(100+rng.IntN(200)) * time.Millisecond // a burst
		bursts = append(bursts, at)
		at += time.Duration(350+rng.IntN(300)) * time.Millisecond // a pause: a pass's window fits
		bursts = append(bursts, at)
	}
	claiming := func() bool {
		i, _ := slices.BinarySearch(bursts, time.Since(start))
		return i%2 == 0
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			// a user whose order failed is not used again: so a removal of a
			// user holding a coupon at the end is a committed claim removed
			failed := map[string]bool{}
			for ctx.Err() == nil {
				if !claiming() {
					time.Sleep(5 * time.Millisecond)
					continue
				}
				user := fmt.Sprintf("g%d-u%d", g, rng.IntN(60)) // a holder tries again: refused
				if failed[user] {
					continue
				}
				added, err := s.RDB.SAdd(s.Ctx, s.set(1), user).Result()
				if err != nil {
					errs <- err
					return
				}
				if added == 0 {
					time.Sleep(time.Millisecond) // "already claimed"
					continue
				}
				fail := rng.IntN(4) == 0
				failed[user] = fail
				if err := s.order(s.Ctx, 1, user, time.Duration(rng.IntN(30))*time.Millisecond, fail); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	passes := 0
	for ctx.Err() == nil {
		if _, err := r.Pass(ctx); err != nil && ctx.Err() == nil {
			require.NoError(t, err)
		}
		passes++
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	during := len(s.removals(1))
	rep := s.pass(r)
	require.Equal(t, s.holders(1), s.members(1), "after the claims stop, one pass leaves exactly the users holding a coupon")

	// every removal the passes made, against who holds a coupon at the end
	holds := map[string]bool{}
	for _, u := range s.holders(1) {
		holds[u] = true
	}
	removed, wrong := s.removals(1), []string{}
	for _, u := range removed {
		if holds[u] {
			wrong = append(wrong, u)
		}
	}
	t.Logf("%d passes, %d removals (%d during the claims), %d holders, last: %s", passes, len(removed), during, len(holds), rep.Summary())
	require.NotEmpty(t, removed, "the failed orders' members were removed")
	require.Empty(t, wrong, "members removed although their claim committed")
}

// A pass lists 100 members of a set one by one and the rest as one
// difference with their count (all of them added, counted and recorded);
// a key that is not a set is left for a person, untouched.
func TestClaimedUsersUnlistedAndWrongType(t *testing.T) {
	t.Parallel()
	s := newClaimedShop(t)
	s.start(1, 1)
	s.exec(`INSERT INTO t_user_coupon (uid, tpl_id, state, expire_time) SELECT CONCAT('m', seq), 1, 0, NOW() + INTERVAL 1 DAY FROM seq_1_to_150`)
	s.exec(`UPDATE t_coupon_tpl SET issued = 150 WHERE id = 1`)
	s.claim(2, "w1", false)
	require.NoError(t, s.RDB.Del(s.Ctx, s.set(2)).Err())
	require.NoError(t, s.RDB.Set(s.Ctx, s.set(2), "oops", 0).Err())
	s.Settle()

	r, reg := s.reconciler()
	rep := s.pass(r)
	require.Equal(t, "needs_review", rep.Status)
	got := claimedDiffs(rep)
	require.Len(t, got, 102, "%v", got)
	require.Contains(t, got, fmt.Sprintf("claimed_users %s (unlisted, added) 50 0 fixed", s.set(1)))
	require.Contains(t, got, fmt.Sprintf("claimed_users %s 0 <string> needs_review", s.set(2)))
	require.Len(t, s.members(1), 150)
	require.Len(t, s.correctionsOf(rep.TaskID), 101)
	require.Equal(t, []string{"channel=,store=claimed_users,template=1 150"}, series(t, reg, "couponlink_reconcile_corrected_total"))
	require.Equal(t, "oops", s.RDB.Get(s.Ctx, s.set(2)).Val(), "not a set: not touched")
	passes, err := reconcile.RecentPasses(s.Ctx, s.DB, 1)
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"claimed_users": 150}, passes[0].Corrected, "the unlisted members counted too")
}

// onCommand runs fn once, after the next command name on key of the
// client it hooks (the reconciler's).
type onCommand struct {
	name, key string
	fn        atomic.Pointer[func()]
}

func (h *onCommand) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *onCommand) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if args := cmd.Args(); cmd.Name() == h.name && len(args) > 1 && fmt.Sprint(args[1]) == h.key {
			if fn := h.fn.Swap(nil); fn != nil {
				(*fn)()
			}
		}
		return err
	}
}

func (h *onCommand) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// A claim in flight at the first look (SADDed, its order not committed)
// that commits inside the quiet window keeps its member: the second look
// reads MySQL again. A claim that starts inside the window (a SADD of
// another member) changes the set: nothing is removed that pass (in
// flight), and the next pass removes the failed order's member.
func TestClaimedUsersSecondLook(t *testing.T) {
	t.Parallel()
	s := newClaimedShop(t)
	s.start(1)
	s.claim(1, "ghost", true)
	s.Settle()
	set := s.set(1)
	h := &onCommand{name: "scard", key: set} // the first look's last read
	s.RDB = hookedClient(t, h)
	r, _ := s.reconciler()

	// in flight at the first look, committed inside the window
	require.NoError(t, s.RDB.SAdd(s.Ctx, set, "late").Err())
	tx, err := s.DB.BeginTx(s.Ctx, nil)
	require.NoError(t, err)
	defer tx.Rollback()
	_, err = tx.Exec(`INSERT INTO t_user_coupon (uid, tpl_id, state, expire_time) VALUES ('late', 1, 0, NOW() + INTERVAL 1 DAY)`)
	require.NoError(t, err)
	_, err = tx.Exec(`UPDATE t_coupon_tpl SET issued = issued + 1 WHERE id = 1`)
	require.NoError(t, err)
	commit := func() { require.NoError(t, tx.Commit()) }
	h.fn.Store(&commit)
	rep := s.pass(r)
	require.Nil(t, h.fn.Load(), "the first look read the set's size")
	require.Equal(t, []string{fmt.Sprintf("claimed_users %s %q 0 1 fixed", set, "ghost")}, claimedDiffs(rep))
	require.Equal(t, []string{"late"}, s.members(1), "the claim committed inside the window: kept")

	// a claim starting inside the window: nothing removed this pass
	s.claim(1, "ghost2", true)
	newcomer := func() { require.NoError(t, s.RDB.SAdd(s.Ctx, set, "newcomer").Err()) }
	h.fn.Store(&newcomer)
	rep = s.pass(r)
	require.Equal(t, []string{fmt.Sprintf("claimed_users %s 0 1 in_flight", set)}, claimedDiffs(rep))
	require.Equal(t, []string{"ghost2", "late", "newcomer"}, s.members(1))
	rep = s.pass(r)
	require.ElementsMatch(t, []string{
		fmt.Sprintf("claimed_users %s %q 0 1 fixed", set, "ghost2"),
		fmt.Sprintf("claimed_users %s %q 0 1 fixed", set, "newcomer"),
	}, claimedDiffs(rep), "quiet again: removed")
	require.Equal(t, []string{"late"}, s.members(1))
}

// Owner mode: the set the cdc keeps for couponlink's own schema
// (-claimed-sets) is compared as well. A member lost (a Redis that lost a
// write) is added at the first look; a member with no coupon is removed
// after the quiet window; the next pass is clean. A template whose set no
// cdc keeps is not compared.
func TestClaimedOwnerSetCorrected(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cdc := e.StartCDC(nil, func(cfg *sink.Config, _ *sink.Daemon) { cfg.ClaimedSets = true })
	a := e.Template(map[string]int64{"app": 30}, time.Hour)
	e.exec(`UPDATE coupon_template SET per_user_limit = 1 WHERE id = ?`, a)
	for _, user := range []string{"ann", "bob", "cy"} {
		_, err := e.Store.Claim(e.Ctx, coupon.ClaimRequest{TemplateID: a, UserID: user, Channel: "app", RequestID: "claim-" + user})
		require.NoError(t, err)
	}
	e.Settle()
	set := e.Keys.Claimed(a)
	members := func() []string {
		m, err := e.RDB.SMembers(e.Ctx, set).Result()
		require.NoError(t, err)
		slices.Sort(m)
		return m
	}
	require.Equal(t, []string{"ann", "bob", "cy"}, members(), "the cdc keeps the set")
	require.NoError(t, e.RDB.SRem(e.Ctx, set, "bob").Err())
	require.NoError(t, e.RDB.SAdd(e.Ctx, set, "ghost").Err())

	r, reg := e.reconciler(func(c *reconcile.Config) { c.ClaimedQuiet = testClaimedQuiet })
	rep := e.pass(r)
	require.ElementsMatch(t, []string{
		fmt.Sprintf("claimed_users %s %q 1 0 fixed", set, "bob"),
		fmt.Sprintf("claimed_users %s %q 0 1 fixed", set, "ghost"),
	}, claimedDiffs(rep))
	require.Equal(t, []string{"ann", "bob", "cy"}, members())
	v, _ := cdctest.Metric(t, reg, "couponlink_reconcile_corrected_total", map[string]string{"store": "claimed_users"})
	require.EqualValues(t, 2, v)
	require.Empty(t, claimedDiffs(e.pass(r)), "the next pass finds the set right")

	// with a cdc that does not keep the sets, the reconciler does not make them
	e2 := newEnv(t)
	e2.StartCDC(nil)
	b := e2.Template(map[string]int64{"app": 30}, time.Hour)
	_, err := e2.Store.Claim(e2.Ctx, coupon.ClaimRequest{TemplateID: b, UserID: "ann", Channel: "app", RequestID: "claim-ann"})
	require.NoError(t, err)
	e2.Settle()
	r2, _ := e2.reconciler(func(c *reconcile.Config) { c.ClaimedQuiet = testClaimedQuiet })
	require.Empty(t, claimedDiffs(e2.pass(r2)), "no set is kept: none compared")
	require.Zero(t, e2.RDB.Exists(e2.Ctx, e2.Keys.Claimed(b)).Val())

	passes, err := reconcile.RecentPasses(e.Ctx, e.DB, 2)
	require.NoError(t, err)
	require.Nil(t, passes[0].Corrected, "the clean pass corrected nothing")
	require.Equal(t, map[string]int64{"claimed_users": 2}, passes[1].Corrected, "what status and the console's Health show")

	// a cdc started again without -claimed-sets drops the sets and their
	// stamps at its start's rebuild: no set goes stale under a stamp that
	// says the cdc keeps it, and the reconciler compares none
	cdc.Stop(t)
	again := e.StartCDC(nil)
	cdctest.WaitFor(t, 30*time.Second, "the restarted cdc's Redis rebuild", func() bool {
		return cdctest.MetricSum(t, again.Reg, "couponlink_redis_rebuilds_total") >= 1
	})
	require.Zero(t, e.RDB.Exists(e.Ctx, set).Val(), "the set no cdc keeps is still there")
	require.False(t, e.RDB.HExists(e.Ctx, e.Keys.Stamps(a), set).Val(), "the set's stamp is still there")
	require.NoError(t, e.RDB.SAdd(e.Ctx, set, "ghost").Err())
	require.Empty(t, claimedDiffs(e.pass(r)), "a set no cdc keeps was compared")
}
