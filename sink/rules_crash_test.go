package sink_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/inventory"
)

// rulesWorkload is a legacy shop's raw SQL in rounds: each round first
// sets template 1's per-member limit and template 2's end time, then
// writers claim coupons of templates 1..3 and use (or restore) coupons of
// templates 2 and 3. The rules are constant within a round, so what each
// round must flag is known: per (template 1, user), the coupons beyond
// the limit that the round added; every use or restore of template 2
// while it has ended.
type rulesWorkload struct {
	l       *legacyEnv
	rng     *rand.Rand
	perUser int // per_user_limit_exceeded the rounds caused
	expired atomic.Int64
	rounds  int
	mu      sync.Mutex
	errs    []string
}

var (
	roundLimits = []int{2, 1, 3, 3, 5, 2, 4}
	roundEnded  = []bool{false, true, false, true, true, false, true}
)

// holdings counts template 1's coupons per user (quiet: between rounds).
func (w *rulesWorkload) holdings() map[string]int {
	out := map[string]int{}
	for k, n := range w.l.claimCounts(`SELECT tpl_id, uid, COUNT(*) FROM ` + w.l.tq("t_user_coupon") + ` WHERE tpl_id = 1 GROUP BY 1, 2`) {
		out[k] = int(n)
	}
	return out
}

func (w *rulesWorkload) round() {
	l := w.l
	i := w.rounds % len(roundLimits)
	limit, ended := roundLimits[i], roundEnded[i]
	ends := future
	if ended {
		ends = past
	}
	l.exec(`UPDATE `+l.tq("t_coupon_tpl")+` SET per_member = ? WHERE id = 1`, limit)
	l.setEnds(l.DB, 2, ends)
	before := w.holdings()
	var wg sync.WaitGroup
	for k := range 4 {
		seed := w.rng.Uint64()
		wg.Go(func() { w.write(k, rand.New(rand.NewPCG(seed, uint64(k))), 60, ended) })
	}
	wg.Wait()
	for key, n := range w.holdings() {
		w.perUser += max(0, n-max(before[key], limit))
	}
	w.rounds++
}

// write is one writer's operations of a round.
func (w *rulesWorkload) write(k int, rng *rand.Rand, ops int, ended bool) {
	l := w.l
	type owned struct {
		id, tpl int64
		used    bool
	}
	var mine []owned
	fail := func(op string, err error) {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.errs = append(w.errs, fmt.Sprintf("writer %d %s: %v", k, op, err))
	}
	for range ops {
		switch r := rng.IntN(10); {
		case r < 4 || len(mine) == 0: // a claim
			tpl := int64(1 + rng.IntN(3))
			res, err := l.DB.Exec(`INSERT INTO `+l.tq("t_user_coupon")+` (tpl_id, source, state, uid) VALUES (?, 'app', 0, ?)`, tpl, fmt.Sprint("u", rng.IntN(6)))
			if err != nil {
				fail("claim", err)
				continue
			}
			id, _ := res.LastInsertId()
			if tpl != 1 {
				mine = append(mine, owned{id: id, tpl: tpl})
			}
		default: // a use, or a restore of a used coupon
			c := &mine[rng.IntN(len(mine))]
			var err error
			if c.used {
				_, err = l.DB.Exec(`UPDATE `+l.tq("t_user_coupon")+` SET state = 0, order_no = NULL WHERE id = ?`, c.id)
			} else {
				err = w.useTx(c.id)
			}
			if err != nil {
				fail("use", err)
				continue
			}
			c.used = !c.used
			if c.tpl == 2 && ended {
				w.expired.Add(1)
			}
		}
	}
}

// useTx is the shop's redemption in one transaction (a new order each time).
func (w *rulesWorkload) useTx(id int64) error {
	l := w.l
	tx, err := l.DB.Begin()
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	order := fmt.Sprintf("o%d-%d", id, rand.Int64())
	if _, err := tx.Exec(`UPDATE `+l.tq("t_user_coupon")+` SET state = 1, order_no = ? WHERE id = ?`, order, id); err != nil {
		return err
	}
	if _, err := tx.Exec(`INSERT INTO `+l.tq("t_writeoff")+` (coupon_id, order_no) VALUES (?, ?)`, id, order); err != nil {
		return err
	}
	return tx.Commit()
}

// The per-user limit and end time checks across kill -9 of `couponlink
// cdc`, while the writers and the rounds' rule changes go on: no anomaly
// lost or repeated. A replay after a kill judges each point by the rules
// in force there (saved with the checkpoint), also when the template
// row has changed again since.
func TestLegacyRulesSurviveKills(t *testing.T) {
	l := newRulesEnv(t)
	l.rulesTemplate(1, 2, "NULL")
	l.rulesTemplate(2, nil, future)
	l.rulesTemplate(3, nil, future)
	for range 3 {
		l.give(l.DB, 1, "u0") // one over the limit before the first start
	}
	runner := newCDCRunner(t, l.env, testenv.RedisAddr(t))
	// small batches: a replay after a kill spans many, so each must be
	// judged by the rules in force at its own point
	runner.args = append(runner.args, "-mapping", l.mappingFile(), "-batch-rows", "3")
	p := runner.start()
	l.WaitCheckpoint()
	w := &rulesWorkload{l: l, rng: rand.New(rand.NewPCG(rand.Uint64(), 13)), perUser: 1}

	const minKills = 6
	var kills atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for w.rounds < len(roundLimits) || kills.Load() < minKills {
			w.round()
		}
	}()
	finished := func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	}
	rng := rand.New(rand.NewPCG(rand.Uint64(), 14))
	for {
		start := l.checkpoint().Batches
		cdctest.WaitFor(t, 60*time.Second, "the restarted cdc applies batches", func() bool {
			require.False(t, p.exited(), "couponlink cdc exited by itself: %v", p.err)
			return l.checkpoint().Batches > start+1 || finished()
		})
		if finished() {
			break
		}
		time.Sleep(time.Duration(rng.IntN(80)) * time.Millisecond) // the random moment of the kill
		_ = p.signal(syscall.SIGKILL)
		kills.Add(1)
		p = runner.start()
	}
	require.Empty(t, w.errs)
	t.Logf("%d rounds, %d kills; %d per-user and %d expiry anomalies caused", w.rounds, kills.Load(), w.perUser, w.expired.Load())
	require.Positive(t, w.perUser)
	require.Positive(t, w.expired.Load())

	l.WaitCheckpoint()
	cdctest.WaitFor(t, 30*time.Second, "no pending redemption checks", func() bool { return l.pendingChecks() == 0 })
	want := map[string]int{inventory.AnomalyPerUserLimitExceeded: w.perUser, inventory.AnomalyUsedAfterExpiry: int(w.expired.Load())}
	require.Equal(t, want, l.anomalies(), "anomalies recorded despite the kills")
	require.EqualValues(t, w.perUser+int(w.expired.Load()), l.checkpoint().Anomalies)
	require.Equal(t, l.legacyTruth(), l.Counters())
	l.assertClaimCounts()
	require.NoError(t, p.signal(syscall.SIGTERM))
}
