// Package sqltx runs a function in a MySQL transaction: once, or again
// while the transaction lost a race MySQL asks the client to retry.
package sqltx

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

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
	var err error
	for range max(attempts, 1) {
		if err = Run(ctx, db, nil, fn); err == nil || !retryable(err) || ctx.Err() != nil {
			return err
		}
	}
	return err
}

// Deadlock reports whether err is a deadlock (1213) or a lock wait timeout
// (1205): the transaction was rolled back and may simply run again.
func Deadlock(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && (me.Number == 1213 || me.Number == 1205)
}
