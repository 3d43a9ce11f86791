package sqltx_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/internal/sqltx"
	"github.com/couponlink/couponlink/internal/testenv"
)

func TestRunCommitsOrRollsBack(t *testing.T) {
	db, _ := testenv.MySQL(t)
	ctx := context.Background()
	_, err := db.Exec(`CREATE TABLE t (id INT PRIMARY KEY)`)
	require.NoError(t, err)
	require.NoError(t, sqltx.Run(ctx, db, nil, func(tx *sql.Tx) error {
		_, err := tx.Exec(`INSERT INTO t VALUES (1)`)
		return err
	}))
	boom := errors.New("boom")
	require.ErrorIs(t, sqltx.Run(ctx, db, nil, func(tx *sql.Tx) error {
		if _, err := tx.Exec(`INSERT INTO t VALUES (2)`); err != nil {
			return err
		}
		return boom
	}), boom)
	var n int
	require.NoError(t, db.QueryRow(`SELECT COUNT(*) FROM t`).Scan(&n))
	require.Equal(t, 1, n, "the failed transaction's row was rolled back")
}

func TestRetryOnlyWhatIsRetryable(t *testing.T) {
	db, _ := testenv.MySQL(t)
	ctx := context.Background()
	deadlock := &mysql.MySQLError{Number: 1213, Message: "Deadlock found"}
	runs := 0
	err := sqltx.Retry(ctx, db, 3, sqltx.Deadlock, func(*sql.Tx) error { runs++; return deadlock })
	require.ErrorIs(t, err, deadlock)
	require.Equal(t, 3, runs, "a deadlock runs again, up to the attempts")

	runs = 0
	err = sqltx.Retry(ctx, db, 3, sqltx.Deadlock, func(*sql.Tx) error {
		runs++
		if runs < 2 {
			return deadlock
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, 2, runs)

	runs = 0
	other := errors.New("not a race")
	require.ErrorIs(t, sqltx.Retry(ctx, db, 3, sqltx.Deadlock, func(*sql.Tx) error { runs++; return other }), other)
	require.Equal(t, 1, runs, "other errors are not retried")
	require.False(t, sqltx.Deadlock(&mysql.MySQLError{Number: 1062}))
	require.True(t, sqltx.Deadlock(&mysql.MySQLError{Number: 1205}))
}

func TestRetryDeadlocksCountsAndGivesUp(t *testing.T) {
	db, _ := testenv.MySQL(t)
	ctx := context.Background()
	deadlock := &mysql.MySQLError{Number: 1213, Message: "Deadlock found"}
	timeout := &mysql.MySQLError{Number: 1205, Message: "Lock wait timeout exceeded"}
	var reasons []string
	runs := 0
	err := sqltx.RetryDeadlocks(ctx, db, nil, func(err error) { reasons = append(reasons, sqltx.Reason(err)) }, func(*sql.Tx) error {
		runs++
		switch runs {
		case 1:
			return deadlock
		case 2:
			return fmt.Errorf("wrapped: %w", timeout)
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, 3, runs)
	require.Equal(t, []string{"deadlock", "lock_wait_timeout"}, reasons)

	runs = 0
	err = sqltx.RetryDeadlocks(ctx, db, nil, nil, func(*sql.Tx) error { runs++; return deadlock })
	require.ErrorIs(t, err, deadlock)
	require.Equal(t, sqltx.DeadlockAttempts, runs, "a transaction that keeps losing gives up")

	cctx, cancel := context.WithCancel(ctx)
	runs = 0
	err = sqltx.RetryDeadlocks(cctx, db, nil, func(error) { cancel() }, func(*sql.Tx) error { runs++; return deadlock })
	require.ErrorIs(t, err, context.Canceled, "the wait before a run again ends with ctx")
	require.Equal(t, 1, runs)
	require.Empty(t, sqltx.Reason(errors.New("other")))
}

func TestNewRetriesSharesTheMetric(t *testing.T) {
	reg := prometheus.NewRegistry()
	quiet := slog.New(slog.DiscardHandler)
	sqltx.NewRetries(reg, quiet, "batch")
	sqltx.NewRetries(reg, quiet, "counter") // a second part of the process: the same metric
	n, err := testutil.GatherAndCount(reg, "couponlink_tx_retries_total")
	require.NoError(t, err)
	require.Equal(t, 4, n, "a zero series per transaction and reason")
}

func TestMapAndList(t *testing.T) {
	db, _ := testenv.MySQL(t)
	ctx := context.Background()
	_, err := db.Exec(`CREATE TABLE kv (k VARCHAR(8) PRIMARY KEY, v INT)`)
	require.NoError(t, err)
	_, err = db.Exec(`INSERT INTO kv VALUES ('a', 1), ('b', 2)`)
	require.NoError(t, err)
	m, err := sqltx.Map(ctx, db, `SELECT k, v FROM kv`, nil, sqltx.KeyValue[string, int64])
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"a": 1, "b": 2}, m)
	m, err = sqltx.Map(ctx, db, `SELECT k, v FROM kv WHERE v > ?`, []any{5}, sqltx.KeyValue[string, int64])
	require.NoError(t, err)
	require.NotNil(t, m, "no rows: an empty map")
	l, err := sqltx.List(ctx, db, `SELECT k FROM kv ORDER BY v DESC`, nil, func(rows *sql.Rows) (k string, err error) {
		err = rows.Scan(&k)
		return k, err
	})
	require.NoError(t, err)
	require.Equal(t, []string{"b", "a"}, l)
	_, err = sqltx.Map(ctx, db, `SELECT k FROM kv`, nil, sqltx.KeyValue[string, int64])
	require.Error(t, err, "a scan error is the result's")
}
