package sink

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/couponlink/couponlink/canal"
)

// Daemon is the cdc: it waits for the leader lock, starts the sink from its
// checkpoint (bootstrapping when there is none), tails the binlog into it,
// and starts over from the checkpoint after a failure.
type Daemon struct {
	Sink   *Sink
	Tailer canal.Config
	// Rebuild bootstraps the counters from a fresh snapshot at the first start.
	Rebuild bool
	// RetryWait is the pause before starting over after a failure; default 2 s.
	RetryWait time.Duration
	// OnStart, when set, is called with each position the tailer starts from.
	OnStart func(canal.Position)
}

// Run runs until ctx ends. It returns an error only for failures a restart
// cannot fix: a purged binlog (rebuild needed), a schema change, a fenced leader.
func (d *Daemon) Run(ctx context.Context) error {
	s := d.Sink
	if d.RetryWait <= 0 {
		d.RetryWait = 2 * time.Second
	}
	leader, err := AcquireLeader(ctx, s.db, s.cfg.Name, s.log)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer leader.Release(ctx)
	defer s.m.leader.Set(0)
	rebuild := d.Rebuild
	for {
		err := d.runOnce(ctx, leader, rebuild)
		if ctx.Err() != nil {
			s.log.Info("cdc stopped", "checkpoint", s.Position().String())
			return nil
		}
		switch {
		case errors.Is(err, canal.ErrBinlogPurged), errors.Is(err, canal.ErrSchemaChanged), errors.Is(err, ErrFenced):
			return err
		case errors.Is(err, errLeaderLost):
			return err
		}
		s.log.Error("cdc failed; starting over from the checkpoint", "err", err, "wait", d.RetryWait)
		rebuild = false
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(d.RetryWait):
		}
	}
}

var errLeaderLost = errors.New("the leader lock's connection failed; stopping so that a standby can take over")

func (d *Daemon) runOnce(ctx context.Context, leader *Leader, rebuild bool) error {
	s := d.Sink
	from, err := s.Start(ctx, rebuild)
	if err != nil {
		return err
	}
	if d.OnStart != nil {
		d.OnStart(from)
	}
	cfg := d.Tailer
	cfg.Mapping = s.cfg.Mapping
	if cfg.Logger == nil {
		cfg.Logger = s.log
	}
	t, err := canal.New(cfg)
	if err != nil {
		return fmt.Errorf("start binlog tailer: %w", err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var lost atomic.Bool
	go func() {
		select {
		case <-leader.Lost():
			lost.Store(true)
			cancel()
		case <-runCtx.Done():
		}
	}()
	start := canal.ResumePoint(ctx, s.db, from)
	mode := "gtid"
	if start.GTID == "" {
		mode = "file/offset (verified against the GTID)"
	}
	s.log.Info("tailing the binlog", "from", from.String(), "mode", mode, "tables", s.cfg.Mapping.SourceTables())
	err = t.Run(runCtx, start, s)
	if lost.Load() {
		return errLeaderLost
	}
	if err == nil && ctx.Err() == nil {
		err = errors.New("binlog tailer stopped")
	}
	return err
}
