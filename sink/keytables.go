package sink

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/couponlink/couponlink/internal/sqltx"
)

// The cdc's check tables (cdc_redemption_key, cdc_pending_redemption,
// cdc_order_key, cdc_user_claim, cdc_template_state) are keyed by the
// checkpoint's name and a small key; these write and pick their rows.

// idKey is the key of a row of the cdc's check tables beside the
// checkpoint's name: an id and a string (a coupon and an order, a template
// and a user).
type idKey interface {
	comparable
	parts() (int64, string)
}

// keysWhere is the condition that picks the rows of keys by their columns
// (the id's, the string's), and its arguments: the id list gives the
// primary key's range, the pairs pick the rows.
func keysWhere[K idKey](cols [2]string, keys []K) (string, []any) {
	ids := make([]any, len(keys))
	pairs := make([]any, 0, 2*len(keys))
	for i, k := range keys {
		id, str := k.parts()
		ids[i] = id
		pairs = append(pairs, id, str)
	}
	return cols[0] + ` IN (` + sqltx.Placeholders(len(keys)) + `) AND (` + cols[0] + `, ` + cols[1] + `) IN (` +
		strings.TrimSuffix(strings.Repeat("(?, ?), ", len(keys)), ", ") + `)`, append(ids, pairs...)
}

// deleteKeys deletes the checkpoint's (name) rows of the keys from table
// (cdc_pending_redemption, cdc_redemption_key, cdc_order_key, cdc_user_claim), whose key
// columns are cols, in tx.
func deleteKeys[K idKey](ctx context.Context, tx *sql.Tx, name, table string, cols [2]string, keys []K) error {
	for start := 0; start < len(keys); start += 500 {
		where, args := keysWhere(cols, keys[start:min(start+500, len(keys))])
		if _, err := tx.ExecContext(ctx, `DELETE FROM `+table+` WHERE name = ? AND `+where, append([]any{name}, args...)...); err != nil {
			return fmt.Errorf("delete from %s: %w", table, err)
		}
	}
	return nil
}

// rowInserter inserts rows of cols values in tx, a thousand rows per
// statement: head (INSERT INTO ... VALUES), the rows, tail.
type rowInserter struct {
	tx               *sql.Tx
	head, tail, what string
	cols             int
	args             []any
}

func (w *rowInserter) add(ctx context.Context, values ...any) error {
	w.args = append(w.args, values...)
	if len(w.args) >= 1000*w.cols {
		return w.flush(ctx)
	}
	return nil
}

// flush inserts the rows added since the last flush.
func (w *rowInserter) flush(ctx context.Context) error {
	if len(w.args) == 0 {
		return nil
	}
	row := "(" + strings.TrimSuffix(strings.Repeat("?, ", w.cols), ", ") + "), "
	_, err := w.tx.ExecContext(ctx, w.head+strings.TrimSuffix(strings.Repeat(row, len(w.args)/w.cols), ", ")+w.tail, w.args...)
	w.args = w.args[:0]
	if err != nil {
		return fmt.Errorf("%s: %w", w.what, err)
	}
	return nil
}

// addCounts adds to out the rows of query, each an id, a string and a
// count, by the key they make; what names the read in its errors.
func addCounts[K comparable](ctx context.Context, tx *sql.Tx, what, query string, args []any, key func(int64, string) K, out map[K]int64) error {
	err := sqltx.EachRow(ctx, tx, query, args, func(rows *sql.Rows) error {
		var id, n int64
		var str string
		if err := rows.Scan(&id, &str, &n); err != nil {
			return err
		}
		out[key(id, str)] = n
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}
