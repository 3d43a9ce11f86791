package webhook

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/couponlink/couponlink/internal/sqltx"
)

// Leases: a round claims its rows by pushing their next_attempt_at Lease
// ahead (other dispatchers only take rows that are due), and renews that
// every Lease/3 while it sends. The value written is the lease's token: a
// renewal, a release and a failed round's record only touch rows whose
// next_attempt_at is still this round's token, so a row another dispatcher
// claimed meanwhile is never moved under it. A round that cannot renew in
// time stops its sends before the lease runs out, and one that finds a row
// taken stops at once: no two dispatchers send one event at the same time
// (as long as their clocks agree to well within Lease/3 and no process
// stalls longer than that). A dispatcher that dies mid-round holds its rows
// at most Lease; one that stops (ctx ended) hands its unsent rows back at
// once. With Config.Epoch a lease also carries the leader epoch (epoch.go):
// a leader of a higher epoch takes a dead or deposed leader's rows at once.

var errLeaseLost = errors.New("another dispatcher took rows of this round: its lease ran out, or a leader of a higher epoch took them over")

// lease is one round's hold on the rows it claimed.
type lease struct {
	d     *Dispatcher
	ids   []any
	epoch int64 // the rows' lease_epoch while this round holds them (epoch.go)

	mu    sync.Mutex
	token time.Time // the rows' next_attempt_at while this round holds them
	// unsure are the tokens of renewals whose outcome is unknown (the
	// UPDATE may have been applied and its answer lost): a held row may
	// carry any of them until a renewal is answered
	unsure []time.Time
}

// claim takes up to BatchSize due rows for this dispatcher: it locks them
// (skipping rows another dispatcher holds), leases them, and commits.
func (d *Dispatcher) claim(ctx context.Context, epoch int64) ([]outboxRow, *lease, error) {
	now := d.now()
	l := &lease{d: d, token: d.leaseEnd(now, time.Time{}), epoch: epoch}
	var out []outboxRow
	err := sqltx.RetryDeadlocks(ctx, d.db, lockingTx, d.lostRace("claim"), func(tx *sql.Tx) error {
		out, l.ids = nil, nil
		rows, err := tx.QueryContext(ctx, `SELECT id, event_id, event, body, attempts FROM webhook_outbox
			WHERE status = ? AND next_attempt_at <= ? ORDER BY id LIMIT ? FOR UPDATE SKIP LOCKED`,
			statusPending, now, d.cfg.BatchSize)
		if err != nil {
			return err
		}
		for rows.Next() {
			var r outboxRow
			if err := rows.Scan(&r.id, &r.eventID, &r.event, &r.body, &r.attempts); err != nil {
				rows.Close()
				return fmt.Errorf("read row: %w", err)
			}
			out = append(out, r)
			l.ids = append(l.ids, r.id)
		}
		rows.Close()
		if err := rows.Err(); err != nil || len(out) == 0 {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE webhook_outbox SET next_attempt_at = ?, lease_checkpoint = ?, lease_epoch = ? WHERE id IN (`+
			placeholders(len(l.ids))+`)`, append([]any{l.token, d.cfg.Checkpoint, l.epoch}, l.ids...)...); err != nil {
			return fmt.Errorf("lease: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("claim due webhook events: %w", err)
	}
	return out, l, nil
}

// leaseEnd is the token of a lease taken or renewed at now: Lease ahead, in
// the column's microseconds, and always after the previous token, so that
// every renewal changes every row it still holds.
func (d *Dispatcher) leaseEnd(now, prev time.Time) time.Time {
	end := now.Add(d.cfg.Lease).Truncate(time.Microsecond)
	if !end.After(prev) {
		end = prev.Add(time.Microsecond)
	}
	return end
}

// held is the condition on next_attempt_at of a row this round holds, and
// its arguments: the token, or one a renewal of unknown outcome wrote.
func (l *lease) held() (string, []any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.unsure) == 0 {
		return "next_attempt_at = ?", []any{l.token}
	}
	args := []any{l.token}
	for _, t := range l.unsure {
		args = append(args, t)
	}
	return "next_attempt_at IN (" + placeholders(len(args)) + ")", args
}

// latest is the newest token a held row may carry.
func (l *lease) latest() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := len(l.unsure); n > 0 {
		return l.unsure[n-1]
	}
	return l.token
}

// renew pushes the lease Lease ahead. It fails with errLeaseLost when a row
// is no longer this round's. When it fails otherwise, the UPDATE may have
// been applied all the same (its answer lost): its token stays one the
// rows may carry, until a renewal is answered.
func (l *lease) renew(ctx context.Context) error {
	next := l.d.leaseEnd(l.d.now(), l.latest())
	cond, args := l.held()
	res, err := l.d.db.ExecContext(ctx, `UPDATE webhook_outbox SET next_attempt_at = ? WHERE `+cond+` AND lease_epoch = ? AND id IN (`+
		placeholders(len(l.ids))+`)`, append(rowArgs(args, l.epoch, next), l.ids...)...)
	if err == nil {
		var n int64
		if n, err = res.RowsAffected(); err == nil {
			l.mu.Lock()
			l.token, l.unsure = next, nil // the rows still held carry it now
			l.mu.Unlock()
			if n < int64(len(l.ids)) {
				return errLeaseLost
			}
			return nil
		}
	}
	l.mu.Lock()
	l.unsure = append(l.unsure, next)
	l.mu.Unlock()
	return fmt.Errorf("renew the lease of %d webhook events: %w", len(l.ids), err)
}

// keep renews the lease every Lease/3 until the returned stop is called.
// When a row was taken, or when the lease would run out before the next
// renewal could succeed, it calls cancel: the round's sends stop.
func (l *lease) keep(ctx context.Context, cancel context.CancelFunc) (stop func()) {
	every := l.d.cfg.Lease / 3
	quit, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(every)
		defer t.Stop()
		expires := time.Now().Add(l.d.cfg.Lease)
		for {
			select {
			case <-quit:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			started := time.Now()
			rctx, done := context.WithTimeout(ctx, every)
			err := l.renew(rctx)
			done()
			switch {
			case err == nil:
				expires = started.Add(l.d.cfg.Lease)
				continue
			case ctx.Err() != nil:
				return
			case errors.Is(err, errLeaseLost):
				l.d.log.Warn("webhook round stopped: another dispatcher took some of its events", "events", len(l.ids))
			case time.Until(expires) > every:
				l.d.log.Warn("webhook lease not renewed; trying again", "err", err, "expires_in", time.Until(expires).Round(time.Millisecond))
				continue
			default:
				l.d.log.Error("webhook round stopped: its lease could not be renewed before running out", "err", err, "events", len(l.ids))
			}
			cancel()
			return
		}
	}()
	return func() { close(quit); <-finished }
}

// release makes the given rows of this round due now, for a dispatcher
// that stops before sending them (ctx ended).
func (l *lease) release(ctx context.Context, ids []any) error {
	cond, args := l.held()
	_, err := l.d.db.ExecContext(ctx, `UPDATE webhook_outbox SET next_attempt_at = ?, lease_epoch = 0
		WHERE status = ? AND `+cond+` AND lease_epoch = ? AND id IN (`+
		placeholders(len(ids))+`)`, append(rowArgs(args, l.epoch, l.d.now(), statusPending), ids...)...)
	if err != nil {
		return fmt.Errorf("release the lease of %d unsent webhook events: %w", len(ids), err)
	}
	return nil
}
