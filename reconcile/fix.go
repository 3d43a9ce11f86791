package reconcile

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"

	"github.com/couponlink/couponlink/inventory"
)

// fixCounter corrects one pair's counters by the error found at the
// compared position (want − read), in one transaction with a correction_log
// row per field. The correction is relative: deltas the cdc applied after
// that position stay, so a busy row is fixed without waiting for it to be
// quiet. It reports false when the row vanished meanwhile.
func (r *Reconciler) fixCounter(ctx context.Context, taskID int64, p inventory.Pair, read inventory.Counter, have bool, want inventory.Counts, stamp int64) (bool, error) {
	vanished, recorded := false, 0
	err := r.retries.Run(ctx, r.db, "counter", func(tx *sql.Tx) error {
		vanished, recorded = false, 0 // a run again starts over
		var cur inventory.Counter
		err := tx.QueryRowContext(ctx, `SELECT held, used, expired, returned, released, stamp FROM inventory_counter
			WHERE template_id = ? AND channel = ? FOR UPDATE`, p.Template, p.Channel).
			Scan(&cur.Held, &cur.Used, &cur.Expired, &cur.Returned, &cur.Released, &cur.Stamp)
		found := err == nil
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("lock counters %d/%s: %w", p.Template, p.Channel, err)
		}
		if have && !found {
			vanished = true
			return nil
		}
		old, exp := fieldsOf(read.Counts), fieldsOf(want)
		if found {
			_, err = tx.ExecContext(ctx, `UPDATE inventory_counter SET held = held + ?, used = used + ?, expired = expired + ?,
				returned = returned + ?, released = released + ? WHERE template_id = ? AND channel = ?`,
				exp[0]-old[0], exp[1]-old[1], exp[2]-old[2], exp[3]-old[3], exp[4]-old[4], p.Template, p.Channel)
		} else {
			_, err = tx.ExecContext(ctx, `INSERT INTO inventory_counter (template_id, channel, held, used, expired, returned, released, stamp)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, p.Template, p.Channel, want.Held, want.Used, want.Expired, want.Returned, want.Released, stamp)
		}
		if err != nil {
			return fmt.Errorf("correct counters %d/%s: %w", p.Template, p.Channel, err)
		}
		for i, f := range counterFields {
			if old[i] == exp[i] && (have || exp[i] == 0) {
				continue // not a difference (as in compareCounters): nothing to record
			}
			var o *int64
			if have {
				o = ptr(old[i])
			}
			if err := r.record(ctx, tx, taskID, StoreCounter, fmt.Sprintf("%d/%s/%s", p.Template, p.Channel, f), o, exp[i],
				"inventory_counter differed from user_coupon at the compared position; corrected by the difference"); err != nil {
				return err
			}
			recorded++
		}
		return nil
	})
	r.corrected(StoreCounter, p.Template, p.Channel, recorded, err)
	return !vanished && err == nil, err
}

// fixTemplate recomputes coupon_template's cached counts from the counters
// (corrected first, so equal to the truth), as the cdc does in each batch.
func (r *Reconciler) fixTemplate(ctx context.Context, taskID, id int64, read, want inventory.TemplateCache) (bool, error) {
	recorded := 0
	err := r.retries.Run(ctx, r.db, "template", func(tx *sql.Tx) error {
		recorded = 0 // a run again starts over
		// the counters first, then the template: the cdc's lock order
		if _, err := tx.ExecContext(ctx, `SELECT template_id FROM inventory_counter WHERE template_id = ? FOR UPDATE`, id); err != nil {
			return fmt.Errorf("lock counters of template %d: %w", id, err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE coupon_template t LEFT JOIN (
				SELECT template_id, SUM(held + used + expired + returned) AS issued, SUM(used) AS used, SUM(expired) AS expired
				FROM inventory_counter WHERE template_id = ? GROUP BY template_id) v ON v.template_id = t.id
			SET t.issued_count = COALESCE(v.issued, 0), t.used_count = COALESCE(v.used, 0), t.expired_count = COALESCE(v.expired, 0)
			WHERE t.id = ?`, id, id); err != nil {
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
				"coupon_template's cached count differed from user_coupon at the compared position"); err != nil {
				return err
			}
			recorded++
		}
		return nil
	})
	r.corrected(StoreTemplate, id, "", recorded, err)
	return err == nil, err
}

// corrected counts the corrections of a transaction that committed (err
// nil): those of a run that rolled back are not.
func (r *Reconciler) corrected(store string, tpl int64, channel string, n int, err error) {
	if err == nil && n > 0 {
		r.m.corrected.WithLabelValues(store, strconv.FormatInt(tpl, 10), channel).Add(float64(n))
	}
}

// record writes one correction (the caller counts it: corrected).
// UNIQUE(task, store, target) makes a second run of the same task write
// nothing new.
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
	return nil
}

// fixedBefore lists the targets the previous pass corrected automatically:
// wrong again now means the fix does not hold, and a person must look. (On
// the first source's server, the cross-source step's tasks are not the
// source's passes: they are passed over.)
func (r *Reconciler) fixedBefore(ctx context.Context, taskID int64) (map[string]bool, error) {
	out := map[string]bool{}
	var prev sql.NullInt64
	if err := r.db.QueryRowContext(ctx, `SELECT MAX(id) FROM reconcile_task WHERE id < ? AND finished_at IS NOT NULL
		AND COALESCE(summary, '') NOT LIKE ?`, taskID, AllSources+": %").Scan(&prev); err != nil {
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
