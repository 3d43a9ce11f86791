package sqltx

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
)

// Retries runs a process's transactions with RetryDeadlocks, counting each
// run again in couponlink_tx_retries_total{tx, reason} and logging it.
type Retries struct {
	runs *prometheus.CounterVec
	log  *slog.Logger
}

// NewRetries registers couponlink_tx_retries_total on r (or takes the one
// registered there already: a process may run the cdc and the reconciler),
// with a zero series for each of txs (the transactions it runs again).
func NewRetries(r prometheus.Registerer, log *slog.Logger, txs ...string) *Retries {
	rs := &Retries{log: log, runs: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "couponlink_tx_retries_total", Help: "Transactions run again after a deadlock or a lock wait timeout with another writer of the outbox, the findings or the counters, by transaction (the cdc's batch and release, the reconciler's counter, template and task) and reason (deadlock, lock_wait_timeout); a transaction gives up after 5 runs.",
	}, []string{"tx", "reason"})}
	if err := r.Register(rs.runs); err != nil {
		var are prometheus.AlreadyRegisteredError
		existing, ok := rs.runs, false
		if errors.As(err, &are) {
			existing, ok = are.ExistingCollector.(*prometheus.CounterVec)
		}
		if !ok {
			panic(err) // as promauto does
		}
		rs.runs = existing
	}
	for _, tx := range txs {
		rs.runs.WithLabelValues(tx, "deadlock")
		rs.runs.WithLabelValues(tx, "lock_wait_timeout")
	}
	return rs
}

// Run runs fn in a transaction with RetryDeadlocks; tx names it.
func (rs *Retries) Run(ctx context.Context, db *sql.DB, tx string, fn func(*sql.Tx) error) error {
	return RetryDeadlocks(ctx, db, nil, func(err error) {
		rs.runs.WithLabelValues(tx, Reason(err)).Inc()
		rs.log.Warn("transaction lost a race with another writer; running it again", "tx", tx, "err", err)
	}, fn)
}
