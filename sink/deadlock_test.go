package sink_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/internal/cdcenv"
	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/sink"
	"github.com/couponlink/couponlink/webhook"
)

// A deadlock inside a batch's transaction (here a transaction of the
// test's own taking two rows in the opposite order, just before the
// batch's events are written) runs the transaction again: the batch
// commits, the tail does not restart (same epoch, no restart counted),
// couponlink_tx_retries_total counts the retry, and the counters, the
// checkpoint and the outbox are exact (the failed run left nothing).
func TestBatchDeadlockIsRetried(t *testing.T) {
	e := newEnv(t)
	_, err := e.DB.Exec(`CREATE TABLE deadlock_probe (id INT PRIMARY KEY)`)
	require.NoError(t, err)
	_, err = e.DB.Exec(`INSERT INTO deadlock_probe VALUES (1), (2)`)
	require.NoError(t, err)
	var armed atomic.Bool
	var deadlocks atomic.Int64
	var hookErr atomic.Value // the error the hook returned, for the messages below
	hookErr.Store("")
	c := e.StartCDC(nil, func(cfg *sink.Config, _ *sink.Daemon) {
		cfg.Webhooks = true
		sink.InBatchTx(cfg, func(ctx context.Context, tx *sql.Tx) error {
			if !armed.CompareAndSwap(true, false) {
				return nil
			}
			err := crossLocks(ctx, e.DB, tx)
			if err != nil {
				deadlocks.Add(1)
				hookErr.Store(err.Error())
			}
			return err
		})
	})
	w := &claimer{e: e, tpl: e.Template(map[string]int64{"app": 3, "web": 100, "sms": 100}, time.Hour)}
	w.claim(3)
	e.WaitCheckpoint()
	epoch := e.checkpoint().Epoch

	armed.Store(true)
	w.claim(6) // the third coupon of app sells it out
	e.assertTruth(true)
	require.False(t, armed.Load(), "no batch ran the deadlock")
	require.EqualValues(t, 1, deadlocks.Load(), "the batch's transaction was not the deadlock's victim")
	require.Contains(t, hookErr.Load(), "Deadlock found", "the hook's error")
	retries, _ := cdctest.Metric(t, c.Reg, "couponlink_tx_retries_total", map[string]string{"tx": "batch", "reason": "deadlock"})
	require.EqualValues(t, 1, retries, "couponlink_tx_retries_total{tx=batch,reason=deadlock}")
	require.Zero(t, cdctest.MetricSum(t, c.Reg, "couponlink_cdc_restarts_total"), "the tail restarted")
	require.EqualValues(t, 1, cdctest.MetricSum(t, c.Reg, "couponlink_cdc_leader_terms_total"))
	require.Equal(t, epoch, e.checkpoint().Epoch, "the deadlock took a new epoch")
	var events, distinct, soldOut int
	require.NoError(t, e.DB.QueryRow(`SELECT COUNT(*), COUNT(DISTINCT event, template_id, channel), SUM(event = ?) FROM webhook_outbox`,
		webhook.ChannelSoldOut).Scan(&events, &distinct, &soldOut))
	require.Equal(t, 1, soldOut, "channel.sold_out events in the outbox")
	require.Equal(t, distinct, events, "an event of the retried batch was written twice")
	require.Empty(t, e.anomalies())
}

// crossLocks makes tx the victim of a deadlock: another transaction, which
// weighs more (InnoDB rolls the lighter one back), holds probe row 1 and
// waits for row 2, which tx holds; then tx asks for row 1.
func crossLocks(ctx context.Context, db *sql.DB, tx *sql.Tx) error {
	other, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer other.Close()
	var id int64
	if err := other.QueryRowContext(ctx, `SELECT CONNECTION_ID()`).Scan(&id); err != nil {
		return err
	}
	rows := make([]string, 300)
	for i := range rows {
		rows[i] = fmt.Sprintf("(%d)", 100+i)
	}
	for _, q := range []string{`BEGIN`, `INSERT INTO deadlock_probe VALUES ` + strings.Join(rows, ", "),
		`SELECT id FROM deadlock_probe WHERE id = 1 FOR UPDATE`} {
		if _, err := other.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("probe %q: %w", q, err)
		}
	}
	defer other.ExecContext(context.WithoutCancel(ctx), `ROLLBACK`) //nolint:errcheck
	if _, err := tx.ExecContext(ctx, `SELECT id FROM deadlock_probe WHERE id = 2 FOR UPDATE`); err != nil {
		return err
	}
	waited := make(chan error, 1)
	go func() {
		_, err := other.ExecContext(ctx, `SELECT id FROM deadlock_probe WHERE id = 2 FOR UPDATE`)
		waited <- err
	}()
	// Wait until the other transaction waits for row 2, polling gently:
	// a tight loop of queries starves the very server thread it waits
	// for on a loaded machine (seconds, in CI).
	deadline := time.Now().Add(30 * time.Second)
	for waiting := 0; waiting == 0; {
		select {
		case err := <-waited:
			return fmt.Errorf("probe: the other transaction's lock request returned before it waited: %v", err)
		case <-time.After(2 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return errors.New("probe: the other transaction did not wait for row 2 within 30 s")
		}
		if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.INNODB_TRX
			WHERE trx_mysql_thread_id = ? AND trx_state = 'LOCK WAIT'`, id).Scan(&waiting); err != nil {
			return err
		}
	}
	_, err = tx.ExecContext(ctx, `SELECT id FROM deadlock_probe WHERE id = 1 FOR UPDATE`)
	return errors.Join(err, <-waited)
}

// One epoch per takeover: a batch that fails (an error no retry cures)
// starts the tail over under the same epoch, counted in
// couponlink_cdc_restarts_total{reason="error"}; a lock whose connection
// was killed is taken again under a new epoch (reason lock_lost); a
// standby taking over takes one more. The epoch grows by exactly the
// takeovers and the counters stay exact.
func TestEpochPerTakeover(t *testing.T) {
	e := newEnv(t)
	var fail atomic.Bool
	cdc := func(name string) *cdcenv.CDC {
		return e.StartCDC(nil, leaderNamed(name), func(cfg *sink.Config, _ *sink.Daemon) {
			sink.InBatchTx(cfg, func(context.Context, *sql.Tx) error {
				if fail.CompareAndSwap(true, false) {
					return errors.New("a batch failure (test)")
				}
				return nil
			})
		})
	}
	a := cdc("cdc-a")
	w := &claimer{e: e, tpl: e.Template(map[string]int64{"app": 100, "web": 100, "sms": 100}, time.Hour)}
	w.claim(5)
	e.WaitCheckpoint()
	start := e.checkpoint().Epoch
	restarts := func(c *cdcenv.CDC, reason string) float64 {
		v, _ := cdctest.Metric(t, c.Reg, "couponlink_cdc_restarts_total", map[string]string{"reason": reason})
		return v
	}
	terms := func(c *cdcenv.CDC) float64 { return cdctest.MetricSum(t, c.Reg, "couponlink_cdc_leader_terms_total") }

	fail.Store(true)
	w.claim(5)
	cdctest.WaitFor(t, 30*time.Second, "the tail restarts after the failed batch", func() bool { return restarts(a, "error") == 1 })
	w.claim(5)
	e.assertTruth(true)
	require.Equal(t, start, e.checkpoint().Epoch, "a restart of the tail took a new epoch")
	require.EqualValues(t, 1, terms(a))

	var lockConn int64
	require.NoError(t, e.DB.QueryRow(`SELECT IS_USED_LOCK(CONCAT('couponlink_cdc:', DATABASE(), ':default'))`).Scan(&lockConn))
	_, err := e.DB.Exec(`KILL ?`, lockConn)
	require.NoError(t, err)
	cdctest.WaitFor(t, 30*time.Second, "the cdc takes the lock again", func() bool { return e.checkpoint().Epoch > start })
	w.claim(5)
	e.assertTruth(true)
	require.Equal(t, start+1, e.checkpoint().Epoch, "a lost lock is one takeover")
	require.EqualValues(t, 1, restarts(a, "lock_lost"))
	require.EqualValues(t, 2, terms(a))

	b := cdc("cdc-b")
	a.Stop(t)
	cdctest.WaitFor(t, 30*time.Second, "the standby takes over", func() bool { return e.checkpoint().Leader == "cdc-b" })
	w.claim(5)
	e.assertTruth(true)
	require.Equal(t, start+2, e.checkpoint().Epoch, "a standby's takeover is one more")
	require.EqualValues(t, 1, terms(b))
	require.Zero(t, cdctest.MetricSum(t, b.Reg, "couponlink_cdc_restarts_total"))
	require.Empty(t, e.anomalies())
}
