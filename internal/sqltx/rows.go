package sqltx

import (
	"context"
	"database/sql"
	"strings"
)

// Querier is a *sql.DB, a *sql.Tx or a *sql.Conn.
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// EachRow runs query and hands each row to fn, stopping at fn's first error.
func EachRow(ctx context.Context, q Querier, query string, args []any, fn func(*sql.Rows) error) error {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// Placeholders is n question marks for an IN list: "?, ?, ?".
func Placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

// Int64Args are the ids as query arguments.
func Int64Args(ids []int64) []any {
	out := make([]any, len(ids))
	for i, x := range ids {
		out[i] = x
	}
	return out
}
