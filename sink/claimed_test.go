package sink_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/api"
	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/internal/testenv"
)

// The "already claimed" sets in owner mode, on one Redis: a random workload
// of claims up to the limits, voids, recycles and raw deletes, with the cdc
// SIGKILLed and Redis flushed in the middle of it; once the cdc has caught
// up, each template's set is exactly its users at the limit in MySQL.
func TestClaimedSetsFollowLimits(t *testing.T) {
	e := newEnv(t)
	r := startPrivateRedis(t)
	e.RDB = r.client() // flushed: the test's own Redis
	claimedChaos(t, e, r.addr, func() { require.NoError(t, e.RDB.FlushAll(context.Background()).Err()) })
}

// The same on a Redis Cluster of three masters: the sets of three
// templates, each in its template's slot, flushed on every master.
func TestClaimedSetsFollowLimitsCluster(t *testing.T) {
	e := newEnv(t)
	cluster := testenv.OwnRedisCluster(t)
	e.RDB = cluster.Client()
	claimedChaos(t, e, cluster.Addrs[0]+","+cluster.Addrs[1]+","+cluster.Addrs[2], cluster.FlushAll)
}

// claimedChaos runs the workload against `couponlink cdc` on redisAddr:
// SIGKILL and a flush (while the cdc is down) after a while, a flush while
// it runs later, and more of the workload once it has rebuilt: then the
// sets must equal the truth (the batches' writes after a rebuild). A last
// flush while nothing is written checks the rebuild alone.
func claimedChaos(t *testing.T, e *env, redisAddr string, flush func()) {
	w := newClaimedWorkload(e, []int64{1, 2, 3})
	runner := newCDCRunner(t, e, redisAddr)
	runner.args = append(runner.args, "-claimed-sets")
	p := runner.start()
	e.WaitCheckpoint()

	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !stop.Load() {
			w.step()
		}
	}()
	until := func(n int64, what string) {
		t.Helper()
		cdctest.WaitFor(t, 60*time.Second, what, func() bool { return w.ops.Load() >= n })
	}
	until(100, "the workload is under way")
	_ = p.signal(syscall.SIGKILL)
	flush()
	p = runner.start()
	until(200, "the workload goes on after the restart")
	flush()
	w.waitRebuilt()
	until(w.ops.Load()+100, "the workload goes on after the rebuild")
	stop.Store(true)
	<-done
	require.Empty(t, w.unexpected, "unexpected errors in the workload")
	t.Logf("claimed workload: %v", w.tally)
	for _, op := range []string{"claim", "limit_reached", "void", "recycle", "give_back"} {
		require.Positive(t, w.tally[op], "the workload made no %s", op)
	}
	w.assertSets("after the batches")

	flush()
	w.waitRebuilt()
	w.assertSets("after a rebuild")
	require.False(t, p.exited(), "couponlink cdc exited by itself: %v", p.err)
}

// waitRebuilt waits until every template's set has its stamp again (a
// flush removes the stamps; a rebuild writes each set's).
func (w *claimedWorkload) waitRebuilt() {
	e := w.e
	e.T.Helper()
	cdctest.WaitFor(e.T, 30*time.Second, "the cdc rebuilt the claimed sets", func() bool {
		for _, tpl := range w.templates {
			if !e.RDB.HExists(e.Ctx, e.Keys.Stamps(tpl), e.Keys.Claimed(tpl)).Val() {
				return false
			}
		}
		return true
	})
}

// assertSets waits for the cdc to catch up, then for each template's set
// to equal its users at the limit in MySQL (Redis is written after the
// checkpoint's commit).
func (w *claimedWorkload) assertSets(when string) {
	e := w.e
	e.T.Helper()
	e.WaitCheckpoint()
	want := claimedTruth(e.T, e.DB)
	require.NotEmpty(e.T, want, "no user at a limit: nothing to compare")
	var got map[int64][]string
	deadline := time.Now().Add(30 * time.Second)
	for {
		if got = claimedSets(e.T, e, w.templates); maps.EqualFunc(got, want, slices.Equal) || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond) // polling a condition
	}
	require.Equal(e.T, want, got, "the claimed sets differ from the users at the limit in MySQL %s", when)
}

// claimedWorkload claims, voids, recycles and gives back (a raw DELETE of
// a coupon with its user_claim count, as a shop's support desk would) over
// a few users and templates of small per-user limits, one step at a time.
type claimedWorkload struct {
	e          *env
	rng        *rand.Rand
	templates  []int64
	users      int
	n          int
	ops        atomic.Int64
	tally      map[string]int
	unexpected []string
}

func newClaimedWorkload(e *env, limits []int64) *claimedWorkload {
	seed := rand.Uint64()
	e.T.Logf("claimed workload seed %d", seed)
	w := &claimedWorkload{e: e, rng: rand.New(rand.NewPCG(seed, 1)), users: 8, tally: map[string]int{}}
	for i, l := range limits {
		tpl, err := e.Store.CreateTemplate(e.Ctx, coupon.NewTemplate{Name: fmt.Sprint("claimed", i), TotalQuota: 10_000,
			Channels: map[string]int64{"app": 10_000}, ValidSeconds: 3600, PerUserLimit: l})
		require.NoError(e.T, err)
		w.templates = append(w.templates, tpl.ID)
	}
	return w
}

// step makes one random operation.
func (w *claimedWorkload) step() {
	defer w.ops.Add(1)
	tpl, user := w.templates[w.rng.IntN(len(w.templates))], fmt.Sprint("u", w.rng.IntN(w.users))
	switch k := w.rng.IntN(10); {
	case k < 5:
		w.claim(tpl, user)
	case k < 7:
		w.onCoupon(tpl, user, "void", coupon.Available, func(id int64) error {
			_, err := w.e.Store.Void(w.e.Ctx, coupon.VoidRequest{UserCouponIDs: []int64{id}, Reason: "test", Operator: "op", RequestID: fmt.Sprint("v", id)})
			return err
		})
	case k < 8:
		w.onCoupon(tpl, user, "recycle", coupon.Available, func(id int64) error {
			order := fmt.Sprint("o", id)
			if _, err := w.e.Store.Redeem(w.e.Ctx, coupon.RedeemRequest{UserCouponID: id, OrderID: order}); err != nil {
				return err
			}
			_, err := w.e.Store.Refund(w.e.Ctx, coupon.RefundRequest{UserCouponID: id, OrderID: order, Mode: "recycle"})
			return err
		})
	default:
		w.onCoupon(tpl, user, "give_back", coupon.None, w.giveBack)
	}
}

func (w *claimedWorkload) claim(tpl int64, user string) {
	w.n++
	_, err := w.e.Store.Claim(w.e.Ctx, coupon.ClaimRequest{TemplateID: tpl, UserID: user, Channel: "app", RequestID: fmt.Sprint("c", w.n)})
	if ce, ok := coupon.AsError(err); ok && ce.Code == api.CodeLimitReached {
		w.tally["limit_reached"]++
		return
	}
	w.done("claim", err)
}

// onCoupon runs op on one of the user's coupons of the template (in state
// st; None: any), if the user has one.
func (w *claimedWorkload) onCoupon(tpl int64, user, name string, st coupon.Status, op func(id int64) error) {
	q := `SELECT id FROM user_coupon WHERE template_id = ? AND user_id = ?`
	args := []any{tpl, user}
	if st != coupon.None {
		q += ` AND status = ?`
		args = append(args, int(st))
	}
	var id int64
	err := w.e.DB.QueryRowContext(w.e.Ctx, q+` ORDER BY RAND() LIMIT 1`, args...).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return
	}
	if err == nil {
		err = op(id)
	}
	w.done(name, err)
}

// giveBack deletes a coupon and takes it off the user's claims: the user
// drops below the limit and may claim again.
func (w *claimedWorkload) giveBack(id int64) error {
	tx, err := w.e.DB.BeginTx(w.e.Ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.Exec(`UPDATE user_claim c JOIN user_coupon u ON u.template_id = c.template_id AND u.user_id = c.user_id
		SET c.claimed = c.claimed - 1 WHERE u.id = ?`, id); err != nil {
		return err
	}
	if _, err := tx.Exec(`DELETE FROM user_coupon WHERE id = ?`, id); err != nil {
		return err
	}
	return tx.Commit()
}

func (w *claimedWorkload) done(op string, err error) {
	if err != nil {
		w.unexpected = append(w.unexpected, op+": "+err.Error())
		return
	}
	w.tally[op]++
}

// claimedTruth is, per template, its users holding its per-user limit or
// more (every state counts, as for the API's user_claim), sorted.
func claimedTruth(t *testing.T, db *sql.DB) map[int64][]string {
	rows, err := db.Query(`SELECT u.template_id, u.user_id FROM user_coupon u JOIN coupon_template t ON t.id = u.template_id
		GROUP BY u.template_id, u.user_id, t.per_user_limit HAVING COUNT(*) >= t.per_user_limit ORDER BY 1, 2`)
	require.NoError(t, err)
	defer rows.Close()
	out := map[int64][]string{}
	for rows.Next() {
		var tpl int64
		var user string
		require.NoError(t, rows.Scan(&tpl, &user))
		out[tpl] = append(out[tpl], user)
	}
	require.NoError(t, rows.Err())
	for _, users := range out {
		slices.Sort(users) // as claimedSets: by bytes, whatever the collation
	}
	return out
}

// claimedSets reads the templates' sets (an empty set is absent), sorted.
func claimedSets(t *testing.T, e *env, templates []int64) map[int64][]string {
	out := map[int64][]string{}
	for _, tpl := range templates {
		m, err := e.RDB.SMembers(e.Ctx, e.Keys.Claimed(tpl)).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			require.NoError(t, err)
		}
		if len(m) > 0 {
			slices.Sort(m)
			out[tpl] = m
		}
	}
	return out
}
