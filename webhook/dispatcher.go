package webhook

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/couponlink/couponlink/internal/defaults"
	"github.com/couponlink/couponlink/internal/redact"
)

// Outbox row statuses.
const (
	statusPending   = "pending"
	statusDelivered = "delivered"
	statusDropped   = "dropped"
)

const (
	sendParallel   = 8               // requests of one round in flight at once
	maxLastError   = 512             // width of webhook_outbox.last_error
	recordTimeout  = 5 * time.Second // to record results of a round whose ctx ended
	roundsPerTick  = 10              // Deliver rounds per Run tick while a backlog lasts
	housekeepEvery = 10              // Run ticks between housekeeping passes
	maxFailWait    = 30 * time.Second
	retryWaitMin   = 100 * time.Millisecond
	retryWaitMax   = time.Second
)

// Config configures a Dispatcher. Zero fields take their defaults.
type Config struct {
	DB     *sql.DB
	URL    string // receiver; required (http or https)
	Secret []byte // HMAC key; required
	// PreviousSecret, during a rotation, signs each request too (a second
	// v1), so receivers that know either secret verify it.
	PreviousSecret []byte
	// LegacySignature also sends the old body-only signature
	// (HeaderBodySignature), for receivers not yet moved; one release.
	LegacySignature bool
	MaxAttempts     int           // delivery rounds before an event is dropped; default 12
	MinBackoff      time.Duration // between rounds of one event, doubling each round; default 1s
	MaxBackoff      time.Duration // the longest wait between rounds; default 10m
	Timeout         time.Duration // per HTTP request; default 5s
	Retries         int           // quick retries inside one round (100ms..1s apart); default 2, negative for none
	MaxPending      int           // bound of pending rows; beyond it the oldest are dropped; default 100000
	Retention       time.Duration // delivered and dropped rows are deleted after this; default 168h
	PollEvery       time.Duration // how often Run looks for due events; default 1s
	BatchSize       int           // rows claimed per round; default 100
	// Lease is how long claimed rows stay invisible to other dispatchers;
	// a round renews it every Lease/3 while it sends (lease.go). A
	// dispatcher that dies mid-round delays its events by at most this.
	// Default 10s.
	Lease      time.Duration
	Logger     *slog.Logger
	Registerer prometheus.Registerer // default: a new registry
	// SinkMetrics, when set, also counts the deliveries (and the pending
	// rows) under sink="webhook", beside the stream sinks.
	SinkMetrics *SinkMetrics
	Now         func() time.Time // clock for backoff and due times; default time.Now
	// Epoch, when set, ties the rounds' leases to the cdc's leadership: it
	// returns the leader epoch this process leads Checkpoint under, 0
	// while it is a standby (which never delivers); see epoch.go. Nil:
	// plain leases.
	Epoch      func() int64
	Checkpoint string
	// Format is what is POSTed: the stored body (native, the zero
	// Format), or its CloudEvents structured envelope with Content-Type
	// application/cloudevents+json. The signatures cover the bytes sent.
	Format Format
}

// withDefaults fills the zero fields and checks the rest.
func (c Config) withDefaults() (Config, error) {
	if c.DB == nil {
		return c, errors.New("webhook: Config.DB is required")
	}
	u, err := url.Parse(c.URL)
	if c.URL == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return c, fmt.Errorf("webhook: Config.URL %s is not an http(s) URL of the receiver", redact.String(c.URL))
	}
	if len(c.Secret) == 0 {
		return c, errors.New("webhook: Config.Secret is empty; refusing to send unsigned webhooks")
	}
	c.Secret = append([]byte(nil), c.Secret...)
	c.PreviousSecret = append([]byte(nil), c.PreviousSecret...)
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 12
	}
	if c.MinBackoff <= 0 {
		c.MinBackoff = time.Second
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = 10 * time.Minute
	}
	if c.MaxBackoff < c.MinBackoff {
		return c, fmt.Errorf("webhook: MaxBackoff %s is below MinBackoff %s", c.MaxBackoff, c.MinBackoff)
	}
	if c.Timeout <= 0 {
		c.Timeout = 5 * time.Second
	}
	switch {
	case c.Retries == 0:
		c.Retries = 2
	case c.Retries < 0:
		c.Retries = 0
	}
	if c.MaxPending <= 0 {
		c.MaxPending = 100000
	}
	if c.Retention <= 0 {
		c.Retention = 168 * time.Hour
	}
	if c.PollEvery <= 0 {
		c.PollEvery = time.Second
	}
	if c.BatchSize <= 0 {
		c.BatchSize = 100
	}
	if c.Lease <= 0 {
		c.Lease = 10 * time.Second
	}
	defaults.LogMetricsClock(&c.Logger, &c.Registerer, &c.Now)
	return c, nil
}

// Dispatcher delivers the outbox's events to the receiver. Several
// dispatchers (one per cdc replica) may share one outbox: each row is
// claimed by one of them at a time.
type Dispatcher struct {
	cfg  Config
	db   *sql.DB
	log  *slog.Logger
	sink Sink // the receiver (HTTP)
	m    *metrics
	warn failWarn // bounds the failure warnings
}

// New returns a Dispatcher for cfg. It refuses a missing database, URL or
// secret.
func New(cfg Config) (*Dispatcher, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	d := &Dispatcher{cfg: cfg, db: cfg.DB, log: cfg.Logger.With("component", "webhook"), m: m}
	d.sink = newHTTPSink(cfg, d.log)
	cfg.SinkMetrics.declare(d.sink.Name())
	return d, nil
}

// Run delivers due events every PollEvery, and keeps the outbox bounded
// and pruned every housekeepEvery ticks, until ctx ends. Errors are logged,
// never fatal: while the database fails (down, restarting) the wait between
// ticks doubles up to maxFailWait. It returns nil when ctx ends.
func (d *Dispatcher) Run(ctx context.Context) error {
	poll(ctx, d.cfg.PollEvery, d.log, "webhook dispatcher", func(tick int) (bool, error) {
		var errs []error
		if tick%housekeepEvery == 0 {
			if err := d.housekeep(ctx); err != nil {
				errs = append(errs, fmt.Errorf("housekeeping: %w", err))
			}
		}
		return false, errors.Join(append(errs, d.drain(ctx))...)
	})
	return nil
}

// drain runs Deliver rounds while they find full batches, up to
// roundsPerTick, so a backlog goes out faster than one batch per tick.
func (d *Dispatcher) drain(ctx context.Context) error {
	for range roundsPerTick {
		if ctx.Err() != nil {
			return nil
		}
		_, claimed, err := d.deliver(ctx)
		if err != nil {
			return fmt.Errorf("delivery round: %w", err)
		}
		if claimed < d.cfg.BatchSize {
			return nil
		}
	}
	return nil
}

// Deliver runs one delivery round: it claims up to BatchSize due events,
// sends them and records each result. It returns how many the receiver
// took. A failed send is not an error (it is recorded on the row and
// counted); a database failure is.
func (d *Dispatcher) Deliver(ctx context.Context) (delivered int, err error) {
	delivered, _, err = d.deliver(ctx)
	return delivered, err
}

// outboxRow is a claimed event.
type outboxRow struct {
	id       int64
	eventID  string
	event    string
	body     []byte
	attempts int // failed rounds so far
}

func (d *Dispatcher) deliver(ctx context.Context) (delivered, claimed int, err error) {
	epoch, leads := leading(d.cfg.Epoch)
	if !leads {
		return 0, 0, nil // a standby never delivers
	}
	if err := d.takeOver(ctx, epoch); err != nil {
		return 0, 0, err
	}
	rows, l, err := d.claim(ctx, epoch)
	if err != nil {
		return 0, 0, err
	}
	if len(rows) == 0 {
		return 0, 0, nil
	}
	roundCtx, stopRound := context.WithCancel(ctx)
	stopRenewing := l.keep(roundCtx, stopRound)
	sendErrs := d.sendAll(roundCtx, rows)
	stopRenewing()
	aborted := roundCtx.Err() != nil // ctx ended, or the lease was lost
	stopRound()
	// record even when ctx ended during the sends: a delivered row not
	// marked would be sent again
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	var errs []error
	var unsent []any
	var sent []outboxRow
	for i, r := range rows {
		switch {
		case sendErrs[i] == nil:
			sent = append(sent, r)
		case aborted:
			unsent = append(unsent, r.id) // not the receiver's fault: tried again
		default:
			if err := d.record(rctx, r, sendErrs[i], l); err != nil {
				errs = append(errs, err)
			}
		}
	}
	delivered, err = d.markDelivered(rctx, sent, l)
	if err != nil {
		errs = append(errs, err)
	}
	if len(unsent) > 0 && ctx.Err() != nil {
		// stopping: hand the unsent rows on now rather than when the lease ends
		if err := l.release(rctx, unsent); err != nil {
			errs = append(errs, err)
		}
	}
	return delivered, len(rows), errors.Join(errs...)
}

// sendAll sends the rows, sendParallel at a time, and returns each one's
// error (nil: delivered).
func (d *Dispatcher) sendAll(ctx context.Context, rows []outboxRow) []error {
	errs := make([]error, len(rows))
	sem := make(chan struct{}, sendParallel)
	var wg sync.WaitGroup
	for i := range rows {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = d.send(ctx, rows[i])
		})
	}
	wg.Wait()
	return errs
}

// send hands one stored event to the sink (the receiver).
func (d *Dispatcher) send(ctx context.Context, r outboxRow) error {
	_, err := d.sink.Send(ctx, []Message{{OutboxID: r.id, ID: r.eventID, Type: r.event, Body: r.body}})
	return err
}

// rowArgs are a statement's arguments: first, then the lease's held
// tokens, then its epoch.
func rowArgs(held []any, epoch int64, first ...any) []any {
	return append(append(first, held...), epoch)
}

// record writes a failed send on its row and counts it. A row no longer
// pending (dropped by overflow meanwhile) is left alone and not counted;
// so is a row whose lease (token) another dispatcher holds now, or that a
// leader of a higher epoch took over (epoch.go).
func (d *Dispatcher) record(ctx context.Context, r outboxRow, sendErr error, l *lease) error {
	now := d.now()
	cond, held := l.held()
	attempts := r.attempts + 1
	lastErr := storedError(sendErr)
	if attempts >= d.cfg.MaxAttempts {
		n, err := d.update(ctx, `UPDATE webhook_outbox SET status = ?, attempts = ?, last_error = ?, finished_at = ?, lease_epoch = 0
			WHERE id = ? AND status = ? AND `+cond+` AND lease_epoch = ?`, rowArgs(held, l.epoch, statusDropped, attempts, lastErr, now, r.id, statusPending)...)
		if err != nil || n == 0 {
			return err
		}
		d.m.deliveries.WithLabelValues(r.event, resultDropped).Inc()
		d.cfg.SinkMetrics.count(d.sink.Name(), resultDropped, 1)
		d.log.Error("webhook dropped: delivery attempts exhausted", "event_id", r.eventID, "event", r.event,
			"attempts", attempts, "err", lastErr)
		return nil
	}
	next := now.Add(d.backoff(attempts))
	n, err := d.update(ctx, `UPDATE webhook_outbox SET attempts = ?, next_attempt_at = ?, last_error = ?, lease_epoch = 0
		WHERE id = ? AND status = ? AND `+cond+` AND lease_epoch = ?`, rowArgs(held, l.epoch, attempts, next, lastErr, r.id, statusPending)...)
	if err != nil || n == 0 {
		return err
	}
	d.m.deliveries.WithLabelValues(r.event, resultFailed).Inc()
	d.cfg.SinkMetrics.count(d.sink.Name(), resultFailed, 1)
	if warn, skipped := d.warn.failed(time.Now()); warn {
		d.log.Warn("webhook delivery failed; will retry", "event_id", r.eventID, "event", r.event,
			"attempt", attempts, "max_attempts", d.cfg.MaxAttempts, "next_try", next, "err", lastErr,
			"failures_not_logged", skipped)
	}
	return nil
}

// update runs one single-row UPDATE of the outbox and returns the rows it
// changed.
func (d *Dispatcher) update(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := d.db.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, fmt.Errorf("record webhook delivery result: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("record webhook delivery result: %w", err)
	}
	return n, nil
}

// backoff is the wait after the given number of failed rounds:
// MinBackoff, doubling each round, at most MaxBackoff.
func (d *Dispatcher) backoff(failed int) time.Duration {
	b := d.cfg.MinBackoff
	for i := 1; i < failed && b < d.cfg.MaxBackoff; i++ {
		b *= 2
	}
	return min(b, d.cfg.MaxBackoff)
}

// lostRace logs a transaction of the dispatcher's that a deadlock (or a
// lock wait timeout) with another dispatcher rolled back, before it runs
// again (sqltx.RetryDeadlocks).
func (d *Dispatcher) lostRace(tx string) func(error) {
	return func(err error) {
		d.log.Info("webhook transaction lost a race with another dispatcher; running it again", "tx", tx, "err", err)
	}
}

func (d *Dispatcher) now() time.Time { return d.cfg.Now().UTC() }

// truncate cuts s to at most n characters, keeping it valid UTF-8.
// storedError is a send's error as it is logged and kept for the status
// (webhook_outbox.last_error, event_sink_position.last_error): its
// secrets masked (a receiver's URL, a sink's password: redact.Text) and
// cut to the column's width.
func storedError(err error) string {
	return truncate(redact.Text(err.Error()), maxLastError)
}

func truncate(s string, n int) string {
	s = strings.ToValidUTF8(s, "?")
	if r := []rune(s); len(r) > n {
		return string(r[:n])
	}
	return s
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}
