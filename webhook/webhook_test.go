package webhook

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/client"
)

func TestSignatureVerifies(t *testing.T) {
	db := openDB(t)
	clock := newFakeClock()
	rc := newReceiver(t, nil)
	d := newTestDispatcher(t, db, rc.srv.URL, clock, nil)
	at := time.Date(2026, 11, 29, 10, 30, 0, 123456000, time.UTC)
	enqueueCommitted(t, db, Event{Type: QuotaTransferred, Time: at, Template: 42, Channel: "wechat",
		Data: map[string]int64{"moved": 7, "from_quota": 100, "to_quota": 50}})

	n, err := d.Deliver(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, n)
	reqs := rc.requests()
	require.Len(t, reqs, 1)
	r := reqs[0]

	// the receiver recomputes the HMAC over the raw body
	sig := r.Header.Get(HeaderSignature)
	assert.Regexp(t, `^t=[0-9]+,v1=[0-9a-f]{64}$`, sig)
	assert.True(t, Verify(testSecret, r.Body, sig))
	assert.False(t, Verify([]byte("wrong secret"), r.Body, sig))
	flipped := append([]byte(nil), r.Body...)
	flipped[len(flipped)/2] ^= 0x01
	assert.False(t, Verify(testSecret, flipped, sig))
	assert.False(t, Verify(testSecret, r.Body, "sha256=not-hex"))
	assert.Empty(t, r.Header.Get(HeaderBodySignature), "the old signature only with LegacySignature")

	assert.Equal(t, "application/json", r.Header.Get("Content-Type"))
	assert.Equal(t, "couponlink-webhook", r.Header.Get("User-Agent"))
	assert.Equal(t, QuotaTransferred, r.Header.Get(HeaderEvent))

	var body map[string]any
	require.NoError(t, json.Unmarshal(r.Body, &body))
	for _, k := range []string{"id", "type", "time", "template", "channel", "data"} {
		assert.Contains(t, body, k)
	}
	assert.Regexp(t, `^[0-9a-f]{32}$`, body["id"])
	assert.Equal(t, r.Header.Get(HeaderEventID), body["id"])
	assert.Equal(t, QuotaTransferred, body["type"])
	assert.Equal(t, "2026-11-29T10:30:00.123456Z", body["time"])
	assert.Equal(t, float64(42), body["template"])
	assert.Equal(t, "wechat", body["channel"])
	assert.Equal(t, map[string]any{"moved": float64(7), "from_quota": float64(100), "to_quota": float64(50)}, body["data"])

	// the stored bytes are the bytes sent
	var stored []byte
	require.NoError(t, db.QueryRow(`SELECT body FROM webhook_outbox WHERE event_id = ?`, body["id"]).Scan(&stored))
	assert.Equal(t, stored, r.Body)
}

func TestSignKnownVector(t *testing.T) {
	// RFC 4231 test case 2 (the old body-only signature)
	got := Sign([]byte("Jefe"), []byte("what do ya want for nothing?"))
	assert.Equal(t, "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843", got)
}

func TestEnqueueOnlyWithTheTransaction(t *testing.T) {
	db := openDB(t)
	clock := newFakeClock()
	rc := newReceiver(t, nil)
	d := newTestDispatcher(t, db, rc.srv.URL, clock, nil)
	ctx := context.Background()

	rolledBack := someEvents(3)
	tx, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	require.NoError(t, Enqueue(ctx, tx, rolledBack...))
	require.NoError(t, tx.Rollback())

	committed := someEvents(2)
	enqueueCommitted(t, db, committed...)

	n, err := d.Deliver(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	clock.Add(time.Hour)
	n, err = d.Deliver(ctx)
	require.NoError(t, err)
	assert.Equal(t, 0, n)

	got := rc.idCounts()
	assert.Equal(t, map[string]int{committed[0].ID: 1, committed[1].ID: 1}, got)
	for _, e := range rolledBack {
		assert.NotContains(t, got, e.ID)
	}
	assert.Equal(t, map[string]int{statusDelivered: 2}, statusCounts(t, db))
}

func TestEnqueueFillsAndValidates(t *testing.T) {
	db := openDB(t)
	ctx := context.Background()

	// no events: no-op, the tx is not even touched
	require.NoError(t, Enqueue(ctx, nil))

	events := []Event{{Type: AnomalyDetected, Data: map[string]string{"kind": "over_issue"}}}
	before := time.Now().UTC()
	enqueueCommitted(t, db, events...)
	assert.Empty(t, events[0].ID, "the caller's event is not modified")

	var body []byte
	var tpl, channel any
	require.NoError(t, db.QueryRow(`SELECT body, template_id, channel FROM webhook_outbox`).Scan(&body, &tpl, &channel))
	assert.Nil(t, tpl)
	assert.Nil(t, channel)
	var e struct {
		ID   string    `json:"id"`
		Time time.Time `json:"time"`
	}
	require.NoError(t, json.Unmarshal(body, &e))
	assert.Regexp(t, `^[0-9a-f]{32}$`, e.ID)
	assert.False(t, e.Time.Before(before.Truncate(time.Microsecond)), "time %s filled from the clock", e.Time)
	assert.Equal(t, time.UTC, e.Time.Location())

	for name, bad := range map[string]Event{
		"unknown type": {Type: "quota.nope"},
		"short id":     {ID: "abc", Type: QuotaReleased},
		"non-hex id":   {ID: strings.Repeat("z", 32), Type: QuotaReleased},
		"long channel": {Type: QuotaReleased, Channel: strings.Repeat("c", 65)},
	} {
		tx, err := db.BeginTx(ctx, nil)
		require.NoError(t, err)
		assert.Error(t, Enqueue(ctx, tx, bad), name)
		require.NoError(t, tx.Rollback())
	}
	assert.Equal(t, map[string]int{statusPending: 1}, statusCounts(t, db))
}

func TestRetriesOn500(t *testing.T) {
	db := openDB(t)
	clock := newFakeClock()
	rc := newReceiver(t, func(n int, _ request) int {
		if n <= 2 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	d := newTestDispatcher(t, db, rc.srv.URL, clock, nil) // Retries: default 2
	ev := Event{ID: NewID(), Type: ChannelSoldOut, Template: 7, Channel: "douyin", Data: map[string]int{"quota": 10}}
	enqueueCommitted(t, db, ev)

	n, err := d.Deliver(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 1, n)

	reqs := rc.requests()
	require.Len(t, reqs, 3)
	for _, r := range reqs {
		assert.Equal(t, ev.ID, r.Header.Get(HeaderEventID))
		assert.Equal(t, reqs[0].Body, r.Body)
		assert.True(t, Verify(testSecret, r.Body, r.Header.Get(HeaderSignature)))
	}
	assert.Equal(t, 1.0, deliveries(d, ChannelSoldOut, resultDelivered))
	assert.Equal(t, 0.0, deliveriesAll(d, resultFailed))
	assert.Equal(t, map[string]int{statusDelivered: 1}, statusCounts(t, db))
}

func TestRetryAfterDoesNotStallARound(t *testing.T) {
	db := openDB(t)
	clock := newFakeClock()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.Header().Set("Retry-After", "3600")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	d := newTestDispatcher(t, db, srv.URL, clock, nil)
	enqueueCommitted(t, db, Event{Type: QuotaReleased, Data: map[string]int{"released": 2}})

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n, err := d.Deliver(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "the quick retry waits at most RetryWaitMax, not the hour the receiver asked for")
	assert.Equal(t, int32(2), calls.Load())
}

func TestReceiverDownThenBack(t *testing.T) {
	db := openDB(t)
	clock := newFakeClock()
	rc := newReceiver(t, always(http.StatusServiceUnavailable))
	d := newTestDispatcher(t, db, rc.srv.URL, clock, func(c *Config) { c.Retries = -1 })
	ctx := context.Background()
	events := someEvents(50)
	enqueueCommitted(t, db, events...)

	const downRounds = 4
	for round := 1; round <= downRounds; round++ {
		n, err := d.Deliver(ctx)
		require.NoError(t, err)
		assert.Equal(t, 0, n)
		assert.Len(t, rc.requests(), 50*round, "round %d sends every due event", round)

		// the backoff holds them back until the clock passes it
		n, err = d.Deliver(ctx)
		require.NoError(t, err)
		assert.Equal(t, 0, n)
		assert.Len(t, rc.requests(), 50*round, "round %d: nothing is due again before the backoff", round)
		clock.Add(d.backoff(round) + time.Millisecond)
	}
	var attempts int
	require.NoError(t, db.QueryRow(`SELECT MIN(attempts) FROM webhook_outbox`).Scan(&attempts))
	assert.Equal(t, downRounds, attempts)

	rc.setAnswer(always(http.StatusOK))
	total := 0
	for range 3 {
		n, err := d.Deliver(ctx)
		require.NoError(t, err)
		total += n
	}
	assert.Equal(t, 50, total)

	counts := rc.idCounts()
	assert.Len(t, counts, 50)
	for _, e := range events {
		assert.Equal(t, downRounds+1, counts[e.ID], "event %s", e.ID)
	}
	assert.Equal(t, map[string]int{statusDelivered: 50}, statusCounts(t, db))
	assert.Equal(t, 50.0*downRounds, deliveriesAll(d, resultFailed))
	assert.Equal(t, 50.0, deliveriesAll(d, resultDelivered))
	assert.Equal(t, 0.0, deliveriesAll(d, resultDropped))
}

func TestConnectionRefusedIsAFailedRound(t *testing.T) {
	db := openDB(t)
	clock := newFakeClock()
	rc := newReceiver(t, nil)
	url := rc.srv.URL
	rc.srv.Close() // nothing listens there any more
	d := newTestDispatcher(t, db, url, clock, func(c *Config) { c.Retries = -1 })
	enqueueCommitted(t, db, Event{Type: QuotaReleased, Data: map[string]int{"released": 1}})

	n, err := d.Deliver(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 0, n)
	var attempts int
	var lastErr string
	var next time.Time
	require.NoError(t, db.QueryRow(`SELECT attempts, last_error, next_attempt_at FROM webhook_outbox`).
		Scan(&attempts, &lastErr, &next))
	assert.Equal(t, 1, attempts)
	assert.Contains(t, lastErr, "refused")
	assert.WithinDuration(t, clock.Now().Add(time.Second), next, time.Millisecond)
	assert.Equal(t, 1.0, deliveries(d, QuotaReleased, resultFailed))
}

func TestDroppedAfterMaxAttempts(t *testing.T) {
	db := openDB(t)
	clock := newFakeClock()
	rc := newReceiver(t, always(http.StatusInternalServerError))
	d := newTestDispatcher(t, db, rc.srv.URL, clock, func(c *Config) { c.MaxAttempts = 3 })
	ctx := context.Background()
	ev := Event{ID: NewID(), Type: QuotaRecommendation, Template: 9, Data: map[string]int{"move": 3}}
	enqueueCommitted(t, db, ev)

	for round := 1; round <= 3; round++ {
		n, err := d.Deliver(ctx)
		require.NoError(t, err)
		assert.Equal(t, 0, n)
		clock.Add(time.Hour)
	}
	var status, lastErr string
	var attempts int
	require.NoError(t, db.QueryRow(`SELECT status, attempts, last_error FROM webhook_outbox WHERE event_id = ?`, ev.ID).
		Scan(&status, &attempts, &lastErr))
	assert.Equal(t, statusDropped, status)
	assert.Equal(t, 3, attempts)
	assert.Contains(t, lastErr, "500")
	assert.Equal(t, 1.0, deliveries(d, QuotaRecommendation, resultDropped))
	assert.Equal(t, 2.0, deliveries(d, QuotaRecommendation, resultFailed))
	sent := len(rc.requests())
	assert.Equal(t, 3*3, sent, "3 rounds of 1 request + 2 quick retries")

	// never sent again
	clock.Add(24 * time.Hour)
	n, err := d.Deliver(ctx)
	require.NoError(t, err)
	assert.Equal(t, 0, n)
	assert.Len(t, rc.requests(), sent)
}

func TestOverflowDropsOldest(t *testing.T) {
	db := openDB(t)
	clock := newFakeClock()
	rc := newReceiver(t, nil)
	d := newTestDispatcher(t, db, rc.srv.URL, clock, func(c *Config) { c.MaxPending = 10 })
	ctx := context.Background()
	events := someEvents(15)
	for _, e := range events {
		enqueueCommitted(t, db, e) // one by one: ids in order
	}

	require.NoError(t, d.housekeep(ctx))

	rows, err := db.Query(`SELECT event_id, status FROM webhook_outbox ORDER BY id`)
	require.NoError(t, err)
	defer rows.Close()
	var got []string
	for rows.Next() {
		var id, status string
		require.NoError(t, rows.Scan(&id, &status))
		got = append(got, id+" "+status)
	}
	require.NoError(t, rows.Err())
	var want []string
	wantDropped := map[string]float64{}
	for i, e := range events {
		status := statusPending
		if i < 5 {
			status = statusDropped
			wantDropped[e.Type]++
		}
		want = append(want, e.ID+" "+status)
	}
	assert.Equal(t, want, got)
	assert.Equal(t, 5.0, deliveriesAll(d, resultDropped))
	for _, e := range Types {
		assert.Equal(t, wantDropped[e], deliveries(d, e, resultDropped), e)
	}
	assert.Equal(t, 10.0, testutil.ToFloat64(d.m.pending))

	// a second pass (another replica) drops nothing more
	require.NoError(t, d.housekeep(ctx))
	assert.Equal(t, map[string]int{statusDropped: 5, statusPending: 10}, statusCounts(t, db))
	assert.Equal(t, 5.0, deliveriesAll(d, resultDropped))

	// the dropped ones are never sent
	n, err := d.Deliver(ctx)
	require.NoError(t, err)
	assert.Equal(t, 10, n)
	for _, e := range events[:5] {
		assert.NotContains(t, rc.idCounts(), e.ID)
	}
}

func TestTwoDispatchersDeliverOnce(t *testing.T) {
	db := openDB(t)
	rc := newReceiver(t, nil)
	small := func(c *Config) { c.BatchSize = 10 }
	d1 := newTestDispatcher(t, db, rc.srv.URL, nil, small)
	d2 := newTestDispatcher(t, db, rc.srv.URL, nil, small)
	ctx := context.Background()
	events := someEvents(200)
	enqueueCommitted(t, db, events...)

	pending := func() int {
		var n int
		if err := db.QueryRow(`SELECT COUNT(*) FROM webhook_outbox WHERE status = 'pending'`).Scan(&n); err != nil {
			return -1
		}
		return n
	}
	var wg sync.WaitGroup
	delivered := make([]int, 2)
	for i, d := range []*Dispatcher{d1, d2} {
		wg.Go(func() {
			for pending() > 0 {
				n, err := d.Deliver(ctx)
				if !assert.NoError(t, err) {
					return
				}
				delivered[i] += n
			}
		})
	}
	wg.Wait()

	assert.Equal(t, 200, delivered[0]+delivered[1])
	counts := rc.idCounts()
	assert.Len(t, counts, 200)
	for _, e := range events {
		assert.Equal(t, 1, counts[e.ID], "event %s", e.ID)
	}
	assert.Len(t, rc.requests(), 200)
	assert.Equal(t, 200.0, deliveriesAll(d1, resultDelivered)+deliveriesAll(d2, resultDelivered))
	assert.Equal(t, map[string]int{statusDelivered: 200}, statusCounts(t, db))
}

func TestHousekeepingGaugesAndRetention(t *testing.T) {
	db := openDB(t)
	clock := newFakeClock()
	rc := newReceiver(t, nil)
	d := newTestDispatcher(t, db, rc.srv.URL, clock, func(c *Config) { c.BatchSize = 2; c.Retention = time.Hour })
	ctx := context.Background()
	enqueueCommitted(t, db, someEvents(3)...)

	require.NoError(t, d.housekeep(ctx))
	assert.Equal(t, 3.0, testutil.ToFloat64(d.m.pending))
	// the clock runs a minute ahead of the enqueue
	assert.InDelta(t, 60, testutil.ToFloat64(d.m.oldestPending), 10)

	n, err := d.Deliver(ctx) // two of three
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.NoError(t, d.housekeep(ctx))
	assert.Equal(t, 1.0, testutil.ToFloat64(d.m.pending))
	assert.Equal(t, map[string]int{statusDelivered: 2, statusPending: 1}, statusCounts(t, db))

	// within the retention the delivered rows stay; past it they go, the pending one stays
	clock.Add(59 * time.Minute)
	require.NoError(t, d.housekeep(ctx))
	assert.Equal(t, map[string]int{statusDelivered: 2, statusPending: 1}, statusCounts(t, db))
	clock.Add(2 * time.Minute)
	require.NoError(t, d.housekeep(ctx))
	assert.Equal(t, map[string]int{statusPending: 1}, statusCounts(t, db))

	_, err = d.Deliver(ctx)
	require.NoError(t, err)
	require.NoError(t, d.housekeep(ctx))
	assert.Equal(t, 0.0, testutil.ToFloat64(d.m.pending))
	assert.Equal(t, 0.0, testutil.ToFloat64(d.m.oldestPending))
}

func TestRunDeliversUntilCancelled(t *testing.T) {
	db := openDB(t)
	rc := newReceiver(t, nil)
	d := newTestDispatcher(t, db, rc.srv.URL, nil, func(c *Config) { c.PollEvery = 10 * time.Millisecond })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()

	events := someEvents(5)
	enqueueCommitted(t, db, events...)
	// delivered means recorded: a receiver that has a request whose 2xx the
	// dispatcher has not read yet gets it again after a stop (at least once)
	require.Eventually(t, func() bool {
		return len(rc.idCounts()) == 5 && statusCounts(t, db)[statusDelivered] == 5
	}, 10*time.Second, 10*time.Millisecond)

	cancel()
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	assert.Equal(t, map[string]int{statusDelivered: 5}, statusCounts(t, db))
}

func TestNewRefusesBadConfig(t *testing.T) {
	db := openDB(t)
	cases := map[string]Config{
		"no db":        {URL: "http://example.invalid/hook", Secret: testSecret},
		"no url":       {DB: db, Secret: testSecret},
		"not http":     {DB: db, URL: "ftp://example.invalid/hook", Secret: testSecret},
		"empty secret": {DB: db, URL: "http://example.invalid/hook"},
		"backoffs":     {DB: db, URL: "http://example.invalid/hook", Secret: testSecret, MinBackoff: time.Minute, MaxBackoff: time.Second},
	}
	for name, cfg := range cases {
		_, err := New(cfg)
		assert.Error(t, err, name)
	}
	_, err := New(Config{DB: db, URL: "http://example.invalid/hook"})
	assert.ErrorContains(t, err, "Secret")

	reg := prometheus.NewRegistry()
	d, err := New(Config{DB: db, URL: "https://example.invalid/hook", Secret: testSecret, Registerer: reg})
	require.NoError(t, err)
	assert.Equal(t, 12, d.cfg.MaxAttempts)
	assert.Equal(t, 2, d.cfg.Retries)
	// every event x result exists at 0
	families, err := reg.Gather()
	require.NoError(t, err)
	n := 0
	for _, f := range families {
		if f.GetName() == "couponlink_webhook_deliveries_total" {
			n = len(f.GetMetric())
		}
	}
	assert.Equal(t, len(Types)*3, n)
}

func TestBackoffDoublesUpToMax(t *testing.T) {
	d := &Dispatcher{cfg: Config{MinBackoff: time.Second, MaxBackoff: 10 * time.Second}}
	var got []time.Duration
	for i := 1; i <= 6; i++ {
		got = append(got, d.backoff(i))
	}
	assert.Equal(t, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second,
		10 * time.Second, 10 * time.Second}, got)
	assert.Equal(t, 10*time.Second, d.backoff(1000))
}

func TestTruncateLastError(t *testing.T) {
	assert.Equal(t, "abc", truncate("abc", 512))
	long := strings.Repeat("é", 600)
	assert.Equal(t, 512, len([]rune(truncate(long, 512))))
}

// During a rotation each request is signed with both secrets (v1 twice):
// a receiver with either verifies it; with LegacySignature the old
// body-only signature goes along in its own header. A delivered request
// replayed after the tolerance fails; so does one changed by one byte.
func TestSignatureRotationLegacyAndReplay(t *testing.T) {
	db := openDB(t)
	rc := newReceiver(t, nil)
	previous := []byte("the-previous-secret")
	d := newTestDispatcher(t, db, rc.srv.URL, newFakeClock(), func(c *Config) {
		c.PreviousSecret, c.LegacySignature = previous, true
	})
	enqueueCommitted(t, db, Event{Type: ChannelSoldOut, Time: time.Now().UTC(), Template: 1, Channel: "app"})
	n, err := d.Deliver(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, n)
	r := rc.requests()[0]
	sig := r.Header.Get(HeaderSignature)
	assert.Regexp(t, `^t=[0-9]+,v1=[0-9a-f]{64},v1=[0-9a-f]{64}$`, sig)
	assert.True(t, Verify(testSecret, r.Body, sig), "a receiver with the new secret")
	assert.True(t, Verify(previous, r.Body, sig), "a receiver with the previous secret")
	assert.True(t, VerifyBody(testSecret, r.Body, r.Header.Get(HeaderBodySignature)), "the old signature, with LegacySignature")

	later := time.Now().Add(client.WebhookTolerance + time.Minute)
	assert.ErrorIs(t, client.VerifyWebhook(sig, r.Body, later, testSecret), client.ErrWebhookSignature, "replayed after the tolerance")
	changed := append([]byte(nil), r.Body...)
	changed[0] ^= 0x01
	assert.False(t, Verify(testSecret, changed, sig), "a body changed by one byte")
}
