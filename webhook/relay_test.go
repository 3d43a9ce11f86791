package webhook

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

// fakeSink records what it took; refuse and down make it fail.
type fakeSink struct {
	name   string
	mu     sync.Mutex
	got    []Message
	refuse string // an event id it refuses (Refused)
	down   bool   // every send fails (an outage)
}

func (f *fakeSink) Name() string { return f.name }
func (f *fakeSink) Close() error { return nil }

func (f *fakeSink) Send(_ context.Context, msgs []Message) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return 0, errors.New("connection refused")
	}
	for i, m := range msgs {
		if m.ID == f.refuse {
			return i, Refused(errors.New("message too large"))
		}
		f.got = append(f.got, m)
	}
	return len(msgs), nil
}

func (f *fakeSink) ids() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, len(f.got))
	for i, m := range f.got {
		out[i] = m.ID
	}
	return out
}

func newTestRelay(t *testing.T, db *sql.DB, s Sink, edit func(*RelayConfig)) (*Relay, *SinkMetrics) {
	t.Helper()
	m, err := NewSinkMetrics(prometheus.NewRegistry())
	require.NoError(t, err)
	cfg := RelayConfig{DB: db, Sink: s, Metrics: m, Logger: testLogger(), MinBackoff: time.Nanosecond,
		MaxBackoff: time.Nanosecond}
	if edit != nil {
		edit(&cfg)
	}
	r, err := NewRelay(cfg)
	require.NoError(t, err)
	return r, m
}

func ids(es []Event) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.ID
	}
	return out
}

func sinkCount(m *SinkMetrics, sink, result string) float64 {
	return testutil.ToFloat64(m.deliveries.WithLabelValues(sink, result))
}

// An event written by a transaction that commits after a later one (its
// outbox id below one already visible) is not skipped: the relay stops
// before the hole until it fills (or is GapWait old), and then delivers
// both in outbox order.
func TestRelayWaitsAtAHoleAndKeepsOrder(t *testing.T) {
	s := &fakeSink{name: "fake"}
	r, _ := newTestRelay(t, openDB(t), s, func(c *RelayConfig) { c.GapWait = time.Hour })
	db := r.db
	ctx := context.Background()
	first := someEvents(3)
	enqueueCommitted(t, db, first...)
	_, err := r.Round(ctx)
	require.NoError(t, err)
	require.Equal(t, ids(first), s.ids())

	slow, err := db.BeginTx(ctx, nil) // takes the next id, commits last
	require.NoError(t, err)
	late, later := someEvents(1), someEvents(2)
	require.NoError(t, Enqueue(ctx, slow, late...))
	enqueueCommitted(t, db, later...)
	_, err = r.Round(ctx)
	require.NoError(t, err)
	require.Equal(t, ids(first), s.ids(), "the relay went past a hole of a transaction still open")

	require.NoError(t, slow.Commit())
	_, err = r.Round(ctx)
	require.NoError(t, err)
	require.Equal(t, append(append(ids(first), ids(late)...), ids(later)...), s.ids(), "not every event, or not in outbox order")
}

// A hole that never fills (a rolled-back transaction) holds the relay for
// GapWait only.
func TestRelayPassesAnOldHole(t *testing.T) {
	s := &fakeSink{name: "fake"}
	clock := newFakeClock()
	r, _ := newTestRelay(t, openDB(t), s, func(c *RelayConfig) { c.GapWait = 10 * time.Second; c.Now = clock.Now })
	db, ctx := r.db, context.Background()
	tx, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	require.NoError(t, Enqueue(ctx, tx, someEvents(1)...))
	require.NoError(t, tx.Rollback())
	after := someEvents(2)
	enqueueCommitted(t, db, after...)
	clock.mu.Lock()
	clock.now = time.Now().UTC().Add(5 * time.Second) // written about 5 s ago
	clock.mu.Unlock()
	_, err = r.Round(ctx)
	require.NoError(t, err)
	require.Empty(t, s.ids(), "the relay went past a young hole")
	clock.Add(6 * time.Second)
	_, err = r.Round(ctx)
	require.NoError(t, err)
	require.Equal(t, ids(after), s.ids())
}

// Retries are bounded and visible: a sink that is down is retried without
// dropping anything (failed rounds counted, the error on the position);
// an event the sink refuses is dropped after MaxAttempts rounds and the
// events behind it go on.
func TestRelayRetriesOutagesAndDropsRefusedEvents(t *testing.T) {
	s := &fakeSink{name: "fake", down: true}
	r, m := newTestRelay(t, openDB(t), s, func(c *RelayConfig) { c.MaxAttempts = 3 })
	ctx := context.Background()
	es := someEvents(4)
	enqueueCommitted(t, r.db, es...)
	for range 5 {
		_, err := r.Round(ctx)
		require.NoError(t, err)
	}
	require.Equal(t, 5.0, sinkCount(m, "fake", resultFailed))
	var attempts int
	var lastErr string
	require.NoError(t, r.db.QueryRow(`SELECT attempts, last_error FROM event_sink_position WHERE sink = 'fake'`).Scan(&attempts, &lastErr))
	require.Equal(t, 5, attempts)
	require.Contains(t, lastErr, "connection refused")

	s.mu.Lock()
	s.down, s.refuse = false, es[1].ID
	s.mu.Unlock()
	for range 3 { // the first takes es[0]; es[1] is refused in each
		_, err := r.Round(ctx)
		require.NoError(t, err)
	}
	require.Equal(t, []string{es[0].ID}, s.ids())
	_, err := r.Round(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{es[0].ID, es[2].ID, es[3].ID}, s.ids(), "the refused event was not dropped after 3 rounds, or others lost")
	require.Equal(t, 1.0, sinkCount(m, "fake", resultDropped))
	require.Equal(t, 3.0, sinkCount(m, "fake", resultDelivered))
	var dropped int
	require.NoError(t, r.db.QueryRow(`SELECT dropped FROM event_sink_position WHERE sink = 'fake'`).Scan(&dropped))
	require.Equal(t, 1, dropped)
}

// One relay at a time sends to a sink: a second one (another cdc) waits
// while the first holds the lease, and takes over from the saved position
// once the first hands it back.
func TestRelayLeaseOneSenderPerSink(t *testing.T) {
	s1, s2 := &fakeSink{name: "shared"}, &fakeSink{name: "shared"}
	db := openDB(t)
	r1, _ := newTestRelay(t, db, s1, nil)
	r2, _ := newTestRelay(t, db, s2, nil)
	ctx := context.Background()
	a, b := someEvents(2), someEvents(3)
	enqueueCommitted(t, r1.db, a...)
	_, err := r1.Round(ctx)
	require.NoError(t, err)
	enqueueCommitted(t, r1.db, b...)
	_, err = r2.Round(ctx)
	require.NoError(t, err)
	require.Empty(t, s2.ids(), "a second relay sent while the first held the sink")
	r1.handBack(ctx)
	_, err = r2.Round(ctx)
	require.NoError(t, err)
	require.Equal(t, ids(a), s1.ids())
	require.Equal(t, ids(b), s2.ids(), "the relay that took over did not go on from the saved position")
}

// The backlog is bounded: beyond MaxPending the oldest events are dropped
// (counted), the position moved past them.
func TestRelayBoundsTheBacklog(t *testing.T) {
	s := &fakeSink{name: "fake", down: true}
	r, m := newTestRelay(t, openDB(t), s, func(c *RelayConfig) { c.MaxPending = 3 })
	ctx := context.Background()
	es := someEvents(5)
	enqueueCommitted(t, r.db, es...)
	_, err := r.Round(ctx) // takes the lease
	require.NoError(t, err)
	require.NoError(t, r.housekeep(ctx))
	require.Equal(t, 2.0, sinkCount(m, "fake", resultDropped))
	require.Equal(t, 3.0, testutil.ToFloat64(m.pending.WithLabelValues("fake")))
	s.mu.Lock()
	s.down = false
	s.mu.Unlock()
	_, err = r.Round(ctx)
	require.NoError(t, err)
	require.Equal(t, ids(es[2:]), s.ids())
}
