package sqltx

import (
	"context"
	"database/sql"
	"strings"
	"unicode/utf8"
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

// Map runs query and reads each row into a map with scan, as a key and
// its value; a later row with a key already read replaces its value.
func Map[K comparable, V any](ctx context.Context, q Querier, query string, args []any, scan func(*sql.Rows) (K, V, error)) (map[K]V, error) {
	out := map[K]V{}
	err := EachRow(ctx, q, query, args, func(rows *sql.Rows) error {
		k, v, err := scan(rows)
		if err != nil {
			return err
		}
		out[k] = v
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// KeyValue scans a row of two columns as a key and its value: Map's scan
// for a query of (key, value) rows.
func KeyValue[K comparable, V any](rows *sql.Rows) (k K, v V, err error) {
	err = rows.Scan(&k, &v)
	return k, v, err
}

// List runs query and reads each row into a slice with scan, in the
// query's order.
func List[T any](ctx context.Context, q Querier, query string, args []any, scan func(*sql.Rows) (T, error)) ([]T, error) {
	var out []T
	err := EachRow(ctx, q, query, args, func(rows *sql.Rows) error {
		v, err := scan(rows)
		if err != nil {
			return err
		}
		out = append(out, v)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Placeholders is n question marks for an IN list: "?, ?, ?".
func Placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

// Clip cuts s to at most n bytes, at a character boundary: a column of
// utf8mb4 refuses half a character.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Int64Args are the ids as query arguments.
func Int64Args(ids []int64) []any {
	out := make([]any, len(ids))
	for i, x := range ids {
		out[i] = x
	}
	return out
}
