// Package sqltx runs a function in a MySQL transaction: once, or again
// while the transaction lost a race MySQL asks the client to retry; and
// reads a query's rows one at a time, into a map or into a slice (rows.go).
package sqltx

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Run runs fn in one transaction (opts may be nil), committing when fn
// returns nil and rolling back otherwise.
func Run(ctx context.Context, db *sql.DB, opts *sql.TxOptions, fn func(*sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, opts)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// Retry runs Run up to attempts times while its error is one that
// retryable accepts (Deadlock, for most callers) and ctx is not done.
func Retry(ctx context.Context, db *sql.DB, attempts int, retryable func(error) bool, fn func(*sql.Tx) error) error {
	return retrying{Attempts: attempts, Retryable: retryable}.Run(ctx, db, fn)
}

// DeadlockAttempts is how many times RetryDeadlocks runs a transaction at
// most; DeadlockBackoff the wait before its second run, doubling with each
// further run (jittered: between half and one and a half of it).
const (
	DeadlockAttempts = 5
	DeadlockBackoff  = 10 * time.Millisecond
)

// RetryDeadlocks runs Run (opts may be nil) up to DeadlockAttempts times
// while it fails with a deadlock or a lock wait timeout (Deadlock) and ctx
// is not done, after a short jittered wait; retried, when set, is called
// with the error of each run that runs again (Reason names it, for a metric).
// fn must start from scratch at each run: what a failed run changed in
// memory is the caller's to put back.
func RetryDeadlocks(ctx context.Context, db *sql.DB, opts *sql.TxOptions, retried func(error), fn func(*sql.Tx) error) error {
	return retrying{Attempts: DeadlockAttempts, Retryable: Deadlock, Backoff: DeadlockBackoff, Options: opts, Retried: retried}.Run(ctx, db, fn)
}

// retrying is how a transaction runs again after a race it lost.
type retrying struct {
	Attempts  int              // at most this many runs (at least one)
	Retryable func(error) bool // the errors worth another run
	Backoff   time.Duration    // the first wait between two runs, doubling (jittered); 0: none
	Options   *sql.TxOptions   // may be nil
	Retried   func(error)      // when set, called with each error run again
}

// Run runs fn in a transaction until it commits, fails with an error
// Retryable refuses, ctx ends, or the attempts are spent.
func (r retrying) Run(ctx context.Context, db *sql.DB, fn func(*sql.Tx) error) error {
	wait := r.Backoff
	for n := 1; ; n++ {
		err := Run(ctx, db, r.Options, fn)
		if err == nil || !r.Retryable(err) || ctx.Err() != nil || n >= r.Attempts {
			return err
		}
		if r.Retried != nil {
			r.Retried(err)
		}
		if wait > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(wait/2 + rand.N(wait)): // jittered: half to one and a half of it
			}
			wait *= 2
		}
	}
}

// Deadlock reports whether err is a deadlock (1213) or a lock wait timeout
// (1205): the transaction was rolled back and may simply run again.
func Deadlock(err error) bool { return Reason(err) != "" }

// Reason names a retryable race for a metric: "deadlock" (1213),
// "lock_wait_timeout" (1205), or "" for any other error.
func Reason(err error) string {
	var me *mysql.MySQLError
	switch {
	case !errors.As(err, &me):
		return ""
	case me.Number == 1213:
		return "deadlock"
	case me.Number == 1205:
		return "lock_wait_timeout"
	}
	return ""
}
