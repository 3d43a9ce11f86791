package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"syscall"
	"time"
)

// fault is one kind of fault: its name and what injects it (and, for a
// server, restarts it: a fault returns with everything running again).
type fault struct {
	name   string
	weight int
	inject func(ctx context.Context, rng *rand.Rand) error
}

// faults lists every kind of fault of the run.
func (cl *cluster) faults() []fault {
	kill := func(p *proc) func(context.Context, *rand.Rand) error {
		return func(context.Context, *rand.Rand) error { p.kill(); return nil }
	}
	return []fault{
		{"sigkill leading cdc", 4, func(ctx context.Context, _ *rand.Rand) error {
			cl.leader(ctx, true).kill()
			return nil
		}},
		{"sigkill standby cdc", 3, func(ctx context.Context, _ *rand.Rand) error {
			cl.leader(ctx, false).kill()
			return nil
		}},
		{"sigkill api", 3, kill(cl.api)},
		{"sigkill reconciler", 2, kill(cl.rec)},
		{"sigkill legacy cdc", 3, kill(cl.cdcL)},
		{"redis FLUSHALL", 3, func(ctx context.Context, _ *rand.Rand) error {
			return cl.rdb.FlushAll(ctx).Err()
		}},
		{"redis restart (SIGKILL)", 2, func(ctx context.Context, rng *rand.Rand) error {
			return cl.restartServer(ctx, cl.redis, syscall.SIGKILL, rng)
		}},
		{"mariadb SIGTERM + restart", 2, func(ctx context.Context, rng *rand.Rand) error {
			return cl.restartServer(ctx, cl.mysql, syscall.SIGTERM, rng)
		}},
		{"mariadb SIGKILL + restart", 2, func(ctx context.Context, rng *rand.Rand) error {
			return cl.restartServer(ctx, cl.mysql, syscall.SIGKILL, rng)
		}},
		{"FLUSH BINARY LOGS", 3, func(ctx context.Context, _ *rand.Rand) error {
			_, err := cl.db.ExecContext(ctx, "FLUSH BINARY LOGS")
			return err
		}},
		{"KILL cdc replication connection", 3, func(ctx context.Context, _ *rand.Rand) error {
			return cl.killConns(ctx, `SELECT ID FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%'`)
		}},
		{"KILL cdc leader-lock connection", 3, func(ctx context.Context, _ *rand.Rand) error {
			return cl.killConns(ctx, `SELECT IS_USED_LOCK('couponlink_cdc:couponlink:default')`)
		}},
		{"webhook receiver down", 2, func(_ context.Context, rng *rand.Rand) error {
			cl.hooks.down(time.Duration(1000+rng.IntN(3000)) * time.Millisecond)
			return nil
		}},
		{"webhook receiver slow", 2, func(_ context.Context, rng *rand.Rand) error {
			cl.hooks.slow(time.Duration(2000+rng.IntN(3000))*time.Millisecond, time.Duration(300+rng.IntN(1500))*time.Millisecond)
			return nil
		}},
	}
}

// leader returns the cdc that leads now (lead) or the other one; when
// neither says it leads (both between two attempts), cdc-1 or cdc-2.
func (cl *cluster) leader(ctx context.Context, lead bool) *proc {
	l, o := cl.cdc1, cl.cdc2
	if !l.leads(ctx) && o.leads(ctx) {
		l, o = o, l
	}
	if lead {
		return l
	}
	return o
}

// restartServer stops a server with sig, leaves it down for a drawn
// moment, and starts it again (bounded by server.start's wait).
func (cl *cluster) restartServer(ctx context.Context, s *server, sig syscall.Signal, rng *rand.Rand) error {
	if err := s.stop(sig); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
	case <-time.After(time.Duration(rng.IntN(1500)) * time.Millisecond): // the outage
	}
	if err := s.start(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("restart %s: %w", s.name, err)
	}
	return nil
}

// killConns KILLs the connections whose ids the query returns (none: no-op;
// a connection gone meanwhile is not an error).
func (cl *cluster) killConns(ctx context.Context, query string) error {
	rows, err := cl.db.QueryContext(ctx, query)
	if err != nil {
		return fmt.Errorf("find connections: %w", err)
	}
	var ids []int64
	for rows.Next() {
		var id *int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return err
		}
		if id != nil {
			ids = append(ids, *id)
		}
	}
	rows.Close()
	for _, id := range ids {
		_, _ = cl.db.ExecContext(ctx, fmt.Sprintf("KILL %d", id))
	}
	return rows.Err()
}

// injectFaults draws a fault and a pause before it from rng until ctx
// ends; every checkEvery faults it runs a checkpoint. A fault that cannot
// be injected (a server does not come back) ends the run with an error.
func (cl *cluster) injectFaults(ctx context.Context, rng *rand.Rand, checkEvery int) error {
	fs := cl.faults()
	total := 0
	for _, f := range fs {
		total += f.weight
	}
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Duration(800+rng.IntN(2200)) * time.Millisecond): // the seed's moment
		}
		pick := rng.IntN(total)
		var f fault
		for _, f = range fs {
			if pick < f.weight {
				break
			}
			pick -= f.weight
		}
		cl.log.Info("fault", "n", n, "kind", f.name)
		if err := f.inject(ctx, rng); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			cl.tally.fault(f.name + " (failed)")
			cl.log.Warn("fault could not be injected", "kind", f.name, "err", err)
			if f.name == "mariadb SIGTERM + restart" || f.name == "mariadb SIGKILL + restart" || f.name == "redis restart (SIGKILL)" {
				return fmt.Errorf("fault %q: %w", f.name, err)
			}
			continue
		}
		cl.tally.fault(f.name)
		if checkEvery > 0 && n%checkEvery == 0 {
			cl.checkpoint(ctx)
		}
	}
}
