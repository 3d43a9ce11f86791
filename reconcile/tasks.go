package reconcile

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/couponlink/couponlink/internal/sqltx"
)

// Pass is one reconcile_task row as operators read it: when it ran, what
// it found, and, for one that needed review, who resolved it and how.
type Pass struct {
	TaskID       int64      `json:"task_id"`
	StartedAt    time.Time  `json:"started_at"`
	FinishedAt   *time.Time `json:"finished_at"`
	Status       string     `json:"status"` // running, clean, auto_fixed, needs_review, error
	Summary      string     `json:"summary"`
	Position     string     `json:"position,omitempty"` // the binlog position the pass compared at
	ResolvedAt   *time.Time `json:"resolved_at,omitempty"`
	ResolvedBy   string     `json:"resolved_by,omitempty"`
	ResolvedNote string     `json:"resolved_note,omitempty"`
}

// RecentPasses is the last limit passes (at most 200), newest first.
func RecentPasses(ctx context.Context, db *sql.DB, limit int) ([]Pass, error) {
	limit = min(max(limit, 1), 200)
	out := []Pass{}
	err := sqltx.EachRow(ctx, db, `SELECT id, started_at, finished_at, status, COALESCE(summary, ''), COALESCE(binlog_file, ''),
		COALESCE(binlog_pos, 0), resolved_at, COALESCE(resolved_by, ''), COALESCE(resolved_note, '')
		FROM reconcile_task ORDER BY id DESC LIMIT ?`, []any{limit}, func(rows *sql.Rows) error {
		var p Pass
		var finished, resolved sql.NullTime
		var file string
		var pos int64
		if err := rows.Scan(&p.TaskID, &p.StartedAt, &finished, &p.Status, &p.Summary, &file, &pos, &resolved,
			&p.ResolvedBy, &p.ResolvedNote); err != nil {
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
