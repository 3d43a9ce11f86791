package sink

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"
)

// Group commit at steady load: the tailer hands the sink whatever arrived
// while the previous batch was applied (canal's batcher), so a busy sink
// applies many source transactions in one MySQL transaction, and an idle
// one applies a lone transaction at once. What one batch transaction
// costs in round trips to MySQL:
//
//   - BEGIN;
//   - what the checks write (nothing, for most batches of the reference
//     schema), the anomalies, the releases, the events: one statement
//     each, only when they have something to write;
//   - the counters, the template counts and the checkpoint: kept for the
//     end of the transaction (the tail) and sent together — one round trip
//     when the pool allows several statements in one query
//     (multiStatements, which `couponlink cdc` opens its pool with), else
//     one statement each;
//   - COMMIT.
//
// Then, in Redis owner mode, one pipelined write of the stock keys of the
// templates whose buckets the batch changed (none when it changed only
// coupons: a stock key is quota − claimed of channel_quota).

// statement is one SQL statement and its arguments; what names it in an
// error.
type statement struct {
	what  string
	query string
	args  []any
}

// exec runs st in tx; its error names st.
func (st statement) exec(ctx context.Context, tx *sql.Tx) (sql.Result, error) {
	res, err := tx.ExecContext(ctx, st.query, st.args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", st.what, err)
	}
	return res, nil
}

// execTail runs the statements in tx, in order: in one round trip when
// the connection takes several statements in one query (s.multi), else one
// by one. It returns the result of the last one (its rows affected: the
// checkpoint's fence).
func (s *Sink) execTail(ctx context.Context, tx *sql.Tx, sts []statement) (sql.Result, error) {
	if s.multi && len(sts) > 1 {
		var q strings.Builder
		var args []any
		whats := make([]string, len(sts))
		for i, st := range sts {
			if i > 0 {
				q.WriteString(";\n")
			}
			q.WriteString(st.query)
			args = append(args, st.args...)
			whats[i] = st.what
		}
		res, err := tx.ExecContext(ctx, q.String(), args...)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", strings.Join(whats, ", "), err)
		}
		return res, nil
	}
	var res sql.Result
	for _, st := range sts {
		var err error
		if res, err = st.exec(ctx, tx); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// multiStatements reports whether db's connections take several
// statements in one query (the go-sql-driver DSN parameter
// multiStatements=true): MySQL refuses a second statement with a syntax
// error otherwise.
func multiStatements(ctx context.Context, db *sql.DB) (bool, error) {
	_, err := db.ExecContext(ctx, "DO 1; DO 1")
	var me *mysql.MySQLError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &me) && me.Number == 1064: // ER_PARSE_ERROR
		return false, nil
	}
	return false, fmt.Errorf("ask the server whether the pool takes several statements in one query: %w", err)
}
