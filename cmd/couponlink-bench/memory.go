package main

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/couponlink/couponlink/canal"
)

// memResult holds phase 2: the real `couponlink cdc` binary replaying the
// whole backlog from its checkpoint, then following claims at 1,000/s.
type memResult struct {
	cdcRun        // to the end of the backlog (hwm: the peak of the catch-up)
	rssSteadyMax  int64
	rssSteadyLast int64
	hwmEnd        int64
	steady        pacedLoad
	noop          readerRun // a no-op reader over the same range by file/offset, just before
	profile       string    // the binary's CPU profile (its -cpuprofile), catch-up and steady state
}

func (m memResult) rate() float64 { return float64(m.rows) / m.took.Seconds() }

// streamRate leaves the process start-up out.
func (m memResult) streamRate() float64 { return float64(m.rows) / (m.took - m.startup).Seconds() }

// runMemory runs phase 2: the binary's catch-up from the start of the
// backlog, beside a no-op reader over the same range, then its memory in
// steady state.
func runMemory(ctx context.Context, cfg config, e *env, cu *catchupResult, log *slog.Logger) (memResult, error) {
	var res memResult
	log.Info("phase 2: couponlink cdc binary: catch-up over the whole backlog, then steady state (memory)")
	if err := resetState(ctx, e, cu.single.from, false); err != nil {
		return res, err
	}
	events0, _, err := e.checkpoint().read(ctx)
	if err != nil {
		return res, err
	}
	target, err := canal.CurrentPosition(ctx, e.db)
	if err != nil {
		return res, err
	}
	// The peer, side by side: a no-op reader over the same range, just before.
	if res.noop, err = timeNoop(ctx, e, []string{sourceRegex()}, modeStart(cu.single.from, "file"), target); err != nil {
		return res, fmt.Errorf("no-op reader over the whole backlog: %w", err)
	}
	res.profile = filepath.Join(cfg.out, cfg.stamp+"-cdc-binary.pprof") // complete once it has stopped: catch-up and steady state
	c, err := e.startCDC(cfg, "cdc", "-dsn", e.appDSN, "-redis", e.redisAddr, "-name", "default", "-cpuprofile", res.profile)
	if err != nil {
		return res, err
	}
	defer c.stop()
	if err := res.arrive(ctx, e.checkpoint(), c, target, 15*time.Minute); err != nil {
		return res, err
	}
	if err := res.settle(ctx, e.checkpoint(), c, events0); err != nil {
		return res, err
	}
	log.Info("couponlink cdc caught up", "noop_rows_per_s", int(res.noop.rate), "rows", res.rows, "took", res.took.Round(time.Millisecond), "rows_per_s", int(res.rate()), "startup", res.startup.Round(time.Millisecond),
		"start_mode", res.mode, "vmrss_mib", res.rss>>20, "vmhwm_mib", res.hwm>>20)
	if err := res.steadyState(ctx, cfg, e, c); err != nil {
		return res, err
	}
	log.Info("couponlink cdc steady state", "claims_per_s", int(res.steady.rate()), "vmrss_max_mib", res.rssSteadyMax>>20,
		"vmrss_last_mib", res.rssSteadyLast>>20, "vmhwm_mib", res.hwmEnd>>20)
	c.stop()
	if err := c.cmd.ProcessState; err != nil && !err.Success() {
		log.Warn("couponlink cdc did not exit cleanly on SIGTERM", "state", err.String(), "log", tail(c.log, 5))
	}
	return res, nil
}

// startupOf reads, from the log of a couponlink cdc started at t0, the
// time to its "tailing the binlog" line (0: not found) and its start mode.
func startupOf(c *child, t0 time.Time) (time.Duration, string) {
	return parseStartup(grepLine(c.log, "tailing the binlog"), t0)
}

// parseStartup reads the cdc's "tailing the binlog" log line: the time
// from t0 to it (0: no time, or not after t0) and the start mode (file
// when it says file/offset, else gtid).
func parseStartup(line string, t0 time.Time) (time.Duration, string) {
	mode := "gtid"
	if strings.Contains(line, "file/offset") {
		mode = "file"
	}
	if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], "time=") {
		if at, err := time.Parse(time.RFC3339Nano, strings.TrimPrefix(f[0], "time=")); err == nil && at.After(t0) {
			return at.Sub(t0), mode
		}
	}
	return 0, mode
}

// steadyState runs claims at 1,000/s for -steady-duration, sampling the
// binary's VmRSS every 250 ms, then waits until it has checkpointed them
// and notes its VmHWM.
func (m *memResult) steadyState(ctx context.Context, cfg config, e *env, c *child) error {
	stopSample := every(250*time.Millisecond, func() {
		if rss, _, err := procMem(c.pid()); err == nil {
			m.rssSteadyMax = max(m.rssSteadyMax, rss)
			m.rssSteadyLast = rss
		}
	})
	m.steady = pacedClaims(ctx, e, e.lagTpl, 1000, cfg.steadyDuration, cfg.writers, "steady")
	stopSample()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	end, err := canal.CurrentPosition(ctx, e.db)
	if err != nil {
		return err
	}
	if err := e.checkpoint().wait(ctx, c, end, time.Minute); err != nil {
		return err
	}
	_, m.hwmEnd, err = procMem(c.pid())
	return err
}
