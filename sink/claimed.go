package sink

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"

	"github.com/redis/go-redis/v9"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/inventory"
)

// The "already claimed" sets (owner mode): inventory.Keys.Claimed(t) holds
// the users who hold as many coupons of template t as its per-user limit
// allows, counting what cdc_user_claim counts (every mapped state: a voided
// or recycled coupon still counts, as it does for the API's user_claim; a
// deleted, undecodable or moved-away coupon does not). Only the cdc writes
// them, in its Redis step (pipeline.go, step 14), after the stock keys.
//
// After a batch, the users its coupon rows touched are counted again from
// the table as it is now, and their membership is written stamped with
// the batch's end E, in one script per template that refuses a stamp older
// than the set's (its field in the template's stamp hash). The count read
// is at E or later, never older, and the cdc writes one batch after the
// other: each write carries a newer state than the one before, so a user's
// last write is its truth once the cdc has caught up. A rebuild (a flushed
// Redis, missed writes, every start) counts every user in one consistent
// snapshot at position P, replaces each set whole and stamps it P, before
// the epoch markers are set: the batches ending before P (a restart's
// replay) are then refused, their changes being in P; a change after P
// comes with a batch ending after it, which is taken. A deposed leader's
// late write is stamped with a batch end before the new leader's start,
// below the new leader's rebuild: refused. The per-batch read takes no
// snapshot (on Oracle MySQL a snapshot's position takes a lock).

// addRemoveStamped adds and removes members of a set unless the set's
// stamp is newer than ours, and stamps it.
// KEYS[1] = stamp hash, KEYS[2] = set; ARGV[1] = stamp, ARGV[2] = how many
// members to add, ARGV[3..] = the members to add, then those to remove.
var addRemoveStamped = redis.NewScript(`
local stamp = tonumber(ARGV[1])
local old = tonumber(redis.call('HGET', KEYS[1], KEYS[2]) or '-1')
if old > stamp then
  return 0
end
local adds = tonumber(ARGV[2])
for i = 3, #ARGV do
  if i - 2 <= adds then
    redis.call('SADD', KEYS[2], ARGV[i])
  else
    redis.call('SREM', KEYS[2], ARGV[i])
  end
end
redis.call('HSET', KEYS[1], KEYS[2], ARGV[1])
return 1
`)

// replaceStamped puts a set filled beside it in its place (or deletes it
// when nothing was filled) unless the set's stamp is newer than ours
// (ARGV[2] "1": whatever its stamp), and stamps it; the filled copy is
// dropped either way.
// KEYS[1] = stamp hash, KEYS[2] = set, KEYS[3] = its filled copy;
// ARGV[1] = stamp, ARGV[2] = "1" to ignore the old stamp.
var replaceStamped = redis.NewScript(`
local old = tonumber(redis.call('HGET', KEYS[1], KEYS[2]) or '-1')
if ARGV[2] ~= '1' and old > tonumber(ARGV[1]) then
  redis.call('DEL', KEYS[3])
  return 0
end
if redis.call('EXISTS', KEYS[3]) == 1 then
  redis.call('RENAME', KEYS[3], KEYS[2])
else
  redis.call('DEL', KEYS[2])
end
redis.call('HSET', KEYS[1], KEYS[2], ARGV[1])
return 1
`)

// claimedChunk bounds the members one script call carries.
const claimedChunk = 1000

// keepsClaimed says whether the sink writes the "already claimed" sets:
// asked for (Config.ClaimedSets), owner mode, and a mapping whose coupons
// have a user and whose templates a per-user limit (the reference
// schema's coupon_template has one).
func (s *Sink) keepsClaimed() bool {
	return s.cfg.ClaimedSets && s.redis != nil && s.cfg.Mapping.HasPerUserLimits()
}

// claimedTouched lists, per template, the users whose coupons the batch's
// transitions moved (into or out of their set, or within it).
func claimedTouched(ts []canal.Transition) map[int64][]string {
	seen := map[claimKey]bool{}
	out := map[int64][]string{}
	add := func(k claimKey) {
		if k.user != "" && k.template != 0 && !seen[k] {
			seen[k] = true
			out[k.template] = append(out[k.template], k.user)
		}
	}
	for i := range ts {
		t := &ts[i]
		add(claimKey{t.PrevTemplate, cut(t.PrevUser)})
		add(claimKey{t.Template, cut(t.User)})
	}
	return out
}

// syncClaimed writes the membership of the users the batch touched, as the
// table holds it now, stamped with the batch's end. Nothing while Redis
// waits for a rebuild (which writes every set); a failure makes one.
func (s *Sink) syncClaimed(ctx context.Context, ts []canal.Transition) {
	if !s.keepsClaimed() || s.redis.dirty {
		return
	}
	touched := claimedTouched(ts)
	if len(touched) == 0 {
		return
	}
	in, out, err := s.readAtLimit(ctx, touched)
	if err == nil {
		err = s.redis.writeClaimed(ctx, in, out, s.redis.stampOf(s.pos))
	}
	if err != nil {
		s.m.redisWrites.WithLabelValues(kindClaimed, "error").Inc()
		s.log.Error("Redis claimed-users write failed; Redis will be rebuilt", "err", err)
		s.redis.dirty = true
		return
	}
	s.m.redisWrites.WithLabelValues(kindClaimed, "ok").Inc()
}

// readAtLimit is atLimit in a read-only transaction of its own on the
// source: the limits and the counts as of one moment.
func (s *Sink) readAtLimit(ctx context.Context, users map[int64][]string) (in, out map[int64][]string, err error) {
	tx, err := s.cfg.BinlogDB.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, nil, fmt.Errorf("count the users' coupons: %w", err)
	}
	defer func() { _ = tx.Rollback() }() // read-only: nothing to keep
	return s.atLimit(ctx, tx, users)
}

// atLimit splits the users of each template into those at its per-user
// limit (in) and those below it (out), as tx reads them.
func (s *Sink) atLimit(ctx context.Context, tx *sql.Tx, users map[int64][]string) (in, out map[int64][]string, err error) {
	templates := make([]int64, 0, len(users))
	for tpl := range users {
		templates = append(templates, tpl)
	}
	slices.Sort(templates)
	limits, err := s.src.PerUserLimits(ctx, tx, templates)
	if err != nil {
		return nil, nil, err
	}
	in, out = map[int64][]string{}, map[int64][]string{}
	for _, tpl := range templates {
		held := map[string]bool{}
		err := s.src.UserClaimsOf(ctx, tx, tpl, users[tpl], func(_ int64, user string, n int64) error {
			held[user] = limits[tpl] > 0 && n >= limits[tpl]
			return nil
		})
		if err != nil {
			return nil, nil, err
		}
		for _, u := range users[tpl] {
			if held[u] {
				in[tpl] = append(in[tpl], u)
			} else {
				out[tpl] = append(out[tpl], u)
			}
		}
	}
	return in, out, nil
}

// writeClaimed adds in and removes out, per template, stamped; in chunks
// of one script call each, all with the same stamp (an equal stamp is not
// refused).
func (r *stock) writeClaimed(ctx context.Context, in, out map[int64][]string, stamp int64) error {
	pipe := r.rdb.Pipeline()
	templates := map[int64]bool{}
	for tpl := range in {
		templates[tpl] = true
	}
	for tpl := range out {
		templates[tpl] = true
	}
	for tpl := range templates {
		keys := []string{r.keys.Stamps(tpl), r.keys.Claimed(tpl)}
		add, rem := in[tpl], out[tpl]
		for len(add) > 0 || len(rem) > 0 {
			a := add[:min(len(add), claimedChunk)]
			d := rem[:min(len(rem), claimedChunk-len(a))]
			add, rem = add[len(a):], rem[len(d):]
			args := []any{stamp, len(a)}
			for _, u := range a {
				args = append(args, u)
			}
			for _, u := range d {
				args = append(args, u)
			}
			addRemoveStamped.Eval(ctx, pipe, keys, args...) // EVAL: a pipeline cannot fall back on NOSCRIPT
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("write the claimed users of %d templates: %w", len(templates), err)
	}
	return nil
}

// rebuildClaimed replaces every set with the users at the limit in one
// snapshot, stamped with its position; with reset whatever the sets'
// stamps (see stock.reset). templates are those whose sets must exist
// (emptied when no user is at the limit); those with users at the limit
// are added. The users go to Redis as they are read, claimedChunk at a
// time per template, so that a rebuild holds no whole set in memory.
// Without -claimed-sets, the sets and their stamps are dropped instead: a
// set no cdc keeps any more would go stale, and the reconciler compares
// the sets a stamp says the cdc keeps.
func (s *Sink) rebuildClaimed(ctx context.Context, templates []int64, reset bool) error {
	if !s.keepsClaimed() {
		if s.redis != nil && s.cfg.Mapping.HasPerUserLimits() {
			return s.redis.dropClaimed(ctx, templates)
		}
		return nil
	}
	fill := s.redis.fillClaimed()
	pos, err := s.src.WithSnapshot(ctx, s.cfg.BinlogDB, func(tx *sql.Tx, _ canal.Position) error {
		limits, err := s.src.PerUserLimits(ctx, tx, nil)
		if err != nil {
			return err
		}
		return s.src.UserClaims(ctx, tx, func(tpl int64, user string, n int64) error {
			if l := limits[tpl]; l > 0 && n >= l {
				return fill.add(ctx, tpl, user)
			}
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("count the users at their limit: %w", err)
	}
	return fill.swap(ctx, templates, inventory.Stamp(pos), reset)
}

// replaceClaimed replaces the sets of the templates in members with their
// users, stamped (rebuildClaimed as one call).
func (r *stock) replaceClaimed(ctx context.Context, members map[int64][]string, stamp int64, reset bool) error {
	fill := r.fillClaimed()
	for tpl, users := range members {
		for _, u := range users {
			if err := fill.add(ctx, tpl, u); err != nil {
				return err
			}
		}
	}
	return fill.swap(ctx, slices.Collect(maps.Keys(members)), stamp, reset)
}

// claimedFill fills a copy of each template's set beside it (same hash
// slot), claimedChunk members a write, then swaps the copies in.
type claimedFill struct {
	r       *stock
	pending map[int64][]string // members read and not yet written
	started map[int64]bool     // templates whose copy was emptied first
}

func (r *stock) fillClaimed() *claimedFill {
	return &claimedFill{r: r, pending: map[int64][]string{}, started: map[int64]bool{}}
}

func (f *claimedFill) copyOf(tpl int64) string { return f.r.keys.Claimed(tpl) + ":rebuild" }

// add puts a user in tpl's copy, writing the template's pending members
// when they are a chunk.
func (f *claimedFill) add(ctx context.Context, tpl int64, user string) error {
	f.pending[tpl] = append(f.pending[tpl], user)
	if len(f.pending[tpl]) < claimedChunk {
		return nil
	}
	return f.write(ctx, tpl)
}

// write adds tpl's pending members to its copy, in a round trip of its own.
func (f *claimedFill) write(ctx context.Context, tpl int64) error {
	pipe := f.r.rdb.Pipeline()
	f.queue(ctx, pipe, tpl)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("rebuild the claimed users of template %d: %w", tpl, err)
	}
	return nil
}

// queue puts in pipe the adding of tpl's pending members to its copy
// (emptied first, the first time: a rebuild cut short may have left one).
func (f *claimedFill) queue(ctx context.Context, pipe redis.Pipeliner, tpl int64) {
	if !f.started[tpl] {
		pipe.Del(ctx, f.copyOf(tpl))
		f.started[tpl] = true
	}
	if users := f.pending[tpl]; len(users) > 0 {
		args := make([]any, len(users))
		for i, u := range users {
			args[i] = u
		}
		pipe.SAdd(ctx, f.copyOf(tpl), args...)
	}
	delete(f.pending, tpl)
}

// swap puts each copy in its set's place by replaceStamped, with what is
// pending of it, in one round trip a template: the templates given and
// every one a member was added to.
func (f *claimedFill) swap(ctx context.Context, templates []int64, stamp int64, reset bool) error {
	force := "0"
	if reset {
		force = "1"
	}
	all := slices.Concat(templates, slices.Collect(maps.Keys(f.pending)), slices.Collect(maps.Keys(f.started)))
	slices.Sort(all)
	for _, tpl := range slices.Compact(all) {
		pipe := f.r.rdb.Pipeline()
		f.queue(ctx, pipe, tpl)
		replaceStamped.Eval(ctx, pipe, []string{f.r.keys.Stamps(tpl), f.r.keys.Claimed(tpl), f.copyOf(tpl)}, stamp, force) // EVAL: a pipeline cannot fall back on NOSCRIPT
		if _, err := pipe.Exec(ctx); err != nil {
			return fmt.Errorf("rebuild the claimed users of template %d: %w", tpl, err)
		}
	}
	return nil
}

// dropClaimed deletes the templates' sets and their stamps (a cdc started
// without -claimed-sets), in one pipeline.
func (r *stock) dropClaimed(ctx context.Context, templates []int64) error {
	if len(templates) == 0 {
		return nil
	}
	pipe := r.rdb.Pipeline()
	for _, tpl := range templates {
		set := r.keys.Claimed(tpl)
		pipe.HDel(ctx, r.keys.Stamps(tpl), set)
		pipe.Del(ctx, set)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("drop the claimed users' sets: %w", err)
	}
	return nil
}

// The kinds of Redis keys in couponlink_redis_writes_total.
const (
	kindStock   = "stock"   // the stock keys
	kindClaimed = "claimed" // the claimed users' sets
)
