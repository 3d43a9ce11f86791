package reconcile

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/couponlink/couponlink/api"
	"github.com/couponlink/couponlink/internal/sqltx"
)

// Pass is one reconcile_task row as operators read it: when it ran, what
// it found, and, for one that needed review, who resolved it and how.
type Pass = api.ReconcilePass

// RecentPasses is the last limit passes (at most 200), newest first.
func RecentPasses(ctx context.Context, db *sql.DB, limit int) ([]Pass, error) {
	limit = min(max(limit, 1), 200)
	out := []Pass{}
	err := sqltx.EachRow(ctx, db, `SELECT id, started_at, finished_at, status, COALESCE(summary, ''), COALESCE(binlog_file, ''),
		COALESCE(binlog_pos, 0), resolved_at, COALESCE(resolved_by, ''), COALESCE(resolved_on_behalf_of, ''), COALESCE(resolved_note, '')
		FROM reconcile_task ORDER BY id DESC LIMIT ?`, []any{limit}, func(rows *sql.Rows) error {
		var p Pass
		var finished, resolved sql.NullTime
		var file string
		var pos int64
		if err := rows.Scan(&p.TaskID, &p.StartedAt, &finished, &p.Status, &p.Summary, &file, &pos, &resolved,
			&p.ResolvedBy, &p.ResolvedOnBehalfOf, &p.ResolvedNote); err != nil {
			return err
		}
		if finished.Valid {
			p.FinishedAt = &finished.Time
		}
		if resolved.Valid {
			p.ResolvedAt = &resolved.Time
		}
		if file != "" {
			p.Position = fmt.Sprintf("%s:%d", file, pos)
		}
		out = append(out, p)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read reconcile passes: %w", err)
	}
	return out, corrected(ctx, db, out)
}

// corrected fills each pass's Corrected from its correction_log rows: a
// row a value, but a claimed set's row of unlisted members counts them
// all (|new - old| is their number; 1 for a listed member).
func corrected(ctx context.Context, db *sql.DB, passes []Pass) error {
	if len(passes) == 0 {
		return nil
	}
	at := make(map[int64]*Pass, len(passes))
	ids := make([]int64, len(passes))
	for i := range passes {
		at[passes[i].TaskID], ids[i] = &passes[i], passes[i].TaskID
	}
	err := sqltx.EachRow(ctx, db, `SELECT task_id, store, SUM(CASE WHEN store = ? THEN ABS(new_value - old_value) ELSE 1 END)
		FROM correction_log WHERE task_id IN (`+sqltx.Placeholders(len(ids))+`) GROUP BY task_id, store`,
		append([]any{StoreClaimedUsers}, sqltx.Int64Args(ids)...), func(rows *sql.Rows) error {
			var task, n int64
			var store string
			if err := rows.Scan(&task, &store, &n); err != nil {
				return err
			}
			p := at[task]
			if p.Corrected == nil {
				p.Corrected = map[string]int64{}
			}
			p.Corrected[store] = n
			return nil
		})
	if err != nil {
		return fmt.Errorf("read the passes' corrections: %w", err)
	}
	return nil
}
