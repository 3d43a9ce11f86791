package sink_test

import (
	"errors"
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

// orderShop writes the legacy schema of evidence order_table as its shop
// would: coupons of t_user_coupon, and orders of t_order that carry the
// template of the coupon they used and the member, not the coupon. Its
// methods are safe for concurrent use (errors, not test failures).
type orderShop struct{ l *legacyEnv }

func (s orderShop) claim(tpl int64, uid string) (int64, error) {
	res, err := s.l.DB.Exec(`INSERT INTO `+s.l.tq("t_user_coupon")+` (tpl_id, source, state, uid) VALUES (?, 'app', 0, ?)`, tpl, uid)
	if err != nil {
		return 0, err
	}
	return res.LastInsertId()
}

// use is the coupon's move into USED; order is its t_order insert.
func (s orderShop) use(id int64) []any {
	return []any{`UPDATE ` + s.l.tq("t_user_coupon") + ` SET state = 1 WHERE id = ? AND state = 0`, id}
}

func (s orderShop) order(tpl any, uid, sn string) []any {
	return []any{`INSERT INTO ` + s.l.tq("t_order") + ` (order_sn, uid, tpl_id, amount) VALUES (?, ?, ?, 9.90)`, sn, uid, tpl}
}

// tx runs the statements in one transaction.
func (s orderShop) tx(stmts ...[]any) error {
	tx, err := s.l.DB.Begin()
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	for _, st := range stmts {
		if _, err := tx.Exec(st[0].(string), st[1:]...); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// must fails the test on an error (test goroutine only).
func (s orderShop) must(err error) {
	s.l.T.Helper()
	require.NoError(s.l.T, err)
}

func (s orderShop) coupon(tpl int64, uid string) int64 {
	s.l.T.Helper()
	id, err := s.claim(tpl, uid)
	s.must(err)
	return id
}

// waitDecided waits until the cdc applied every write so far and decided
// every order key that differs (none has a deadline left).
func (s orderShop) waitDecided(p *cdcProcess) {
	s.l.T.Helper()
	s.l.WaitCheckpoint()
	cdctest.WaitFor(s.l.T, 60*time.Second, "every order key decided", func() bool {
		require.False(s.l.T, p.exited(), "couponlink cdc exited by itself: %v", p.err)
		var n int
		require.NoError(s.l.T, s.l.DB.QueryRow(`SELECT COUNT(*) FROM cdc_order_key WHERE deadline IS NOT NULL`).Scan(&n))
		return n == 0
	})
}

// Evidence order_table, through `couponlink cdc` with kill -9s: per
// (template, user), USED coupons are compared with orders, a grace after
// they last changed. One USED coupon more than orders is one
// used_without_redemption (naming the key's last coupon into USED), one
// order more than USED coupons one double_spend (naming its last order).
// Differences at the first start's snapshot are judged too. No anomaly for
// an order in the coupon's transaction, in a later one or an earlier one
// within the grace, a refund whose order is deleted or loses its template,
// or an order without a coupon; an order that arrives after its use was
// reported clears the difference, and a later use without one is new.
// Writers go on while the cdc is killed at random moments: every anomaly
// exactly once; a --rebuild repeats none and finds what it skipped.
func TestEvidenceOrderTable(t *testing.T) {
	l := newEvidenceEnv(t, "order_table")
	s := orderShop{l}
	ord := l.tq("t_order")
	restore := func(id int64) []any {
		return []any{`UPDATE ` + l.tq("t_user_coupon") + ` SET state = 0 WHERE id = ?`, id}
	}
	uwr := func(coupon, tpl int64) anomalyRow {
		return anomalyRow{Kind: inventory.AnomalyUsedWithoutRedemption, Coupon: coupon, Template: tpl}
	}
	ds := func(coupon, tpl int64, order string) anomalyRow {
		return anomalyRow{Kind: inventory.AnomalyDoubleSpend, Coupon: coupon, Template: tpl, Order: order}
	}

	// before the first start: A used two coupons with one order, B one with
	// two orders, C is even, D's order used no coupon
	a1, a2, b1, c1 := s.coupon(1, "A"), s.coupon(1, "A"), s.coupon(1, "B"), s.coupon(2, "C")
	s.must(s.tx(s.use(a1), s.use(a2), s.use(b1), s.use(c1), s.order(1, "A", "sa1"), s.order(1, "B", "sb1"), s.order(1, "B", "sb2"),
		s.order(2, "C", "sc1"), s.order(nil, "D", "sd1")))
	want := []anomalyRow{uwr(a2, 1), ds(b1, 1, "")}

	const grace = 3 * time.Second
	runner := newCDCRunner(t, l.env, testenv.RedisAddr(t))
	runner.args = append(runner.args, "-mapping", l.mappingFile(), "-redemption-grace", grace.String())
	p := runner.start()
	s.waitDecided(p)
	l.requireAnomalies(want, "the differences at the first start's snapshot")

	// one by one, with the cdc running
	e1, f1, g1, h1, l1 := s.coupon(1, "E"), s.coupon(1, "F"), s.coupon(2, "G"), s.coupon(1, "H"), s.coupon(2, "L")
	s.must(s.tx(s.use(e1), s.order(1, "E", "se1"))) // the order in the coupon's transaction
	s.must(s.tx(s.use(f1)))                         // in a later one
	s.must(s.tx(s.order(1, "F", "sf1")))
	s.must(s.tx(s.order(2, "G", "sg1"))) // in an earlier one
	s.must(s.tx(s.use(g1)))
	s.must(s.tx(s.use(h1)))                // never: used without an order
	s.must(s.tx(s.use(l1)))                // nor this one
	s.must(s.tx(s.order(2, "I", "si1")))   // an order of a coupon never used
	s.must(s.tx(s.order(nil, "Z", "sz1"))) // an order without a coupon
	j1, k1, m1 := s.coupon(1, "J"), s.coupon(1, "K"), s.coupon(1, "M")
	s.must(s.tx(s.use(j1), s.order(1, "J", "sj1"))) // refunded: the order is deleted
	s.must(s.tx(restore(j1), []any{`DELETE FROM ` + ord + ` WHERE order_sn = 'sj1'`}))
	s.must(s.tx(s.use(k1), s.order(1, "K", "sk1"))) // refunded: the order loses its template
	s.must(s.tx(restore(k1), []any{`UPDATE ` + ord + ` SET tpl_id = NULL WHERE order_sn = 'sk1'`}))
	s.must(s.tx(s.use(m1), s.order(1, "M", "sm1"))) // the order moves to another member: M lacks one, N has one too many
	s.must(s.tx([]any{`UPDATE ` + ord + ` SET uid = 'N' WHERE order_sn = 'sm1'`}))
	s.must(s.tx([]any{`UPDATE ` + ord + ` SET amount = 1 WHERE order_sn = 'se1'`})) // no key changes
	want = append(want, uwr(h1, 1), uwr(l1, 2), ds(0, 2, "si1"), uwr(m1, 1), ds(0, 1, "sm1"))
	s.waitDecided(p)
	l.requireAnomalies(want, "one by one")

	// H's order arrives late: no anomaly; a use with its order neither; a
	// use without one is new. L's the same in one transaction: the orders
	// count where they are among the uses.
	s.must(s.tx(s.order(1, "H", "sh1")))
	h2, h3, l2, l3 := s.coupon(1, "H"), s.coupon(1, "H"), s.coupon(2, "L"), s.coupon(2, "L")
	s.must(s.tx(s.use(h2), s.order(1, "H", "sh2")))
	s.must(s.tx(s.use(h3)))
	s.must(s.tx(s.order(2, "L", "sl1"), s.use(l2), s.order(2, "L", "sl2"), s.use(l3)))
	want = append(want, uwr(h3, 1), uwr(l3, 2))
	s.waitDecided(p)
	l.requireAnomalies(want, "after a late order")

	want = append(want, s.killWhileWriting(t, runner, &p)...)
	s.waitDecided(p)
	l.requireAnomalies(want, "exactly once across kill -9s")

	// a --rebuild keeps what was reported, and finds the difference the
	// binlog it skips made
	require.NoError(t, p.signal(syscall.SIGTERM))
	r1 := s.coupon(2, "R")
	s.must(s.tx(s.use(r1)))
	want = append(want, uwr(r1, 2))
	args := runner.args
	runner.args = append(append([]string{}, args...), "-rebuild")
	p = runner.start()
	runner.args = args
	s.waitDecided(p)
	l.requireAnomalies(want, "after a --rebuild")
	require.EqualValues(t, len(want), l.checkpoint().Anomalies)
	require.Equal(t, l.legacyTruth(), l.Counters())
	require.NoError(t, p.signal(syscall.SIGTERM))
}

// killWhileWriting runs writers, each key (a member of its own) one case
// of the order check, while the cdc is killed with SIGKILL at random
// moments and restarted, until it was killed four times; it returns the
// anomalies the writers caused.
func (s orderShop) killWhileWriting(t *testing.T, runner *cdcRunner, p **cdcProcess) []anomalyRow {
	const writers, kills = 3, 4
	var mu sync.Mutex
	var want []anomalyRow
	var errs []error
	var stop atomic.Bool
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				a, err := s.writeCase(i%5, int64(1+i%2), fmt.Sprintf("w%d-%d", w, i))
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else if a != nil {
					want = append(want, *a)
				}
				mu.Unlock()
			}
		})
	}
	rng := rand.New(rand.NewPCG(rand.Uint64(), 13))
	for range kills {
		start := s.l.checkpoint().Batches
		cdctest.WaitFor(t, 60*time.Second, "the restarted cdc applies batches", func() bool {
			require.False(t, (*p).exited(), "couponlink cdc exited by itself: %v", (*p).err)
			return s.l.checkpoint().Batches > start+1
		})
		time.Sleep(time.Duration(rng.IntN(400)) * time.Millisecond) // the random moment of the kill
		_ = (*p).signal(syscall.SIGKILL)
		*p = runner.start()
	}
	stop.Store(true)
	wg.Wait()
	require.Empty(t, errs)
	t.Logf("%d kills while the writers ran; they caused %d anomalies", kills, len(want))
	return want
}

// writeCase writes one case of the order check for member uid: 0 a use
// with its order in one transaction, 1 the order just after, 2 the order
// just before (no anomaly), 3 a use without an order, 4 an order without
// a use. It returns the anomaly the case causes.
func (s orderShop) writeCase(kind int, tpl int64, uid string) (*anomalyRow, error) {
	sn := "s" + uid
	if kind == 4 {
		return &anomalyRow{Kind: inventory.AnomalyDoubleSpend, Template: tpl, Order: sn}, s.tx(s.order(tpl, uid, sn))
	}
	id, err := s.claim(tpl, uid)
	if err != nil {
		return nil, err
	}
	switch kind {
	case 0:
		err = s.tx(s.use(id), s.order(tpl, uid, sn))
	case 1:
		err = errors.Join(s.tx(s.use(id)), s.tx(s.order(tpl, uid, sn)))
	case 2:
		err = errors.Join(s.tx(s.order(tpl, uid, sn)), s.tx(s.use(id)))
	case 3:
		return &anomalyRow{Kind: inventory.AnomalyUsedWithoutRedemption, Coupon: id, Template: tpl}, s.tx(s.use(id))
	}
	return nil, err
}
