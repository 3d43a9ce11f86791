package webhook

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// mustRound runs one round of r.
func mustRound(t *testing.T, r *Relay) {
	t.Helper()
	_, err := r.Round(context.Background())
	require.NoError(t, err)
}

// epochOf is a leader epoch a test sets (0: a standby).
func epochOf(e int64) *atomic.Int64 {
	var v atomic.Int64
	v.Store(e)
	return &v
}

// A relay's lease follows leadership: a standby sends nothing, a relay of
// a higher epoch takes the sink at once (the lease has not run out), and
// the former holder's position write is refused.
func TestRelayLeaseFollowsTheLeaderEpoch(t *testing.T) {
	old, standby, next := &fakeSink{name: "led"}, &fakeSink{name: "led"}, &fakeSink{name: "led"}
	db := openDB(t)
	e1, e0, e2 := epochOf(1), epochOf(0), epochOf(2)
	r1, _ := newTestRelay(t, db, old, func(c *RelayConfig) { c.Epoch = e1.Load })
	r0, _ := newTestRelay(t, db, standby, func(c *RelayConfig) { c.Epoch = e0.Load })
	r2, _ := newTestRelay(t, db, next, func(c *RelayConfig) { c.Epoch = e2.Load })
	ctx := context.Background()
	a, b := someEvents(2), someEvents(3)
	enqueueCommitted(t, db, a...)
	mustRound(t, r0)
	require.Empty(t, standby.ids(), "a standby delivered")
	mustRound(t, r1)
	require.Equal(t, ids(a), old.ids())

	// the old leader is mid-round (its lease read) when the new one leads
	pos, held, err := r1.acquire(ctx, r1.now())
	require.NoError(t, err)
	require.True(t, held)
	enqueueCommitted(t, db, b...)
	mustRound(t, r2)
	require.Equal(t, ids(b), next.ids(), "the leader of a higher epoch did not take the sink at once")
	require.NoError(t, r1.save(ctx, pos.lastID, update{lastID: pos.lastID + 1, epoch: pos.epoch}))
	var last int64
	require.NoError(t, db.QueryRow(`SELECT last_id FROM event_sink_position WHERE sink = 'led'`).Scan(&last))
	require.Equal(t, pos.lastID+int64(len(b))*pos.step, last, "the former holder's late write was not refused")
	_, held, err = r1.acquire(ctx, r1.now())
	require.NoError(t, err)
	require.False(t, held, "a deposed leader took the lease back")
}

// A dispatcher's round leases follow leadership: the rows a former
// leader's round claimed (it died mid-round) go out at once under a higher
// epoch, and the former round's records are refused.
func TestDispatcherLeaseFollowsTheLeaderEpoch(t *testing.T) {
	db := openDB(t)
	rc := newReceiver(t, always(http.StatusOK))
	e1, e0, e2 := epochOf(1), epochOf(0), epochOf(2)
	d1 := newTestDispatcher(t, db, rc.srv.URL, nil, func(c *Config) { c.Epoch = e1.Load })
	d0 := newTestDispatcher(t, db, rc.srv.URL, nil, func(c *Config) { c.Epoch = e0.Load })
	d2 := newTestDispatcher(t, db, rc.srv.URL, nil, func(c *Config) { c.Epoch = e2.Load })
	ctx := context.Background()
	events := someEvents(3)
	enqueueCommitted(t, db, events...)
	n, err := d0.Deliver(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "a standby delivered")
	rows, l, err := d1.claim(ctx, 1) // the old leader's round, never finished
	require.NoError(t, err)
	require.Len(t, rows, len(events))
	n, err = d2.Deliver(ctx)
	require.NoError(t, err)
	require.Equal(t, len(events), n, "the leader of a higher epoch waited for the old round's lease")
	require.ErrorIs(t, l.renew(ctx), errLeaseLost, "the former round renewed rows a higher epoch took")
	require.NoError(t, d1.record(ctx, rows[0], errors.New("connection refused"), l))
	n, err = d1.markDelivered(ctx, rows, l)
	require.NoError(t, err)
	require.Zero(t, n, "the former round marked rows a higher epoch took")
	require.Equal(t, map[string]int{statusDelivered: len(events)}, statusCounts(t, db))
	var attempts int
	require.NoError(t, db.QueryRow(`SELECT attempts FROM webhook_outbox WHERE id = ?`, rows[0].id).Scan(&attempts))
	require.Zero(t, attempts, "the former round's late record was not refused")
	require.Len(t, rc.requests(), len(events))
}

// Under a leader epoch, a hole no transaction holds (a killed leader's
// rolled-back batch) holds the relay quickGap, not GapWait; a hole of a
// transaction still open holds it until that one ends.
func TestRelayPassesARolledBackHoleQuicklyUnderAnEpoch(t *testing.T) {
	s := &fakeSink{name: "fake"}
	clock := newFakeClock() // the rows look a minute old: past quickGap
	r, _ := newTestRelay(t, openDB(t), s, func(c *RelayConfig) {
		c.GapWait, c.Now, c.Epoch = time.Hour, clock.Now, epochOf(1).Load
	})
	db, ctx := r.db, context.Background()
	open, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	require.NoError(t, Enqueue(ctx, open, someEvents(1)...))
	after := someEvents(2)
	enqueueCommitted(t, db, after...)
	mustRound(t, r)
	require.Empty(t, s.ids(), "the relay went past a hole of a transaction still open")
	require.NoError(t, open.Rollback())
	mustRound(t, r)
	require.Equal(t, ids(after), s.ids(), "a rolled-back hole held the relay")
}

// The epochs of different checkpoints (the cdcs of several sources on one
// outbox) are not compared: a higher epoch of another checkpoint does not
// take a sink at once, and a lower one takes it once the lease is handed
// back (or runs out).
func TestRelayLeaseEpochsOfOtherCheckpointsAreNotCompared(t *testing.T) {
	sa, sb := &fakeSink{name: "shared"}, &fakeSink{name: "shared"}
	db := openDB(t)
	ra, _ := newTestRelay(t, db, sa, func(c *RelayConfig) { c.Epoch, c.Checkpoint = epochOf(2).Load, "a" })
	rb, _ := newTestRelay(t, db, sb, func(c *RelayConfig) { c.Epoch, c.Checkpoint = epochOf(5).Load, "b" })
	ctx := context.Background()
	a, b := someEvents(2), someEvents(3)
	enqueueCommitted(t, db, a...)
	mustRound(t, ra)
	enqueueCommitted(t, db, b...)
	mustRound(t, rb)
	require.Empty(t, sb.ids(), "a higher epoch of another checkpoint took the sink at once")
	ra.handBack(ctx)
	mustRound(t, rb)
	require.Equal(t, ids(b), sb.ids())
	mustRound(t, ra)
	require.Equal(t, ids(a), sa.ids(), "the other checkpoint's relay took the sink back while it was held")
}
