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
	return out, nil
}
