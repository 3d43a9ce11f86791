package reconcile

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/inventory"
)

// truthAt moves the truth counted at the snapshot position `snap` to the
// checkpoint position `at` the counters were read at, by replaying the
// binlog between the two: the row changes in between are added (the cdc is
// ahead of the snapshot) or taken away (it is behind). Every counter row
// then compares exactly, however busy the system is.
func (r *Reconciler) truthAt(ctx context.Context, truth map[inventory.Pair]*inventory.Counts, snap, at canal.Position) (map[inventory.Pair]*inventory.Counts, error) {
	out := make(map[inventory.Pair]*inventory.Counts, len(truth))
	for p, c := range truth {
		cc := *c
		out[p] = &cc
	}
	from, to, sign := snap, at, int64(1)
	switch at.Compare(snap) {
	case 0:
		return out, nil
	case -1:
		from, to, sign = at, snap, -1
	}
	cfg := r.cfg.Binlog
	cfg.Mapping = r.mapping() // resolved: the tables the snapshot counted
	cfg.BatchRows = 1         // one transaction a batch: stop exactly at `to`
	cfg.BatchWait = 0
	cfg.HeartbeatPeriod = 50 * time.Millisecond
	cfg.Logger = r.cfg.Logger // the tailer names its component
	t, err := canal.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("replay the binlog: %w", err)
	}
	rctx, cancel := context.WithTimeout(ctx, r.cfg.CatchUpWait)
	defer cancel()
	h := &replayer{to: to, deltas: inventory.Deltas{}, cancel: cancel}
	start := canal.Position{File: from.File, Pos: from.Pos} // by file and offset: the same server
	err = t.Run(rctx, start, h)
	if err != nil && !errors.Is(err, errReplayDone) {
		return nil, fmt.Errorf("replay the binlog %s .. %s: %w", from, to, err)
	}
	if !h.done {
		return nil, fmt.Errorf("replay the binlog %s .. %s: not done within %s", from, to, r.cfg.CatchUpWait)
	}
	for p, d := range h.deltas {
		if out[p] == nil {
			out[p] = &inventory.Counts{}
		}
		c := out[p]
		c.Held += sign * d.Held
		c.Used += sign * d.Used
		c.Expired += sign * d.Expired
		c.Returned += sign * d.Returned
		c.Released += sign * d.Released
	}
	r.m.replayedRows.Add(float64(h.rows))
	return out, nil
}

var errReplayDone = errors.New("replay reached its end")

// replayer sums the deltas of whole transactions up to a position.
type replayer struct {
	to     canal.Position
	deltas inventory.Deltas
	rows   int
	done   bool
	cancel context.CancelFunc
}

func (h *replayer) ApplyBatch(ctx context.Context, b *canal.Batch) error {
	if h.done {
		return nil
	}
	if b.End.Compare(h.to) > 0 {
		// this transaction (or heartbeat) ends past the checkpoint: the
		// checkpoint sits on a transaction boundary, so everything up to
		// it is summed
		h.done = true
		h.cancel()
		return nil
	}
	h.deltas.Batch(b)
	h.rows += b.Rows
	if b.End.Compare(h.to) == 0 {
		h.done = true
		h.cancel()
	}
	return nil
}
