package sink

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/internal/redisconn"
	"github.com/couponlink/couponlink/inventory"
)

// setStamped writes each value only if the key's stamp is not newer than
// ours: an older value never overwrites a newer one.
// KEYS[1] = stamp hash, KEYS[2..] = value keys; ARGV[1] = stamp, ARGV[2..] = values.
var setStamped = redis.NewScript(`
local stamp = tonumber(ARGV[1])
local written = 0
for i = 2, #KEYS do
  local old = tonumber(redis.call('HGET', KEYS[1], KEYS[i]) or '-1')
  if old <= stamp then
    redis.call('SET', KEYS[i], ARGV[i])
    redis.call('HSET', KEYS[1], KEYS[i], ARGV[1])
    written = written + 1
  end
end
return written
`)

// stock keeps the Redis stock keys equal to the claimable counts.
type stock struct {
	rdb       redis.UniversalClient
	keys      inventory.Keys
	dirty     bool // Redis missed writes: rebuild everything at the next chance
	behind    int  // batches whose Redis writes did not happen
	nextTry   time.Time
	lastProbe time.Time
	// reset makes the next rebuild drop the stamps of the keys it writes:
	// after a bootstrap the snapshot is the truth, even where an earlier
	// run stamped a higher position (a checkpoint the server never had, a
	// binlog numbered anew after RESET MASTER or on a new primary).
	reset bool
	// foreign is a checkpoint position of another server's binlog the
	// cdc resumed from (a failover): while the sink stands there, its
	// stamp means nothing here, so writes are stamped 0 (see stampOf).
	foreign canal.Position
}

// write sets the stock keys of the given templates from quotas, stamped;
// with reset, whatever stamps the keys had.
func (r *stock) write(ctx context.Context, quotas map[inventory.Pair]inventory.Quota, templates []int64, stamp int64, reset bool) error {
	byTpl := map[int64][]inventory.Pair{}
	for p := range quotas {
		byTpl[p.Template] = append(byTpl[p.Template], p)
	}
	pipe := r.rdb.Pipeline()
	for _, tpl := range templates {
		pairs := byTpl[tpl]
		sort.Slice(pairs, func(i, j int) bool { return pairs[i].Channel < pairs[j].Channel })
		keys := []string{r.keys.Stamps(tpl), r.keys.TemplateStock(tpl)}
		args := []any{stamp, 0}
		var total int64
		for _, p := range pairs {
			c := quotas[p].Claimable()
			total += c
			keys = append(keys, r.keys.Stock(tpl, p.Channel))
			args = append(args, c)
		}
		args[1] = total
		if reset {
			pipe.Del(ctx, r.keys.Stamps(tpl))
		}
		setStamped.Eval(ctx, pipe, keys, args...) // EVAL, not EVALSHA: a pipeline cannot fall back on NOSCRIPT
	}
	_, err := pipe.Exec(ctx)
	if err != nil {
		return fmt.Errorf("write stock keys of %d templates: %w", len(templates), err)
	}
	return nil
}

// rebuild writes every stock key, then what also writes (the claimed
// users' sets), and then the epoch markers: a marker stands for a whole copy.
func (r *stock) rebuild(ctx context.Context, quotas map[inventory.Pair]inventory.Quota, stamp int64, also func(context.Context) error) error {
	templates := templatesIn(quotas)
	for start := 0; start < len(templates); start += 200 {
		if err := r.write(ctx, quotas, templates[start:min(start+200, len(templates))], stamp, r.reset); err != nil {
			return err
		}
	}
	if err := also(ctx); err != nil {
		return err
	}
	markers, err := redisconn.OnEachMaster(ctx, r.rdb, r.keys.Epoch())
	if err != nil {
		return err
	}
	pipe := r.rdb.Pipeline()
	for _, k := range markers {
		pipe.Set(ctx, k, strconv.FormatInt(stamp, 10), 0)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("set the epoch markers: %w", err)
	}
	r.reset = false
	return nil
}

// flushed reports whether Redis lost couponlink's copy (FLUSHALL, a restart
// without persistence): an epoch marker is gone. A Redis Cluster has one
// on each master (a master that lost its keys lost its marker), so a new
// master (or one serving other slots after a resharding) makes a rebuild
// too.
func (r *stock) flushed(ctx context.Context) (bool, error) {
	markers, err := redisconn.OnEachMaster(ctx, r.rdb, r.keys.Epoch())
	if err != nil {
		return false, err
	}
	pipe := r.rdb.Pipeline()
	cmds := make([]*redis.IntCmd, len(markers))
	for i, k := range markers {
		cmds[i] = pipe.Exists(ctx, k) // one key each: a cluster refuses keys of several slots
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return false, err
	}
	for _, c := range cmds {
		if c.Val() == 0 {
			return true, nil
		}
	}
	return false, nil
}

// redisStampsAhead reports whether a stock key carries a stamp above pos's:
// a write of a batch this server's binlog does not hold at pos, as when the
// cdc wrote it on a primary that failed over before its checkpoint reached
// the replica (whose binlog may even hold the checkpoint's file and offset,
// so the resume cannot tell). Redis unreachable counts as ahead: a rebuild
// from the truth is right whatever the stamps were.
func (s *Sink) redisStampsAhead(ctx context.Context, pos canal.Position) bool {
	s.work.Lock()
	r := s.redis
	s.work.Unlock()
	if r == nil {
		return false
	}
	s.mu.RLock()
	templates := templatesIn(s.quotas)
	s.mu.RUnlock()
	ahead, err := r.stampsAhead(ctx, templates, inventory.Stamp(pos))
	if err != nil {
		s.log.Warn("cannot read the Redis stamps at start: the keys are rebuilt", "err", err)
		return true
	}
	return ahead
}

// stampsAhead reports whether a stock key of the templates carries a stamp
// above at: one pipelined HGETALL per template's stamp hash, no keyspace
// scan. The claimed users' set is not looked at: a rebuild stamps it with
// its snapshot's position, ahead of the checkpoint by design (claimed.go).
func (r *stock) stampsAhead(ctx context.Context, templates []int64, at int64) (bool, error) {
	pipe := r.rdb.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(templates))
	for i, tpl := range templates {
		cmds[i] = pipe.HGetAll(ctx, r.keys.Stamps(tpl)) // one key each: one slot on a cluster
	}
	if _, err := pipe.Exec(ctx); err != nil && len(templates) > 0 {
		return false, fmt.Errorf("read the stamps of %d templates: %w", len(templates), err)
	}
	for i, c := range cmds {
		for k, v := range c.Val() {
			if k == r.keys.Claimed(templates[i]) {
				continue
			}
			if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > at {
				return true, nil
			}
		}
	}
	return false, nil
}

// resetRedisStamps makes the next Redis write a rebuild that drops the
// keys' stamps: the sink resumed from pos, a position of another server's
// binlog, and the stamps may be positions of that binlog, higher than any
// this one will reach.
func (s *Sink) resetRedisStamps(pos canal.Position) {
	s.work.Lock()
	defer s.work.Unlock()
	if s.redis != nil {
		s.redis.dirty, s.redis.reset, s.redis.foreign = true, true, pos
	}
}

// stampOf is the stamp of the Redis writes at the sink's position pos: 0
// while pos is still the foreign one the sink resumed from (below any
// position of this server's binlog, which the first commit brings).
func (r *stock) stampOf(pos canal.Position) int64 {
	if r.foreign.IsZero() {
		return inventory.Stamp(pos)
	}
	if pos == r.foreign {
		return 0
	}
	r.foreign = canal.Position{}
	return inventory.Stamp(pos)
}
