package reconcile

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/couponlink/couponlink/sink"
)

// fixCounter sets one pair's counters to the truth, in one transaction with
// a correction_log row per field, only if the row is still as read (the cdc
// has not moved it since). It reports false when the row moved.
func (r *Reconciler) fixCounter(ctx context.Context, taskID int64, p sink.Pair, read counterRow, have bool, want sink.Counts, stamp int64) (bool, error) {
	moved := false
	err := inTx(ctx, r.db, func(tx *sql.Tx) error {
		var cur counterRow
		err := tx.QueryRowContext(ctx, `SELECT held, used, expired, returned, released, stamp FROM inventory_counter
			WHERE template_id = ? AND channel = ? FOR UPDATE`, p.Template, p.Channel).
			Scan(&cur.Held, &cur.Used, &cur.Expired, &cur.Returned, &cur.Released, &cur.Stamp)
		found := err == nil
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("lock counters %d/%s: %w", p.Template, p.Channel, err)
		}
		if found != have || (found && cur != read) {
			moved = true
			return nil
		}
		if found {
			_, err = tx.ExecContext(ctx, `UPDATE inventory_counter SET held = ?, used = ?, expired = ?, returned = ?, released = ?
				WHERE template_id = ? AND channel = ?`, want.Held, want.Used, want.Expired, want.Returned, want.Released, p.Template, p.Channel)
		} else {
			_, err = tx.ExecContext(ctx, `INSERT INTO inventory_counter (template_id, channel, held, used, expired, returned, released, stamp)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, p.Template, p.Channel, want.Held, want.Used, want.Expired, want.Returned, want.Released, stamp)
		}
		if err != nil {
			return fmt.Errorf("correct counters %d/%s: %w", p.Template, p.Channel, err)
		}
		old, exp := fieldsOf(read.Counts), fieldsOf(want)
		for i, f := range counterFields {
			if old[i] == exp[i] && (found || exp[i] == 0) {
				continue // not a difference (as in compareCounters): nothing to record
			}
			var o *int64
			if found {
				o = ptr(old[i])
			}
			if err := r.record(ctx, tx, taskID, StoreCounter, fmt.Sprintf("%d/%s/%s", p.Template, p.Channel, f), o, exp[i],
				"inventory_counter differed from user_coupon at the snapshot position"); err != nil {
				return err
			}
		}
		return nil
	})
	return !moved && err == nil, err
}

// fixTemplate sets coupon_template's cached counts to the counters' sums,
// which were just found equal to the truth, if the cache is still as read.
func (r *Reconciler) fixTemplate(ctx context.Context, taskID, id int64, read, want templateCache) (bool, error) {
	moved := false
	err := inTx(ctx, r.db, func(tx *sql.Tx) error {
		var cur templateCache
		if err := tx.QueryRowContext(ctx, `SELECT issued_count, used_count, expired_count FROM coupon_template WHERE id = ? FOR UPDATE`, id).
			Scan(&cur.Issued, &cur.Used, &cur.Expired); err != nil {
			return fmt.Errorf("lock template %d: %w", id, err)
		}
		if cur != read {
			moved = true
			return nil
		}
		if _, err := tx.ExecContext(ctx, `UPDATE coupon_template SET issued_count = ?, used_count = ?, expired_count = ? WHERE id = ?`,
			want.Issued, want.Used, want.Expired, id); err != nil {
			return fmt.Errorf("correct template %d: %w", id, err)
		}
		for _, f := range []struct {
			name     string
			old, new int64
		}{{"issued_count", read.Issued, want.Issued}, {"used_count", read.Used, want.Used}, {"expired_count", read.Expired, want.Expired}} {
			if f.old == f.new {
				continue
			}
			if err := r.record(ctx, tx, taskID, StoreTemplate, fmt.Sprintf("%d/%s", id, f.name), ptr(f.old), f.new,
				"coupon_template's cached count differed from user_coupon at the snapshot position"); err != nil {
				return err
			}
		}
		return nil
	})
	return !moved && err == nil, err
}

// record writes one correction. UNIQUE(task, store, target) makes a second
// run of the same task write nothing new.
func (r *Reconciler) record(ctx context.Context, q interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, taskID int64, store, target string, old *int64, value int64, reason string) error {
	var o sql.NullInt64
	if old != nil {
		o = sql.NullInt64{Int64: *old, Valid: true}
	}
	_, err := q.ExecContext(ctx, `INSERT IGNORE INTO correction_log (task_id, store, target, old_value, new_value, reason, mode, actor)
		VALUES (?, ?, ?, ?, ?, ?, 'auto', ?)`, taskID, store, target, o, value, reason, r.cfg.Actor)
	if err != nil {
		return fmt.Errorf("record correction of %s %s: %w", store, target, err)
	}
	r.m.corrections.WithLabelValues(store, "auto").Inc()
	return nil
}

// fixedBefore lists the targets the previous pass corrected automatically:
// wrong again now means the fix does not hold, and a person must look.
func (r *Reconciler) fixedBefore(ctx context.Context, taskID int64) (map[string]bool, error) {
	out := map[string]bool{}
	var prev sql.NullInt64
	if err := r.db.QueryRowContext(ctx, `SELECT MAX(id) FROM reconcile_task WHERE id < ? AND finished_at IS NOT NULL`, taskID).Scan(&prev); err != nil {
		return nil, fmt.Errorf("find the previous task: %w", err)
	}
	if !prev.Valid {
		return out, nil
	}
	rows, err := r.db.QueryContext(ctx, `SELECT store, target FROM correction_log WHERE task_id = ? AND mode = 'auto'`, prev.Int64)
	if err != nil {
		return nil, fmt.Errorf("read the previous task's corrections: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var store, target string
		if err := rows.Scan(&store, &target); err != nil {
			return nil, err
		}
		out[store+" "+target] = true
	}
	return out, rows.Err()
}

func inTx(ctx context.Context, db *sql.DB, fn func(*sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}
