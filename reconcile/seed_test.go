package reconcile_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/reconcile"
)

// lagWriter is the legacy front end's MySQL writer: it writes the claims
// that Redis already counted, in batches, behind them.
type lagWriter struct {
	written atomic.Int64 // rows committed
	batches atomic.Int64
	lose    chan struct{} // closed: the remaining writes are lost
	done    chan struct{}
	err     atomic.Value
}

func startLagWriter(l *legacy, tpl int64, queue <-chan string, batch int, every time.Duration) *lagWriter {
	w := &lagWriter{lose: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(every) // the writer's pace: it lags behind the claims
		defer tick.Stop()
		for {
			select {
			case <-w.lose:
				return
			case <-tick.C:
			}
			var users []any
			for len(users) < batch {
				u, ok := <-queue
				if !ok {
					break
				}
				users = append(users, u, tpl)
			}
			if len(users) == 0 {
				return
			}
			q := "INSERT INTO t_user_coupon (uid, tpl_id, state, expire_time) VALUES " +
				strings.TrimSuffix(strings.Repeat("(?, ?, 0, NOW() + INTERVAL 1 DAY), ", len(users)/2), ", ")
			if err := w.write(l, q, users, tpl); err != nil {
				w.err.CompareAndSwap(nil, err)
				return
			}
			w.written.Add(int64(len(users) / 2))
			w.batches.Add(1)
		}
	}()
	return w
}

// write commits one batch: the rows and the template's own issued count.
func (w *lagWriter) write(l *legacy, q string, args []any, tpl int64) error {
	ctx := context.Background()
	tx, err := l.DB.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, q, args...); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE t_coupon_tpl SET issued = issued + ? WHERE id = ?`, len(args)/2, tpl); err != nil {
		return err
	}
	return tx.Commit()
}

// stop loses the remaining writes and waits for the writer to end.
func (w *lagWriter) stop() {
	close(w.lose)
	<-w.done
}

// The seed case: a legacy front end DECRs Redis on every claim and writes
// MySQL later in batches. While the writer is behind and catching up, the
// pass sees Redis lower than the truth with a shrinking gap: in flight,
// nothing written. Then the writer loses the rest of its writes and stops:
// Redis says 0 left, MySQL says budget − written; the next pass finds the
// key quiet and the gap stable, sets the truth by compare-and-set and
// records it.
func TestSeedCaseInFlightThenLost(t *testing.T) {
	t.Parallel()
	l := newLegacy(t, "lg:stock:{template}")
	const budget = 3000
	l.newTemplate(1, budget)
	l.StartCDC(l.m)
	key := l.key(1)
	require.NoError(t, l.RDB.Set(l.Ctx, key, budget, 0).Err())

	// every claim DECRs Redis at once and queues its row for the writer
	c := startClaimers(t, frontEnd(t), key, 16)
	cdctest.WaitFor(t, testCatchUp, "the front end sells the whole budget", func() bool { return c.ok.Load() >= budget })
	c.halt()
	require.Nil(t, c.fail.Load())
	require.Equal(t, int64(budget), c.ok.Load())
	queue := make(chan string, budget)
	for i := range budget {
		queue <- fmt.Sprint("u", i+1)
	}
	close(queue)
	require.Equal(t, "0", str(l.redisGet(key)), "Redis says sold out")

	w := startLagWriter(l, 1, queue, 10, 20*time.Millisecond)
	cdctest.WaitFor(t, testCatchUp, "the writer has written some rows", func() bool { return w.written.Load() >= 100 })

	// pass 1 while the writer catches up; it commits a batch during the
	// pass's quiet window (the hook waits for one after the first read)
	h := &hook{}
	progress := func() {
		b := w.batches.Load()
		cdctest.WaitFor(t, testCatchUp, "the writer commits a batch during the quiet window", func() bool { return w.batches.Load() > b })
	}
	h.afterPipeline.Store(&progress)
	r := l.reconciler(func(c *reconcile.Config) { c.Redis = hookedClient(t, h) })
	rep := l.pass(r)
	w.stop() // the remaining writes are lost
	require.Nil(t, w.err.Load())
	written := w.written.Load()
	require.Less(t, written, int64(budget), "the writer must still be behind when it loses its writes")
	require.Nil(t, h.afterPipeline.Load(), "the hook ran")

	require.Equal(t, "clean", rep.Status, "in flight is not a finding: %v", diffs(rep.Differences))
	require.True(t, rep.CountersCompared, rep.Note)
	require.Len(t, rep.Differences, 1, "%v", diffs(rep.Differences))
	d := find(t, rep.Differences, "redis", key)
	require.Equal(t, reconcile.ActionInFlight, d.Action)
	require.Contains(t, d.Reason, "a writer is catching up")
	require.Contains(t, d.Reason, "the gap shrinks")
	require.Equal(t, "0", str(d.Found))
	require.Empty(t, l.corrections(), "nothing written while in flight")
	require.Equal(t, "0", str(l.redisGet(key)))

	// pass 2: the key is quiet and the gap stable: lost; set the truth
	l.WaitCheckpoint()
	r = l.reconciler()
	rep = l.pass(r)
	left := budget - written
	require.Equal(t, "auto_fixed", rep.Status)
	require.Equal(t, []string{fmt.Sprintf("redis %s %d 0 fixed", key, left)}, diffs(rep.Differences))
	require.Contains(t, rep.Differences[0].Reason, "lost")
	require.Equal(t, []string{fmt.Sprintf("redis %s 0->%d", key, left)}, l.correctionsOf(rep.TaskID))
	require.Equal(t, fmt.Sprint(left), str(l.redisGet(key)), "Redis says what MySQL says is left")
	require.Equal(t, written, l.int(`SELECT COUNT(*) FROM t_user_coupon`))

	rep = l.pass(r)
	require.Equal(t, "clean", rep.Status, "%v", diffs(rep.Differences))
	require.Empty(t, rep.Differences)
}
