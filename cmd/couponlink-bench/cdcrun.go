package main

import (
	"context"
	"fmt"
	"time"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/internal/loopback"
)

// The `couponlink cdc` binary as the memory and sources phases run it: one
// way to start it, wait for its checkpoint and read what it cost.

// startCDC starts `couponlink cdc` with the run's batching flags, args,
// a free metrics port and log level info; name names its log.
func (e *env) startCDC(cfg config, name string, args ...string) (*child, error) {
	port, err := loopback.FreePort()
	if err != nil {
		return nil, err
	}
	all := append(append([]string{"cdc"}, cfg.cdcFlags()...), args...)
	return e.startChild(name, append(all, "-metrics-addr", fmt.Sprintf("127.0.0.1:%d", port), "-log-level", "info")...)
}

// cdcRun is one run of the binary up to a checkpoint target.
type cdcRun struct {
	took, startup time.Duration // process start → checkpoint ≥ target; → its "tailing the binlog" log line
	mode          string        // start mode it logged
	cpu           time.Duration // the process's CPU until the target
	rss, hwm      int64         // its VmRSS and VmHWM then
	rows          int64         // events it applied over the run
}

// arrive waits until the checkpoint of c at cp reaches target and notes
// the time since c's start, its CPU and memory.
func (r *cdcRun) arrive(ctx context.Context, cp checkpointRef, c *child, target canal.Position, limit time.Duration) error {
	if err := cp.wait(ctx, c, target, limit); err != nil {
		return err
	}
	r.took, r.cpu = time.Since(c.started), procCPU(c.pid())
	var err error
	r.rss, r.hwm, err = procMem(c.pid())
	return err
}

// settle notes, from c's log, its start-up time and start mode, and the
// events applied since events0.
func (r *cdcRun) settle(ctx context.Context, cp checkpointRef, c *child, events0 int64) error {
	r.startup, r.mode = startupOf(c, c.started)
	events, _, err := cp.read(ctx)
	r.rows = events - events0
	return err
}
