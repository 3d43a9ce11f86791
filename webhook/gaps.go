package webhook

import (
	"context"
	"time"
)

// quickGap is how old the row after a hole in the outbox ids must be
// before the relay asks whether a transaction still holds a row of the
// hole: a killed leader's rolled-back batch leaves a hole that would
// otherwise hold the sink back GapWait after a takeover.
const quickGap = 200 * time.Millisecond

// rowAge is how old an outbox row is, as read (read).
type rowAge int

const (
	rowYoung   rowAge = iota // younger than quickGap
	rowQuick                 // quickGap old
	rowSettled               // GapWait old
)

// settled says whether the hole between ids prev and next (exclusive) is
// for good, next's row being age old: GapWait old, or quickGap old and no
// transaction holds a row of the hole. An uncommitted INSERT holds its row
// locked: a locking read of the hole that must not wait (NOWAIT) fails on
// it, and finds nothing when no row is there or coming. The read never
// waits, so it takes part in no deadlock; an insert into the hole waits
// for it at most as long as the statement runs. The quick way is taken
// with leases that follow leadership (RelayConfig.Epoch) only: there a
// takeover is what leaves such holes, and a new leader's events must not
// wait GapWait behind them.
func (r *Relay) settled(ctx context.Context, prev, next int64, age rowAge) bool {
	switch age {
	case rowSettled:
		return true
	case rowQuick:
		if r.cfg.Epoch == nil {
			return false // plain leases: GapWait only
		}
		var n int
		err := r.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM webhook_outbox WHERE id > ? AND id < ? LOCK IN SHARE MODE NOWAIT`,
			prev, next).Scan(&n)
		return err == nil && n == 0
	default:
		return false
	}
}
