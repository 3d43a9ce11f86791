package canal

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// batcher sits between the reader (go-mysql's goroutine, which decodes and
// commits whole transactions into the pending batch) and the deliverer
// (which hands batches to the Handler). The reader decodes the next batch
// while the Handler applies the previous one; once the pending batch holds
// BatchRows rows the reader waits, so a slow Handler slows the binlog read.
type batcher struct {
	maxRows  int
	wait     time.Duration
	hbPeriod time.Duration
	stats    *stats

	ready chan struct{} // reader → deliverer: first rows committed, or batch full
	taken chan struct{} // deliverer → reader: the pending batch was taken

	mu      sync.Mutex
	cur     *Batch // committed transactions not yet delivered
	file    string // position after the last commit seen
	pos     uint32
	gtid    gtidTracker // nil when the GTID is not tracked (MySQL started from file/pos)
	eventTS uint32      // timestamp of the last commit seen
	firstAt time.Time   // when cur got its first row
	free    []*Batch
}

// stats are the counters behind Tailer.Stats.
type stats struct {
	events  atomic.Uint64
	rows    atomic.Uint64
	batches atomic.Uint64
	lastTS  atomic.Uint32
}

func newBatcher(cfg Config, from Position, gt gtidTracker, st *stats) *batcher {
	return &batcher{
		maxRows: cfg.BatchRows, wait: cfg.BatchWait, hbPeriod: cfg.HeartbeatPeriod, stats: st,
		ready: make(chan struct{}, 1), taken: make(chan struct{}, 1),
		cur: &Batch{}, file: from.File, pos: from.Pos, gtid: gt,
	}
}

func notify(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default: // a wake-up is pending already; the receiver reads the state under mu
	}
}

// commit moves the rows of a committed transaction (possibly none) into the
// pending batch and advances the position to file:pos, just after the
// commit event of timestamp ts. It reports whether the batch is full.
func (b *batcher) commit(tx *Batch, file string, pos, ts uint32) (full bool) {
	wake := false
	b.mu.Lock()
	if b.gtid != nil {
		b.gtid.commit()
	}
	b.file, b.pos, b.eventTS = file, pos, ts
	if tx.Rows > 0 {
		if b.cur.Rows == 0 {
			b.firstAt = time.Now()
			wake = true
		}
		b.cur.appendTx(tx)
		full = b.cur.Rows >= b.maxRows
		wake = wake || full
	}
	b.mu.Unlock()
	if wake {
		notify(b.ready)
	}
	return full
}

// waitRoom blocks the reader until the deliverer took the full batch.
func (b *batcher) waitRoom(ctx context.Context) error {
	for {
		b.mu.Lock()
		full := b.cur.Rows >= b.maxRows
		b.mu.Unlock()
		if !full {
			return nil
		}
		select {
		case <-b.taken:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// position is the position after the last commit seen.
func (b *batcher) position() Position {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.positionLocked()
}

func (b *batcher) positionLocked() Position {
	p := Position{File: b.file, Pos: b.pos}
	if b.gtid != nil {
		p.GTID = b.gtid.String()
	}
	return p
}

// takeLocked hands over the pending batch and starts a new one.
func (b *batcher) takeLocked(now time.Time, idle bool) *Batch {
	out := b.cur
	if n := len(b.free); n > 0 {
		b.cur, b.free = b.free[n-1], b.free[:n-1]
	} else {
		b.cur = &Batch{}
	}
	out.End = b.positionLocked()
	if b.eventTS != 0 {
		out.EventTime = time.Unix(int64(b.eventTS), 0)
	}
	if out.Rows == 0 {
		out.Heartbeat = true
		if idle {
			out.EventTime = now
		}
	}
	return out
}

func (b *batcher) recycle(out *Batch) {
	out.reset()
	b.mu.Lock()
	if len(b.free) < 2 {
		b.free = append(b.free, out)
	}
	b.mu.Unlock()
}

// run delivers batches until ctx ends (nil) or the Handler fails (its
// error). A batch with rows goes as soon as the Handler is free (with a
// BatchWait, when it holds BatchRows rows or BatchWait after its first row,
// whether or not more events arrive); without rows, a heartbeat goes when
// nothing was delivered for HeartbeatPeriod.
func (b *batcher) run(ctx context.Context, h Handler) error {
	waitT := time.NewTimer(time.Hour)
	waitT.Stop()
	defer waitT.Stop()
	hbT := time.NewTimer(b.hbPeriod)
	defer hbT.Stop()
	lastEvents := b.stats.events.Load()
	for {
		hbDue := false
		select {
		case <-ctx.Done():
			return nil
		case <-b.ready:
		case <-waitT.C:
		case <-hbT.C:
			hbDue = true
		}
		now := time.Now()
		var out *Batch
		b.mu.Lock()
		switch {
		case b.cur.Rows > 0:
			rem := b.firstAt.Add(b.wait).Sub(now)
			if b.wait <= 0 || b.cur.Rows >= b.maxRows || rem <= 0 || hbDue {
				out = b.takeLocked(now, false)
			} else {
				waitT.Reset(rem)
			}
		case hbDue:
			out = b.takeLocked(now, b.stats.events.Load() == lastEvents)
		}
		if out != nil {
			// Events counted from here on arrived after this batch was cut,
			// even while the Handler still applies it.
			lastEvents = b.stats.events.Load()
		}
		b.mu.Unlock()
		if out == nil {
			continue
		}
		notify(b.taken)
		if ctx.Err() != nil {
			return nil
		}
		err := h.ApplyBatch(ctx, out)
		b.stats.batches.Add(1)
		hbT.Reset(b.hbPeriod)
		if err != nil {
			return fmt.Errorf("apply batch ending at %s: %w", out.End, err)
		}
		b.recycle(out)
	}
}
