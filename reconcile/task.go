package reconcile

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/couponlink/couponlink/api"
	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/internal/sqltx"
	"github.com/couponlink/couponlink/webhook"
)

// Task statuses (reconcile_task.status), and the runs metric's results.
const (
	resultClean       = "clean"
	resultAutoFixed   = "auto_fixed"
	resultNeedsReview = "needs_review"
	resultError       = "error"
	statusRunning     = "running"
)

func (r *Reconciler) startTask(ctx context.Context, at time.Time) (int64, error) {
	res, err := r.db.ExecContext(ctx, `INSERT INTO reconcile_task (started_at, status) VALUES (?, ?)`, at.UTC(), statusRunning)
	if err != nil {
		return 0, fmt.Errorf("record reconcile task: %w", err)
	}
	return res.LastInsertId()
}

func (r *Reconciler) finishTask(ctx context.Context, rep *Report, mysqlSnap, redisSnap any) error {
	ms, _ := json.Marshal(mysqlSnap)
	rs, _ := json.Marshal(redisSnap)
	diffs := rep.Differences
	if diffs == nil {
		diffs = []Difference{}
	}
	ds, _ := json.Marshal(diffs)
	summary := sqltx.Clip(rep.Summary(), 512)
	// the task's record and its events commit together: the
	// reconcile.needs_review event exists if and only if the task says
	// needs_review, the reconcile.corrected one if it corrected something
	err := r.retries.Run(ctx, r.db, "task", func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `UPDATE reconcile_task SET finished_at = ?, binlog_file = ?, binlog_pos = ?, gtid_set = ?,
			mysql_snapshot = ?, redis_snapshot = ?, differences = ?, status = ?, summary = ? WHERE id = ?`,
			rep.Finished.UTC(), rep.Position.File, rep.Position.Pos, rep.Position.GTID, string(ms), string(rs), string(ds),
			rep.Status, summary, rep.TaskID); err != nil {
			return err
		}
		return webhook.Enqueue(ctx, tx, append(r.reviewEvents(rep, summary), r.correctedEvents(rep)...)...)
	})
	if err != nil {
		return fmt.Errorf("finish reconcile task %d: %w", rep.TaskID, err)
	}
	return nil
}

// reviewSample is how many differences a reconcile.needs_review event
// carries (the task row has them all).
const reviewSample = 10

// reviewEvents is the reconcile.needs_review event of a pass that left
// differences for a person, when Events is on; none otherwise.
func (r *Reconciler) reviewEvents(rep *Report, summary string) []webhook.Event {
	if !r.cfg.Events || rep.Status != resultNeedsReview {
		return nil
	}
	var sample []Difference
	n := 0
	for _, d := range rep.Differences {
		if !forPerson(d) {
			continue
		}
		n++
		if len(sample) < reviewSample {
			sample = append(sample, d)
		}
	}
	return []webhook.Event{{Type: webhook.ReconcileReview, Time: rep.Finished, Data: map[string]any{
		"task": rep.TaskID, "source": rep.Source, "summary": summary, "differences": n, "sample": sample,
		"binlog": rep.Position.String(), "checkpoint": rep.Checkpoint.String()}}}
}

// OpenItem is a task that needs a person.
type OpenItem = api.ReconcileOpenItem

// ListOpen returns the tasks that need review and are not resolved, oldest first.
func ListOpen(ctx context.Context, db *sql.DB) ([]OpenItem, error) {
	out, err := sqltx.List(ctx, db, `SELECT id, started_at, COALESCE(summary, ''), COALESCE(differences, '[]') FROM reconcile_task
		WHERE status = ? AND resolved_at IS NULL ORDER BY id`, []any{resultNeedsReview}, func(rows *sql.Rows) (OpenItem, error) {
		var it OpenItem
		var diffs string
		if err := rows.Scan(&it.TaskID, &it.StartedAt, &it.Summary, &diffs); err != nil {
			return it, err
		}
		var all []Difference
		if err := json.Unmarshal([]byte(diffs), &all); err != nil {
			return it, fmt.Errorf("task %d: read differences: %w", it.TaskID, err)
		}
		for _, d := range all {
			if forPerson(d) {
				it.Differences = append(it.Differences, d)
			}
		}
		return it, nil
	})
	if err != nil {
		return nil, fmt.Errorf("list open reconcile tasks: %w", err)
	}
	return out, nil
}

// ErrNotOpen means the task does not exist, does not need review, or was resolved.
var ErrNotOpen = errors.New("no open reconcile task with that id")

// Resolve closes a task that needed review, with a note and a record in
// correction_log (mode manual). identity is the name of the token that
// sent the request ("" for none): with one, the rows record it, and who,
// when another name, as the one it acts for (coupon.Acting).
func Resolve(ctx context.Context, db *sql.DB, id int64, who, note, identity string) error {
	if note == "" {
		return errors.New("a note is required: say what was checked or done")
	}
	who, behalf := coupon.Acting(who, identity)
	onBehalfOf := sql.NullString{String: behalf, Valid: behalf != ""}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `UPDATE reconcile_task SET resolved_at = ?, resolved_by = ?, resolved_on_behalf_of = ?, resolved_note = ?
		WHERE id = ? AND status = ? AND resolved_at IS NULL`, time.Now().UTC(), who, onBehalfOf, note, id, resultNeedsReview)
	if err != nil {
		return fmt.Errorf("resolve task %d: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("resolve task %d: %w", id, err)
	} else if n == 0 {
		return fmt.Errorf("task %d: %w", id, ErrNotOpen)
	}
	reason := sqltx.Clip(note, 255)
	if _, err := tx.ExecContext(ctx, `INSERT INTO correction_log (task_id, store, target, reason, mode, actor, on_behalf_of)
		VALUES (?, 'task', 'resolved', ?, 'manual', ?, ?)`, id, reason, who, onBehalfOf); err != nil {
		return fmt.Errorf("record resolution of task %d: %w", id, err)
	}
	return tx.Commit()
}

// countOpen sets the needs_review gauge: the open tasks on its server (on
// the first source's, the cross-source step's and the source's own are
// counted apart, as their gauges have their own source label).
func (r *Reconciler) countOpen(ctx context.Context) {
	var n int
	not := "NOT "
	if r.sum != nil {
		not = ""
	}
	if err := r.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM reconcile_task WHERE status = ? AND resolved_at IS NULL
		AND COALESCE(summary, '') `+not+`LIKE ?`, resultNeedsReview, AllSources+": %").Scan(&n); err == nil {
		r.m.needsReview.Set(float64(n))
	}
}

// lock makes passes on one database take turns (their corrections are
// relative, so two at once could apply one twice).
func (r *Reconciler) lock(ctx context.Context) (func(), error) {
	conn, err := r.db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("reconcile lock: %w", err)
	}
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(CONCAT('couponlink_reconcile:', DATABASE()), ?)",
		int(r.cfg.CatchUpWait/time.Second)).Scan(&got); err != nil {
		conn.Close()
		return nil, fmt.Errorf("reconcile lock: %w", err)
	}
	if got.Int64 != 1 {
		conn.Close()
		return nil, errors.New("another reconcile pass is running on this database; try again when it is done")
	}
	return func() {
		_, _ = conn.ExecContext(context.WithoutCancel(ctx), "DO RELEASE_LOCK(CONCAT('couponlink_reconcile:', DATABASE()))")
		conn.Close()
	}, nil
}
