package sink

import (
	"context"
	"database/sql"
	"errors"
	"maps"
	"time"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/inventory"
)

// When the sink writes the Redis stock keys (owner mode): after each
// batch, the keys of the templates it touched; on a heartbeat, nothing
// unless Redis lost its keys (then all, rebuilt from the mirror); after a
// change of its own outside a batch (a release, a transfer), at once.

// syncRedis writes the stock keys of the given templates, or rebuilds all
// of them when Redis missed writes or was flushed. Redis trouble never
// stops the counters: it is logged, counted, and retried.
func (s *Sink) syncRedis(ctx context.Context, templates []int64) {
	r := s.redis
	now := s.cfg.Now()
	if !r.dirty && now.Sub(r.lastProbe) >= time.Second {
		r.lastProbe = now
		if gone, err := r.flushed(ctx); err != nil || gone {
			if err == nil {
				s.log.Warn("Redis lost the stock keys (flushed or restarted): rebuilding them from MySQL")
			}
			r.dirty = true
		}
	}
	stamp := r.stampOf(s.pos)
	var err error
	switch {
	case r.dirty && now.Before(r.nextTry):
		err = errors.New("waiting to retry")
	case r.dirty:
		s.mu.RLock()
		quotas := maps.Clone(s.quotas)
		s.mu.RUnlock()
		reset := r.reset
		if err = r.rebuild(ctx, quotas, stamp, func(ctx context.Context) error { return s.rebuildClaimed(ctx, templatesIn(quotas), reset) }); err == nil {
			s.m.redisRebuilds.Inc()
			s.log.Info("Redis stock keys rebuilt", "templates", len(templatesIn(quotas)), "position", s.pos.String(), "behind_batches", r.behind)
			r.dirty = false
		}
	case len(templates) > 0:
		err = r.write(ctx, s.quotas, templates, stamp, false)
	}
	if err != nil {
		if len(templates) > 0 || r.behind == 0 {
			r.behind++
		}
		if !r.dirty || now.After(r.nextTry) {
			s.m.redisWrites.WithLabelValues(kindStock, "error").Inc()
			s.log.Error("Redis stock write failed; counters go on, Redis will be rebuilt", "err", err, "behind_batches", r.behind)
			r.nextTry = now.Add(time.Second)
		}
		r.dirty = true
	} else if len(templates) > 0 || r.behind > 0 {
		s.m.redisWrites.WithLabelValues(kindStock, "ok").Inc()
		r.behind = 0
	}
	s.m.redisBehind.Set(float64(r.behind))
}

// freshenReleased writes the Redis stock keys of the buckets the committed
// releases changed, at once (see freshen).
func (s *Sink) freshenReleased(ctx context.Context, applied []release) {
	if len(applied) == 0 {
		return
	}
	pairs := make([]inventory.Pair, len(applied))
	for i, r := range applied {
		pairs[i] = r.Pair
	}
	s.freshen(ctx, templatesOf(pairs))
}

// freshen writes the Redis stock keys of templates whose buckets the cdc
// itself just changed outside a batch (releases, quota transfers), at
// once: the cdc reads the change back from the binlog only later, and a
// cdc that stops before that (even on SIGTERM) would leave the keys stale
// until its next start.
//
// The stamp: the change's own commit position is not known, so the
// buckets are read in a consistent snapshot (MariaDB's START TRANSACTION
// WITH CONSISTENT SNAPSHOT + binlog_snapshot_file/position), which gives
// values that are exactly those at the snapshot's position P, and the keys
// are written stamped P. P is after the change's commit, so the values
// include it. A later batch carrying an older state ends before P and is
// refused (its values are older); any change after P is in a batch ending
// after P and wins. Neither the last applied position (values newer than
// their stamp: an in-between batch would overwrite them with the older
// state) nor a position read after the commit (changes between the read of
// the values and of the position would be refused) gives that guarantee.
// A failure only logs: the binlog brings the same values later.
func (s *Sink) freshen(ctx context.Context, templates []int64) {
	if s.redis == nil || s.redis.dirty || len(templates) == 0 {
		return
	}
	var quotas map[inventory.Pair]inventory.Quota
	pos, err := s.src.WithSnapshot(ctx, s.cfg.BinlogDB, func(tx *sql.Tx, _ canal.Position) error {
		var err error
		quotas, err = s.src.Quotas(ctx, tx, templates...)
		return err
	})
	if err != nil {
		s.log.Warn("could not read the changed buckets; their Redis keys follow when the binlog shows the change", "err", err)
		return
	}
	if err := s.redis.write(ctx, quotas, templates, inventory.Stamp(pos), false); err != nil {
		s.log.Warn("could not write the changed buckets' Redis keys; Redis will be rebuilt", "err", err)
		s.redis.dirty = true
	}
}
