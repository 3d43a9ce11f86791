package webhook

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// A sink's position row (event_sink_position) is also its lease: a relay
// sends only while lease_owner is its token and lease_until is ahead; it
// renews the lease every round (each round's send is bounded by Timeout,
// at most Lease/2). Another relay takes a sink over once the lease ran
// out, from the saved position: what the first sent after it is sent
// again (consumers dedupe on the event id). With RelayConfig.Epoch the
// lease also carries the leader epoch (lease_epoch, see epoch.go): a
// relay leading under a higher epoch takes it at once, and every write of
// the position is refused to a relay whose epoch is no longer the row's.

// position is a sink's row as a round reads it.
type position struct {
	lastID   int64
	step     int64 // @@auto_increment_increment: the id after lastID when no hole
	attempts int
	waiting  bool  // backing off after a failed round
	epoch    int64 // the leader epoch the lease is held under (0: plain leases)
}

// update is what a round writes on its sink's row.
type update struct {
	lastID      int64
	attempts    int
	nextAttempt time.Time
	lastErr     string
	delivered   int
	dropped     int
	epoch       int64 // the round's lease epoch: the write is refused under another
}

// acquire creates the sink's row when missing (position 0: every event
// still in the outbox), takes or renews its lease, and reads it. held is
// false while another relay holds the lease.
func (r *Relay) acquire(ctx context.Context, now time.Time) (pos position, held bool, err error) {
	if !r.registered {
		if _, err := r.db.ExecContext(ctx, `INSERT IGNORE INTO event_sink_position (sink) VALUES (?)`, r.name); err != nil {
			return pos, false, fmt.Errorf("register event sink %s: %w", r.name, err)
		}
		r.registered = true
	}
	epoch, leads := leading(r.cfg.Epoch)
	if !leads {
		return pos, false, nil // a standby never delivers
	}
	// a lease of the checkpoint under a lower epoch is a deposed leader's:
	// taken at once; one under a higher epoch never (this one is deposed)
	cp := r.cfg.Checkpoint
	if _, err := r.db.ExecContext(ctx, `UPDATE event_sink_position SET lease_owner = ?, lease_until = ?, lease_checkpoint = ?, lease_epoch = ?
		WHERE sink = ? AND NOT (lease_checkpoint = ? AND lease_epoch > ?)
		AND ((lease_checkpoint = ? AND lease_epoch < ?) OR lease_owner = ? OR lease_until < ?)`,
		r.owner, now.Add(r.cfg.Lease), cp, epoch, r.name, cp, epoch, cp, epoch, r.owner, now); err != nil {
		return pos, false, fmt.Errorf("take the lease of event sink %s: %w", r.name, err)
	}
	var owner string
	err = r.db.QueryRowContext(ctx, `SELECT last_id, attempts, attempts > 0 AND next_attempt_at > ?, lease_owner, lease_epoch, @@auto_increment_increment
		FROM event_sink_position WHERE sink = ?`, now, r.name).Scan(&pos.lastID, &pos.attempts, &pos.waiting, &owner, &pos.epoch, &pos.step)
	if err != nil {
		return pos, false, fmt.Errorf("read the position of event sink %s: %w", r.name, err)
	}
	return pos, owner == r.owner && pos.epoch == epoch, nil
}

// read returns up to BatchSize outbox events after id after, in id order,
// and for each how old it is (gaps.go).
func (r *Relay) read(ctx context.Context, after int64, now time.Time) ([]Message, []rowAge, error) {
	rows, err := r.db.QueryContext(ctx, `SELECT id, event_id, event, body,
		CASE WHEN created_at <= ? THEN 2 WHEN created_at <= ? THEN 1 ELSE 0 END FROM webhook_outbox
		WHERE id > ? ORDER BY id LIMIT ?`, now.Add(-r.cfg.GapWait), now.Add(-min(quickGap, r.cfg.GapWait)), after, r.cfg.BatchSize)
	if err != nil {
		return nil, nil, fmt.Errorf("read outbox events after %d for sink %s: %w", after, r.name, err)
	}
	defer rows.Close()
	var out []Message
	var ages []rowAge
	for rows.Next() {
		var m Message
		var age rowAge
		if err := rows.Scan(&m.OutboxID, &m.ID, &m.Type, &m.Body, &age); err != nil {
			return nil, nil, fmt.Errorf("read outbox events for sink %s: %w", r.name, err)
		}
		out = append(out, m)
		ages = append(ages, age)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("read outbox events for sink %s: %w", r.name, err)
	}
	return out, ages, nil
}

// save writes a round's result, if this relay still holds the lease and
// the position is still from. A lost lease is logged: the relay that took
// over sends from the saved position (again, for what this round sent).
func (r *Relay) save(ctx context.Context, from int64, u update) error {
	var lastErr any
	if u.lastErr != "" {
		lastErr = u.lastErr
	}
	res, err := r.db.ExecContext(ctx, `UPDATE event_sink_position SET last_id = ?, attempts = ?, next_attempt_at = ?,
		last_error = ?, delivered = delivered + ?, dropped = dropped + ? WHERE sink = ? AND lease_owner = ? AND lease_epoch = ? AND last_id = ?`,
		u.lastID, u.attempts, u.nextAttempt, lastErr, u.delivered, u.dropped, r.name, r.owner, u.epoch, from)
	if err != nil {
		return fmt.Errorf("save the position of event sink %s at %d: %w", r.name, u.lastID, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		r.log.Warn("event sink position not saved: another relay took the sink over", "position", u.lastID)
	}
	return nil
}

// handBack ends this relay's lease at once, so a replica (or the next
// start) takes the sink over without waiting for it to run out.
func (r *Relay) handBack(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	if _, err := r.db.ExecContext(ctx, `UPDATE event_sink_position SET lease_until = '1970-01-01 00:00:01'
		WHERE sink = ? AND lease_owner = ?`, r.name, r.owner); err != nil {
		r.log.Warn("event sink lease not handed back; it runs out by itself", "err", err)
	}
}

// housekeep refreshes the pending gauges, drops the oldest events beyond
// MaxPending (moving the position, counted and logged), and prunes the
// outbox when PruneOutbox is set.
func (r *Relay) housekeep(ctx context.Context) error {
	return errors.Join(r.bound(ctx), r.pruneOutbox(ctx))
}

// bound measures the sink's backlog and, while this relay holds the
// sink, drops what passes MaxPending.
func (r *Relay) bound(ctx context.Context) error {
	now := r.now()
	var last, epoch int64
	var owner string
	if err := r.db.QueryRowContext(ctx, `SELECT last_id, lease_owner, lease_epoch FROM event_sink_position WHERE sink = ?`,
		r.name).Scan(&last, &owner, &epoch); errors.Is(err, sql.ErrNoRows) {
		return nil // not registered yet: the first round does it
	} else if err != nil {
		return fmt.Errorf("read the position of event sink %s: %w", r.name, err)
	}
	var pending, ageMicros int64
	if err := r.db.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(TIMESTAMPDIFF(MICROSECOND, MIN(created_at), ?), 0)
		FROM webhook_outbox WHERE id > ?`, now, last).Scan(&pending, &ageMicros); err != nil {
		return fmt.Errorf("measure the backlog of event sink %s: %w", r.name, err)
	}
	r.m.setPending(r.name, pending, max(time.Duration(ageMicros)*time.Microsecond, 0).Seconds())
	if mine, leads := leading(r.cfg.Epoch); pending <= int64(r.cfg.MaxPending) || owner != r.owner || !leads || epoch != mine {
		return nil
	}
	var upTo int64
	if err := r.db.QueryRowContext(ctx, `SELECT id FROM webhook_outbox WHERE id > ? ORDER BY id DESC LIMIT 1 OFFSET ?`,
		last, r.cfg.MaxPending).Scan(&upTo); err != nil {
		return fmt.Errorf("find the overflow of event sink %s: %w", r.name, err)
	}
	var dropped int
	if err := r.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM webhook_outbox WHERE id > ? AND id <= ?`, last, upTo).Scan(&dropped); err != nil {
		return fmt.Errorf("count the overflow of event sink %s: %w", r.name, err)
	}
	res, err := r.db.ExecContext(ctx, `UPDATE event_sink_position SET last_id = ?, attempts = 0, dropped = dropped + ?
		WHERE sink = ? AND lease_owner = ? AND lease_epoch = ? AND last_id = ?`, upTo, dropped, r.name, r.owner, epoch, last)
	if err != nil {
		return fmt.Errorf("drop the overflow of event sink %s: %w", r.name, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("drop the overflow of event sink %s: %w", r.name, err)
	} else if n == 1 {
		r.m.count(r.name, resultDropped, dropped)
		r.m.setPending(r.name, pending-int64(dropped), 0) // the age: at the next pass
		r.log.Warn("event sink too far behind: dropped its oldest pending events", "dropped", dropped,
			"pending", pending, "max_pending", r.cfg.MaxPending, "position", upTo)
	}
	return nil
}

// pruneOutbox deletes outbox rows older than Retention that the position
// of every sink in use (its lease renewed within Retention) passed.
func (r *Relay) pruneOutbox(ctx context.Context) error {
	if !r.cfg.PruneOutbox {
		return nil
	}
	before := r.now().Add(-r.cfg.Retention)
	var upTo sql.NullInt64
	if err := r.db.QueryRowContext(ctx, `SELECT MIN(last_id) FROM event_sink_position WHERE lease_until >= ?`,
		before).Scan(&upTo); err != nil {
		return fmt.Errorf("find the outbox rows every sink passed: %w", err)
	}
	if !upTo.Valid {
		return nil
	}
	for range maxDeletes {
		res, err := r.db.ExecContext(ctx, `DELETE FROM webhook_outbox WHERE id <= ? AND created_at < ? ORDER BY id LIMIT ?`,
			upTo.Int64, before, deleteBatch)
		if err != nil {
			return fmt.Errorf("delete old outbox rows: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil || n < deleteBatch {
			return err
		}
	}
	return nil
}
