package chaos

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/inventory"
)

// waitFor polls cond every 50 ms until it holds, or returns an error naming
// what and the last state after within.
func waitFor(ctx context.Context, within time.Duration, what string, cond func() (bool, string)) error {
	deadline := time.Now().Add(within)
	for {
		ok, state := cond()
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not reached within %s (%s)", what, within, state)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond): // polling the condition
		}
	}
}

// caughtUp waits until the cdc's checkpoint reaches the server's binlog
// end as of the call.
func caughtUp(ctx context.Context, db *sql.DB, within time.Duration) error {
	var target canal.Position
	if err := waitFor(ctx, within, "read the server's binlog position", func() (bool, string) {
		var err error
		target, err = canal.CurrentPosition(ctx, db)
		return err == nil, fmt.Sprint(err)
	}); err != nil {
		return err
	}
	return waitFor(ctx, within, "the cdc's checkpoint reaches "+target.String(), func() (bool, string) {
		cp, found, err := inventory.LoadCheckpoint(ctx, db, "default")
		if err != nil || !found {
			return false, fmt.Sprintf("checkpoint found %v, err %v", found, err)
		}
		return cp.Pos.File != "" && cp.Pos.Compare(target) >= 0, "checkpoint at " + cp.Pos.String()
	})
}

// cdcWrites counts what the cdc writes on its own (releases, transfers):
// a quiet state is one where it does not move while the checks run.
func (cl *cluster) cdcWrites(ctx context.Context) (int64, error) {
	var n int64
	err := cl.db.QueryRowContext(ctx, `SELECT (SELECT COUNT(*) FROM inventory_flow WHERE kind = 'release') +
		(SELECT COUNT(*) FROM quota_transfer_log) + (SELECT COUNT(*) FROM webhook_outbox)`).Scan(&n)
	return n, err
}

// quiesce waits (every wait a condition with a bound) until the cdc has
// caught up, the webhook outbox is empty of pending events and the Redis
// keys follow the buckets, with no write of the cdc's own meanwhile.
func (cl *cluster) quiesce(ctx context.Context) error {
	cl.hooks.heal()
	if err := cl.apiC.waitHealthy(ctx, 2*time.Minute); err != nil {
		return err
	}
	for attempt := 1; attempt <= 10; attempt++ {
		before, err := cl.cdcWrites(ctx)
		if err != nil {
			return fmt.Errorf("count the cdc's writes: %w", err)
		}
		if err := caughtUp(ctx, cl.db, 3*time.Minute); err != nil {
			return err
		}
		if err := waitFor(ctx, 3*time.Minute, "every webhook event delivered", func() (bool, string) {
			var n int64
			err := cl.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM webhook_outbox WHERE status = 'pending'`).Scan(&n)
			return err == nil && n == 0, fmt.Sprintf("%d pending, err %v", n, err)
		}); err != nil {
			return err
		}
		_ = waitFor(ctx, 30*time.Second, "the Redis keys follow channel_quota", func() (bool, string) {
			rows, err := checkRedis(ctx, cl.db, cl.rdb, keyPrefix)
			return err == nil && len(rows) == 0, fmt.Sprint(len(rows), " keys off, err ", err)
		}) // keys still off are the check's to report
		after, err := cl.cdcWrites(ctx)
		if err != nil {
			return fmt.Errorf("count the cdc's writes: %w", err)
		}
		if after == before {
			return nil
		}
	}
	return errors.New("the cdc kept writing (releases, transfers, events) during 10 attempts to reach a quiet state")
}

// reconcileOnce runs `couponlink reconcile -once -no-fix` with extra args
// and returns its exit code and output.
func (cl *cluster) reconcileOnce(ctx context.Context, extra ...string) (int, string, error) {
	args := append([]string{"reconcile", "-once", "-no-fix", "-dsn", cl.dsn(), "-redis", cl.redis.addr(), "-log-level", "warn"}, extra...)
	cmd := exec.CommandContext(ctx, cl.bin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), out.String(), nil
	}
	if err != nil {
		return 0, out.String(), fmt.Errorf("run couponlink reconcile -once: %w", err)
	}
	return 0, out.String(), nil
}

// checkpoint proves, while the workload and the faults go on, that the
// counters equal the truth at a snapshot position (the reconciler replays
// the binlog between the cdc's checkpoint and the snapshot). A pass that
// cannot run (exit 2: a server restarting) is counted as skipped.
func (cl *cluster) checkpoint(ctx context.Context) {
	code, out, err := cl.reconcileOnce(ctx, "-redis", "")
	switch {
	case ctx.Err() != nil:
	case err != nil || code == 2:
		cl.checks.skip(invCheckpoint)
	case code == 0:
		cl.checks.record(invCheckpoint, nil)
	default:
		cl.checks.record(invCheckpoint, strings.Split(strings.TrimSpace(out), "\n"))
	}
}

// finalChecks checks every invariant at quiescence.
func (cl *cluster) finalChecks(ctx context.Context, k *acks) {
	c := cl.checks
	c.run(ctx, invCounters, func(ctx context.Context) ([]string, error) { return checkCounters(ctx, cl.db) })
	c.run(ctx, invConservation, func(ctx context.Context) ([]string, error) { return checkConservation(ctx, cl.db) })
	c.run(ctx, invQuotaSum, func(ctx context.Context) ([]string, error) { return checkQuotaSum(ctx, cl.db) })
	c.run(ctx, invRedis, func(ctx context.Context) ([]string, error) { return checkRedis(ctx, cl.db, cl.rdb, keyPrefix) })
	c.run(ctx, invRedemption, func(ctx context.Context) ([]string, error) { return checkRedemptions(ctx, cl.db) })
	c.run(ctx, invIdempotency, func(ctx context.Context) ([]string, error) { return k.checkIdempotency(ctx, cl.db) })
	c.run(ctx, invAcked, func(ctx context.Context) ([]string, error) { return k.checkAcked(ctx, cl.db) })
	c.run(ctx, invWebhooks, cl.checkWebhooks)
	c.run(ctx, invAnomalies, func(ctx context.Context) ([]string, error) { return checkAnomalies(ctx, cl.db) })
	c.run(ctx, invReconcile, func(ctx context.Context) ([]string, error) {
		code, out, err := cl.reconcileOnce(ctx)
		if err != nil || code == 0 {
			return nil, err
		}
		return append([]string{fmt.Sprintf("exit code %d", code)}, strings.Split(strings.TrimSpace(out), "\n")...), nil
	})
	c.run(ctx, invCorrections, func(ctx context.Context) ([]string, error) { return checkCorrections(ctx, cl.db) })
}
