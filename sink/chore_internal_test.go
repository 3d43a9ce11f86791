package sink

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

// fakeChore is a chore of its own sink whose passes fail as told.
func fakeChore(final bool, fail func(n int) error) (*Chore, *prometheus.CounterVec, *atomic.Int64) {
	runs := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "couponlink_test_chore_runs_total", Help: "passes"}, []string{"result"})
	n := new(atomic.Int64) // passes so far; the test reads it while the chore runs
	c := &Chore{name: "test", s: &Sink{}, every: 10 * time.Second, final: final, runs: runs, log: slog.New(slog.DiscardHandler),
		pass: func(ctx context.Context, _ *slog.Logger) error {
			return fail(int(n.Add(1)))
		}}
	return c, runs, n
}

func requireRuns(t *testing.T, runs *prometheus.CounterVec, ok, failed int) {
	t.Helper()
	want := `# HELP couponlink_test_chore_runs_total passes
# TYPE couponlink_test_chore_runs_total counter
`
	if failed > 0 {
		want += `couponlink_test_chore_runs_total{result="error"} ` + strconv.Itoa(failed) + "\n"
	}
	if ok > 0 {
		want += `couponlink_test_chore_runs_total{result="ok"} ` + strconv.Itoa(ok) + "\n"
	}
	require.NoError(t, testutil.CollectAndCompare(runs, strings.NewReader(want)))
}

// A chore runs a pass at once and one per interval; a failed pass is
// counted and the next tick tries again (the loop goes on); on stop the
// release chore runs one last pass, on a context that has not ended.
func TestChoreLoopCountsRetriesAndLastPass(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, runs, n := fakeChore(true, func(n int) error {
			if n == 2 {
				return errors.New("the database went away")
			}
			return nil
		})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- c.Run(ctx) }()
		synctest.Wait()
		require.EqualValues(t, 1, n.Load(), "a pass at once")
		time.Sleep(10 * time.Second)
		synctest.Wait()
		require.EqualValues(t, 2, n.Load(), "a pass per interval")
		requireRuns(t, runs, 1, 1)
		time.Sleep(20 * time.Second)
		synctest.Wait()
		require.EqualValues(t, 4, n.Load(), "the failed pass was tried again at the next tick")
		requireRuns(t, runs, 3, 1)

		cancel()
		require.NoError(t, <-done)
		require.EqualValues(t, 5, n.Load(), "one last pass on stop")
		requireRuns(t, runs, 4, 1)
	})
}

// A fenced pass ends the chore with ErrFenced (the daemon gives up the
// lead) and without a last pass; a chore without a last pass stops at once.
func TestChoreStopsWhenFenced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, runs, n := fakeChore(true, func(n int) error {
			if n == 3 {
				return ErrFenced
			}
			return nil
		})
		require.ErrorIs(t, c.Run(t.Context()), ErrFenced)
		require.EqualValues(t, 3, n.Load())
		requireRuns(t, runs, 2, 1)

		c, _, n = fakeChore(false, func(int) error { return nil })
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		require.NoError(t, c.Run(ctx))
		require.EqualValues(t, 1, n.Load(), "the pass at start and no last pass")
	})
}
