package webhook

import (
	"context"
	"database/sql"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/internal/testenv"
)

var testSecret = []byte("s3cret-for-tests")

// fakeClock is the dispatcher's clock in tests; it moves only when told.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

// newFakeClock starts a minute ahead of the wall clock, so events enqueued
// during the test (stamped with the wall clock) are due at once.
func newFakeClock() *fakeClock { return &fakeClock{now: time.Now().UTC().Add(time.Minute)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// request is what a receiver saw of one POST.
type request struct {
	Header http.Header
	Body   []byte
}

// receiver is an httptest server that records every request and answers
// with the status its answer func picks (200 when nil).
type receiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	reqs   []request
	answer func(n int, r request) int // n: requests so far, this one included
}

func newReceiver(t *testing.T, answer func(n int, r request) int) *receiver {
	t.Helper()
	rc := &receiver{answer: answer}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		req := request{Header: r.Header.Clone(), Body: body}
		rc.mu.Lock()
		rc.reqs = append(rc.reqs, req)
		n := len(rc.reqs)
		answer := rc.answer
		rc.mu.Unlock()
		status := http.StatusOK
		if answer != nil {
			status = answer(n, req)
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) setAnswer(answer func(n int, r request) int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.answer = answer
}

func (rc *receiver) requests() []request {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]request(nil), rc.reqs...)
}

// idCounts counts the requests per event id header.
func (rc *receiver) idCounts() map[string]int {
	out := map[string]int{}
	for _, r := range rc.requests() {
		out[r.Header.Get(HeaderEventID)]++
	}
	return out
}

func always(status int) func(int, request) int {
	return func(int, request) int { return status }
}

func testLogger() *slog.Logger {
	if os.Getenv("WEBHOOK_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// newTestDispatcher builds a dispatcher on db for url with the test secret,
// its own registry and the given clock; edit changes the config first.
func newTestDispatcher(t *testing.T, db *sql.DB, url string, clock *fakeClock, edit func(*Config)) *Dispatcher {
	t.Helper()
	cfg := Config{DB: db, URL: url, Secret: testSecret, Logger: testLogger(), Registerer: prometheus.NewRegistry()}
	if clock != nil {
		cfg.Now = clock.Now
	}
	if edit != nil {
		edit(&cfg)
	}
	d, err := New(cfg)
	require.NoError(t, err)
	return d
}

// enqueueCommitted writes events in a transaction and commits it.
func enqueueCommitted(t *testing.T, db *sql.DB, events ...Event) {
	t.Helper()
	tx, err := db.BeginTx(context.Background(), nil)
	require.NoError(t, err)
	require.NoError(t, Enqueue(context.Background(), tx, events...))
	require.NoError(t, tx.Commit())
}

// someEvents returns n events with fresh ids, alternating types.
func someEvents(n int) []Event {
	out := make([]Event, n)
	for i := range out {
		out[i] = Event{ID: NewID(), Type: Types[i%len(Types)], Template: int64(100 + i), Channel: "app",
			Data: map[string]int{"seq": i}}
	}
	return out
}

func openDB(t *testing.T) *sql.DB {
	t.Helper()
	db, _ := testenv.MySQL(t)
	return db
}

// deliveries is couponlink_webhook_deliveries_total{event,result}.
func deliveries(d *Dispatcher, event, result string) float64 {
	return testutil.ToFloat64(d.m.deliveries.WithLabelValues(event, result))
}

// deliveriesAll sums couponlink_webhook_deliveries_total over events.
func deliveriesAll(d *Dispatcher, result string) float64 {
	var sum float64
	for _, e := range Types {
		sum += deliveries(d, e, result)
	}
	return sum
}

// statusCounts counts the outbox rows by status.
func statusCounts(t *testing.T, db *sql.DB) map[string]int {
	t.Helper()
	return testenv.CountsBy[string](t, db, `SELECT status, COUNT(*) FROM webhook_outbox GROUP BY status`)
}
