package webhook

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// A Relay delivers the outbox to one stream sink (a Redis stream, a NATS
// JetStream subject) in outbox order, from the sink's own position
// (event_sink_position: the last outbox id the sink took or skipped). Each
// sink has its own Relay, position, lease, retries and metrics, so a sink
// that is down holds back nothing but itself: the cdc writes events to the
// outbox whatever the sinks do, and the other sinks go on.
//
// Delivery is at-least-once: a cdc killed between a send and the position
// update sends those events again. Consumers dedupe on the event id (a
// Redis stream entry's id field; JetStream drops a repeated Nats-Msg-Id
// within the stream's duplicate window by itself).
//
// Order and gaps: outbox ids are taken at INSERT, so a transaction may
// commit an id below one already visible. The relay reads the rows after
// its position in id order and stops before a missing id (the next id
// would be position + auto_increment_increment) until the hole is settled
// (gaps.go): the row after it is GapWait old (no event-writing transaction
// stays open that long after writing), or — with RelayConfig.Epoch —
// quickGap old with no transaction holding a row of the hole (a rolled-back
// transaction, a killed leader's, leaves a hole for good).

// RelayConfig configures a Relay. Zero fields take their defaults.
type RelayConfig struct {
	DB   *sql.DB
	Sink Sink // required; its Name keys the position
	// MaxAttempts: failed rounds on one event the sink refuses (Refused)
	// before that event is dropped; default 12. An outage (any other
	// error) is retried without limit, with backoff.
	MaxAttempts int
	MinBackoff  time.Duration // after a failed round, doubling; default 500ms
	MaxBackoff  time.Duration // default 30s
	Timeout     time.Duration // one Send; default Lease/2
	MaxPending  int           // events behind the position beyond which the oldest are dropped; default 100000
	BatchSize   int           // events per Send; default 500
	PollEvery   time.Duration // default 200ms
	GapWait     time.Duration // see above; default 10s
	Lease       time.Duration // how long a relay holds a sink; default 10s
	// PruneOutbox deletes outbox rows older than Retention that every
	// sink's position passed. Set it when no webhook dispatcher runs (the
	// dispatcher prunes the rows it finished).
	PruneOutbox bool
	Retention   time.Duration // default 168h
	Metrics     *SinkMetrics  // default: none
	// Epoch, when set, ties the sink's lease to the cdc's leadership: it
	// returns the leader epoch this process leads Checkpoint under, 0
	// while it is a standby (which never delivers); see epoch.go. Nil:
	// plain leases.
	Epoch      func() int64
	Checkpoint string
	Logger     *slog.Logger
	Now        func() time.Time
}

func (c RelayConfig) withDefaults() (RelayConfig, error) {
	if c.DB == nil {
		return c, errors.New("event relay: RelayConfig.DB is required")
	}
	if c.Sink == nil || c.Sink.Name() == "" || len(c.Sink.Name()) > 64 {
		return c, errors.New("event relay: RelayConfig.Sink is required, with a name of 1 to 64 characters")
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 12
	}
	def(&c.MinBackoff, 500*time.Millisecond)
	def(&c.MaxBackoff, 30*time.Second)
	if c.MaxBackoff < c.MinBackoff {
		return c, fmt.Errorf("event relay: MaxBackoff %s is below MinBackoff %s", c.MaxBackoff, c.MinBackoff)
	}
	def(&c.Lease, 10*time.Second)
	def(&c.Timeout, c.Lease/2)
	if c.Timeout > c.Lease/2 {
		return c, fmt.Errorf("event relay: Timeout %s is above half the Lease %s", c.Timeout, c.Lease)
	}
	if c.MaxPending <= 0 {
		c.MaxPending = 100000
	}
	if c.BatchSize <= 0 {
		c.BatchSize = 500
	}
	def(&c.PollEvery, 200*time.Millisecond)
	def(&c.GapWait, 10*time.Second)
	def(&c.Retention, 168*time.Hour)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c, nil
}

// Relay delivers the outbox to one sink. Several relays of one sink (one
// per cdc replica) may run: the one holding the position's lease sends.
type Relay struct {
	cfg   RelayConfig
	db    *sql.DB
	sink  Sink
	name  string
	log   *slog.Logger
	m     *SinkMetrics
	owner string // this relay's lease token
	warn  failWarn

	registered bool // the sink's row exists
}

// NewRelay returns a Relay for cfg.
func NewRelay(cfg RelayConfig) (*Relay, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	name := cfg.Sink.Name()
	cfg.Metrics.declare(name)
	return &Relay{cfg: cfg, db: cfg.DB, sink: cfg.Sink, name: name, m: cfg.Metrics, owner: NewID(),
		log: cfg.Logger.With("component", "events", "sink", name)}, nil
}

// Name is the sink's name.
func (r *Relay) Name() string { return r.name }

// Run delivers until ctx ends: rounds every PollEvery (at once while a
// backlog lasts), housekeeping every housekeepEvery ticks. Database errors
// are logged and retried, never fatal; on return it hands its lease back
// and closes the sink. It returns nil when ctx ends.
func (r *Relay) Run(ctx context.Context) error {
	defer r.sink.Close()
	defer r.handBack(ctx)
	poll(ctx, r.cfg.PollEvery, r.log, "event relay", func(tick int) (bool, error) {
		var errs []error
		if tick%housekeepEvery == 0 {
			errs = append(errs, r.housekeep(ctx))
		}
		full, err := r.Round(ctx)
		return full && err == nil, errors.Join(append(errs, err)...)
	})
	return nil
}

// Round runs one delivery round: take (or keep) the sink's lease, read the
// events after its position, send the ready ones, move the position. It
// says whether it sent a full batch (more may wait). A failed send is no
// error (it is recorded on the position, counted and logged); a database
// failure is.
func (r *Relay) Round(ctx context.Context) (full bool, err error) {
	now := r.now()
	pos, held, err := r.acquire(ctx, now)
	if err != nil || !held || pos.waiting {
		return false, err
	}
	rows, ages, err := r.read(ctx, pos.lastID, now)
	if err != nil {
		return false, err
	}
	ready := r.ready(ctx, rows, ages, pos)
	if len(ready) == 0 {
		return false, nil
	}
	sctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	n, sendErr := r.sink.Send(sctx, ready)
	cancel()
	if sendErr == nil && n < len(ready) {
		sendErr = fmt.Errorf("the sink took %d of %d events and said nothing", n, len(ready))
	}
	// record even when ctx ended during the send: events taken and not
	// recorded would be sent again
	rctx, stop := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer stop()
	if err := r.record(rctx, pos, ready, n, sendErr); err != nil {
		return false, err
	}
	return sendErr == nil && len(rows) == r.cfg.BatchSize && len(ready) == len(rows), nil
}

// ready is the prefix of rows (read after pos) that may go out now: in id
// order, stopping before a hole that may still fill (settled).
func (r *Relay) ready(ctx context.Context, rows []Message, ages []rowAge, pos position) []Message {
	prev := pos.lastID
	for i, m := range rows {
		if m.OutboxID != prev+pos.step && !r.settled(ctx, prev, m.OutboxID, ages[i]) {
			return rows[:i]
		}
		prev = m.OutboxID
	}
	return rows
}

// record moves the position past what the sink took, and after a failure
// sets the backoff, or drops the refused event that has used up its
// attempts.
func (r *Relay) record(ctx context.Context, pos position, sent []Message, n int, sendErr error) error {
	next := update{lastID: pos.lastID, attempts: pos.attempts, delivered: n, nextAttempt: r.now(), epoch: pos.epoch}
	if n > 0 {
		next.lastID, next.attempts = sent[n-1].OutboxID, 0
	}
	if sendErr != nil {
		next.attempts++
		next.lastErr = storedError(sendErr)
		if IsRefused(sendErr) && next.attempts >= r.cfg.MaxAttempts {
			next.lastID, next.attempts, next.dropped = sent[n].OutboxID, 0, 1
		} else {
			next.nextAttempt = next.nextAttempt.Add(r.backoff(next.attempts))
		}
	}
	if err := r.save(ctx, pos.lastID, next); err != nil {
		return err
	}
	dropped := next.dropped
	r.m.count(r.name, resultDelivered, n)
	switch {
	case dropped > 0:
		r.m.count(r.name, resultDropped, 1)
		r.log.Error("event dropped: the sink refused it too often", "event_id", sent[n].ID, "event", sent[n].Type,
			"attempts", r.cfg.MaxAttempts, "err", next.lastErr)
	case sendErr != nil:
		r.m.count(r.name, resultFailed, 1)
		if warn, skipped := r.warn.failed(time.Now()); warn {
			refused := IsRefused(sendErr) // the event's own fault: counts toward MaxAttempts
			r.log.Warn("event delivery failed; will retry", "event_id", sent[n].ID, "event", sent[n].Type, "taken", n,
				"attempt", next.attempts, "next_try", next.nextAttempt, "refused", refused, "err", next.lastErr,
				"failures_not_logged", skipped)
		}
		return nil
	case pos.attempts > 0:
		r.log.Info("events delivered again after failed rounds", "failed_rounds", pos.attempts, "events", n)
	}
	r.warn.ok()
	return nil
}

// backoff is the wait after the given number of failed rounds.
func (r *Relay) backoff(failed int) time.Duration {
	b := r.cfg.MinBackoff
	for i := 1; i < failed && b < r.cfg.MaxBackoff; i++ {
		b *= 2
	}
	return min(b, r.cfg.MaxBackoff)
}

func (r *Relay) now() time.Time { return r.cfg.Now().UTC() }
