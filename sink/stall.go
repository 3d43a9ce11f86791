package sink

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/couponlink/couponlink/canal"
)

// A stall is the cdc not advancing while the server's binlog is, whatever
// the cause (a batch failing again and again, a row the tailer keeps
// restarting at, a stuck transaction). The batches cannot report it — none
// is applied — so the daemon watches the saved checkpoint against the
// server's binlog end beside them: behind and not moved for StallAfter is a
// stall, couponlink_cdc_lag_seconds is then now minus the binlog time of
// the checkpoint's last event (it grows), couponlink_cdc_stalled is 1 and
// Stalled says why (for /healthz).

// progress is where the saved checkpoint stands.
type progress struct {
	pos   canal.Position
	event time.Time // binlog time of its last event (a heartbeat's: the wall time)
	moved time.Time // wall time it last moved
	epoch int64     // the leader epoch it was saved under
}

// progressed records the checkpoint saved at pos (event: its last event's
// binlog time, zero when unknown).
func (s *Sink) progressed(pos canal.Position, event time.Time) {
	now := s.cfg.Now()
	p := &progress{pos: pos, event: event, moved: now, epoch: s.epoch}
	if old := s.prog.Load(); old != nil && old.pos == pos {
		p.moved = old.moved
	}
	if p.event.IsZero() {
		p.event = now
	}
	s.prog.Store(p)
}

// stallWatch is the daemon's watch (see above). It runs while Run does.
type stallWatch struct {
	s     *Sink
	after time.Duration
	every time.Duration

	mu      sync.Mutex
	stalled error // nil, or what the stall is
}

// run checks every w.every until ctx ends.
func (w *stallWatch) run(ctx context.Context) {
	tickUntil(ctx, w.every, func() bool {
		w.check(ctx)
		return true
	})
}

// tickUntil calls f at every tick of d (not at once) until ctx ends or f
// returns false.
func tickUntil(ctx context.Context, d time.Duration, f func() bool) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !f() {
			return
		}
	}
}

func (w *stallWatch) check(ctx context.Context) {
	s := w.s
	p := s.prog.Load()
	if p == nil || p.pos.File == "" { // not leading (a standby) or not started yet
		w.set(nil)
		return
	}
	end, err := canal.CurrentPosition(ctx, s.cfg.BinlogDB)
	if err != nil {
		return // MySQL away: its binlog does not move either; /healthz says it
	}
	now := s.cfg.Now()
	if end.Compare(p.pos) <= 0 {
		w.set(nil) // caught up: the batches report the lag
		return
	}
	lag := now.Sub(p.event)
	if now.Sub(p.moved) >= w.every {
		s.m.lag.Set(lag.Seconds()) // behind and not moving: no batch says so
	}
	if now.Sub(p.moved) < w.after {
		w.set(nil)
		return
	}
	w.set(fmt.Errorf("the checkpoint %s has not moved for %s while the server's binlog is at %s (the binlog time of its last event is %s ago); the cdc's log says why",
		p.pos, now.Sub(p.moved).Round(time.Second), end, lag.Round(time.Second)))
}

func (w *stallWatch) set(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if (err == nil) != (w.stalled == nil) {
		if err != nil {
			w.s.log.Error("cdc stalled", "err", err)
			w.s.m.stalled.Set(1)
		} else {
			w.s.log.Info("cdc advancing again")
			w.s.m.stalled.Set(0)
		}
	}
	w.stalled = err
}

func (w *stallWatch) err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stalled
}

// noProgress makes the watch see this process as not leading.
func (s *Sink) noProgress() { s.prog.Store(nil) }
