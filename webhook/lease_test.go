package webhook

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/internal/testenv"
)

// holdingReceiver holds every request while hold is set (until the test
// lets go or the sender gives up) and answers 200 otherwise; it counts the
// requests per event id, and the 200s.
type holdingReceiver struct {
	srv      *httptest.Server
	hold     atomic.Bool
	letGo    chan struct{}
	held     atomic.Int32
	mu       sync.Mutex
	requests map[string]int
	answered map[string]int
}

func newHoldingReceiver(t *testing.T) *holdingReceiver {
	rc := &holdingReceiver{letGo: make(chan struct{}), requests: map[string]int{}, answered: map[string]int{}}
	rc.hold.Store(true)
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // then the server notices a sender that goes away
		id := r.Header.Get(HeaderEventID)
		rc.mu.Lock()
		rc.requests[id]++
		rc.mu.Unlock()
		if rc.hold.Load() {
			rc.held.Add(1)
			select {
			case <-r.Context().Done(): // the sender went away: not delivered
				return
			case <-rc.letGo:
			}
		}
		rc.mu.Lock()
		rc.answered[id]++
		rc.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *holdingReceiver) counts() (requests, answered map[string]int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	requests, answered = map[string]int{}, map[string]int{}
	for k, v := range rc.requests {
		requests[k] = v
	}
	for k, v := range rc.answered {
		answered[k] = v
	}
	return requests, answered
}

// startRound runs one Deliver of d in the background.
func startRound(ctx context.Context, d *Dispatcher) chan error {
	done := make(chan error, 1)
	go func() {
		_, err := d.Deliver(ctx)
		done <- err
	}()
	return done
}

// A dispatcher that dies in the middle of a round (a receiver that hangs):
// another one delivers its events within the lease (default 10 s), each
// once, instead of after the old 226 s.
func TestEventsOfADeadDispatcherGoOutWithinTheLease(t *testing.T) {
	db, dsn := testenv.MySQL(t)
	rc := newHoldingReceiver(t)
	events := someEvents(5)
	enqueueCommitted(t, db, events...)

	// A has a pool of its own: closing it is A dying — it can no longer
	// renew, record or release anything
	poolA, err := sql.Open("mysql", dsn)
	require.NoError(t, err)
	a := newTestDispatcher(t, poolA, rc.srv.URL, nil, func(c *Config) { c.Retries = -1; c.Timeout = time.Hour })
	require.Equal(t, 10*time.Second, a.cfg.Lease)
	ctxA, killA := context.WithCancel(context.Background())
	doneA := startRound(ctxA, a)
	require.Eventually(t, func() bool { return rc.held.Load() == 5 }, 10*time.Second, 10*time.Millisecond,
		"A's round did not send the five events")
	require.NoError(t, poolA.Close())
	killA()
	<-doneA
	rc.hold.Store(false)
	died := time.Now()

	b := newTestDispatcher(t, db, rc.srv.URL, nil, func(c *Config) { c.PollEvery = 20 * time.Millisecond })
	ctxB, stopB := context.WithCancel(context.Background())
	defer stopB()
	doneB := make(chan error, 1)
	go func() { doneB <- b.Run(ctxB) }()
	require.Eventually(t, func() bool { _, answered := rc.counts(); return len(answered) == 5 },
		30*time.Second, 10*time.Millisecond, "B did not deliver A's events")
	took := time.Since(died)
	t.Logf("the dead dispatcher's events were delivered %s after it died (lease %s)", took.Round(time.Millisecond), a.cfg.Lease)
	assert.Less(t, took, a.cfg.Lease+5*time.Second)
	// the receiver answers before B records the delivery: stopping B in
	// between hands the event back (sent again later, same id) — wait
	require.Eventually(t, func() bool { return statusCounts(t, db)[statusDelivered] == 5 },
		30*time.Second, 10*time.Millisecond, "B did not record the deliveries")
	stopB()
	require.NoError(t, <-doneB)

	_, answered := rc.counts()
	for _, e := range events {
		assert.Equal(t, 1, answered[e.ID], "event %s delivered", e.ID)
	}
	assert.Equal(t, map[string]int{statusDelivered: 5}, statusCounts(t, db))
	assert.Equal(t, 5.0, deliveriesAll(b, resultDelivered))
}

// A round longer than its lease keeps renewing it: a second dispatcher,
// polling all along, never sends those events while the first still is.
func TestLeaseRenewedWhileARoundRuns(t *testing.T) {
	db := openDB(t)
	rc := newHoldingReceiver(t)
	enqueueCommitted(t, db, someEvents(3)...)
	const lease = 600 * time.Millisecond
	short := func(c *Config) {
		c.Lease = lease
		c.PollEvery = 20 * time.Millisecond
		c.Retries = -1
		c.Timeout = time.Hour
	}
	a := newTestDispatcher(t, db, rc.srv.URL, nil, short)
	doneA := startRound(context.Background(), a)
	require.Eventually(t, func() bool { return rc.held.Load() == 3 }, 10*time.Second, 10*time.Millisecond)
	var first time.Time
	require.NoError(t, db.QueryRow(`SELECT MAX(next_attempt_at) FROM webhook_outbox`).Scan(&first))

	b := newTestDispatcher(t, db, rc.srv.URL, nil, short)
	ctxB, stopB := context.WithCancel(context.Background())
	doneB := make(chan error, 1)
	go func() { doneB <- b.Run(ctxB) }()
	// wait until the lease was renewed past three of its lengths while B polled
	require.Eventually(t, func() bool {
		var oldest time.Time
		err := db.QueryRow(`SELECT MIN(next_attempt_at) FROM webhook_outbox`).Scan(&oldest)
		return err == nil && oldest.After(first.Add(3*lease))
	}, 30*time.Second, 10*time.Millisecond, "the lease was not renewed")
	requests, _ := rc.counts()
	for id, n := range requests {
		assert.Equal(t, 1, n, "event %s sent by two dispatchers at once", id)
	}
	close(rc.letGo)
	require.NoError(t, <-doneA)
	require.Eventually(t, func() bool { return statusCounts(t, db)[statusDelivered] == 3 }, 10*time.Second, 10*time.Millisecond)
	stopB()
	require.NoError(t, <-doneB)
	requests, answered := rc.counts()
	assert.Len(t, answered, 3)
	for id, n := range requests {
		assert.Equal(t, 1, n, "event %s sent twice", id)
	}
	assert.Equal(t, 3.0, deliveriesAll(a, resultDelivered))
	assert.Equal(t, 0.0, deliveriesAll(b, resultDelivered))
}

// A dispatcher that stops (its ctx ends, as on SIGTERM) in the middle of a
// round hands its unsent events back at once: another one sends them
// without waiting for the lease.
func TestStoppedDispatcherReleasesItsRound(t *testing.T) {
	db := openDB(t)
	rc := newHoldingReceiver(t)
	enqueueCommitted(t, db, someEvents(4)...)
	long := func(c *Config) {
		c.Lease = time.Hour
		c.PollEvery = 20 * time.Millisecond
		c.Retries = -1
		c.Timeout = time.Hour
	}
	a := newTestDispatcher(t, db, rc.srv.URL, nil, long)
	ctxA, stopA := context.WithCancel(context.Background())
	doneA := startRound(ctxA, a)
	require.Eventually(t, func() bool { return rc.held.Load() == 4 }, 10*time.Second, 10*time.Millisecond)
	stopA()
	require.NoError(t, <-doneA)
	rc.hold.Store(false)

	b := newTestDispatcher(t, db, rc.srv.URL, nil, long)
	n, err := b.Deliver(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 4, n, "the stopped dispatcher's events were not released")
	assert.Equal(t, map[string]int{statusDelivered: 4}, statusCounts(t, db))
	assert.Equal(t, 0.0, deliveriesAll(a, resultFailed), "a stopped round is not the receiver's failure")
}

// A renewal whose UPDATE the server applies after the round stopped
// waiting for its answer (here: it waits on a row lock the test holds past
// the renewal's deadline) leaves the rows carrying a token the round did
// not hear back: the next renewal and the failed send's record still find
// them, so the round keeps its rows instead of losing its lease to itself.
func TestRenewalWhoseAnswerIsLost(t *testing.T) {
	db := openDB(t)
	ctx := context.Background()
	enqueueCommitted(t, db, someEvents(3)...)
	d := newTestDispatcher(t, db, "http://127.0.0.1:1", newFakeClock(), nil)
	rows, l, err := d.claim(ctx, 0)
	require.NoError(t, err)
	require.Len(t, rows, 3)
	claimed := l.latest()

	blocker, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer blocker.Rollback()
	var id int64
	require.NoError(t, blocker.QueryRow(`SELECT id FROM webhook_outbox WHERE id = ? FOR UPDATE`, rows[0].id).Scan(&id))
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err = l.renew(short)
	cancel()
	require.Error(t, err, "the renewal waits on the lock past its deadline")
	require.NotErrorIs(t, err, errLeaseLost)
	require.NoError(t, blocker.Commit()) // the waiting UPDATE is applied now, unanswered
	require.Eventually(t, func() bool {
		var n int
		err := db.QueryRow(`SELECT COUNT(*) FROM webhook_outbox WHERE next_attempt_at > ?`, claimed).Scan(&n)
		return err == nil && n == 3
	}, 10*time.Second, 10*time.Millisecond, "the lost renewal was not applied")

	require.NoError(t, l.renew(ctx), "the round still holds its rows")
	var held int
	require.NoError(t, db.QueryRow(`SELECT COUNT(*) FROM webhook_outbox WHERE next_attempt_at = ?`, l.latest()).Scan(&held))
	assert.Equal(t, 3, held)
	require.NoError(t, d.record(ctx, rows[1], errors.New("receiver answered 500"), l))
	var attempts int
	require.NoError(t, db.QueryRow(`SELECT attempts FROM webhook_outbox WHERE id = ?`, rows[1].id).Scan(&attempts))
	assert.Equal(t, 1, attempts, "the failed send is recorded on its row")
}
