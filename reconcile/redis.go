package reconcile

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/sink"
)

// stockKey is one Redis stock key and the claimable count it should hold.
type stockKey struct {
	Key      string
	Template int64
	Channel  string // "" for a template key
	Expected int64
}

// expectedKeys lists the stock keys and their true values in a snapshot:
// couponlink's own keys (owner mode: quota − claimed of each bucket, and
// their sum), or a legacy front end's (corrector mode: the template's
// budget − held − used − frozen, and per channel when buckets are mapped).
func expectedKeys(mode string, keys sink.Keys, m *canal.Mapping, snap sink.Snapshot, budgets map[int64]int64) []stockKey {
	var out []stockKey
	switch mode {
	case sink.RedisOwner:
		total := map[int64]int64{}
		for p, q := range snap.Quotas {
			out = append(out, stockKey{Key: keys.Stock(p.Template, p.Channel), Template: p.Template, Channel: p.Channel, Expected: q.Claimable()})
			total[p.Template] += q.Claimable()
		}
		for tpl, n := range total {
			out = append(out, stockKey{Key: keys.TemplateStock(tpl), Template: tpl, Expected: n})
		}
	case sink.RedisCorrector:
		if m.Redis == nil {
			return nil
		}
		taken := map[int64]int64{}
		for p, c := range snap.Counts {
			taken[p.Template] += c.Taken()
		}
		if m.Redis.TemplateStock != "" {
			for tpl, budget := range budgets {
				out = append(out, stockKey{Key: legacyKey(m.Redis.TemplateStock, tpl, ""), Template: tpl, Expected: budget - taken[tpl]})
			}
		}
		if m.Redis.ChannelStock != "" {
			for p, q := range snap.Quotas {
				out = append(out, stockKey{Key: legacyKey(m.Redis.ChannelStock, p.Template, p.Channel), Template: p.Template,
					Channel: p.Channel, Expected: q.Claimable()})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

func legacyKey(pattern string, tpl int64, channel string) string {
	return strings.NewReplacer("{template}", strconv.FormatInt(tpl, 10), "{channel}", channel).Replace(pattern)
}

// readKeys GETs the keys (pipelined); a missing key is nil.
func readKeys(ctx context.Context, rdb redis.UniversalClient, ks []stockKey) (map[string]*int64, error) {
	pipe := rdb.Pipeline()
	cmds := make([]*redis.StringCmd, len(ks))
	for i, k := range ks {
		cmds[i] = pipe.Get(ctx, k.Key)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("read %d stock keys: %w", len(ks), err)
	}
	out := make(map[string]*int64, len(ks))
	for i, k := range ks {
		v, err := cmds[i].Result()
		if errors.Is(err, redis.Nil) {
			out[k.Key] = nil
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", k.Key, err)
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("stock key %s holds %q, not an integer", k.Key, v)
		}
		out[k.Key] = &n
	}
	return out, nil
}

// compareAndSet writes the true value only if the key still holds what we
// read (or is still missing): a concurrent DECR is never overwritten.
// KEYS[1] = key; ARGV[1] = expected old value ("" for missing), ARGV[2] = new value.
var compareAndSet = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur == false then cur = '' end
if cur ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2])
return 1
`)

func casKey(ctx context.Context, rdb redis.UniversalClient, key string, old *int64, value int64) (bool, error) {
	expect := ""
	if old != nil {
		expect = strconv.FormatInt(*old, 10)
	}
	n, err := compareAndSet.Run(ctx, rdb, []string{key}, expect, value).Int()
	if err != nil {
		return false, fmt.Errorf("compare-and-set %s: %w", key, err)
	}
	return n == 1, nil
}

func same(a, b *int64) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

// redis compares the stock keys with the truth and corrects the keys whose
// difference is "lost": after a quiet window neither the key nor the truth
// moved. A key that moved is busy (live DECRs); a truth that moved is a
// writer catching up ("in flight"): both are left for the next pass.
func (r *Reconciler) redis(ctx context.Context, rep *Report, snap sink.Snapshot, budgets map[int64]int64) (map[string]*int64, error) {
	if r.cfg.Redis == nil || r.cfg.RedisMode == sink.RedisOff {
		return nil, nil
	}
	ks := expectedKeys(r.cfg.RedisMode, r.cfg.Keys, r.cfg.Mapping, snap, budgets)
	if len(ks) == 0 {
		return nil, nil
	}
	first, err := readKeys(ctx, r.cfg.Redis, ks)
	if err != nil {
		return nil, err
	}
	var drifting []stockKey
	for _, k := range ks {
		if !same(first[k.Key], ptr(k.Expected)) {
			drifting = append(drifting, k)
		}
	}
	if len(drifting) == 0 {
		return first, nil
	}
	diff := func(k stockKey, expected int64, found *int64, action, reason string) {
		rep.Differences = append(rep.Differences, Difference{Store: StoreRedis, Target: k.Key, Template: k.Template, Channel: k.Channel,
			Expected: expected, Found: found, Action: action, Reason: reason})
	}
	if !*r.cfg.AutoFix {
		for _, k := range drifting {
			diff(k, k.Expected, first[k.Key], ActionReported, "auto-fix is off")
		}
		return first, nil
	}
	select {
	case <-ctx.Done():
		return first, ctx.Err()
	case <-time.After(r.cfg.QuietWindow):
	}
	// the truth again: in owner mode the keys follow channel_quota alone,
	// so a read of the buckets does; a legacy front end's keys need the counts
	var snap2 sink.Snapshot
	if r.cfg.RedisMode == sink.RedisOwner {
		snap2.Quotas, err = sink.ReadQuotas(ctx, r.db, r.cfg.Mapping)
	} else {
		snap2, err = sink.TakeSnapshot(ctx, r.db, r.cfg.Mapping)
	}
	if err != nil {
		return first, fmt.Errorf("second look at the truth: %w", err)
	}
	budgets2 := budgets
	if r.cfg.RedisMode == sink.RedisCorrector {
		if budgets2, err = r.cfg.Mapping.TemplateQuotas(ctx, r.db, templateIDs(snap2)); err != nil {
			return first, err
		}
	}
	now := map[string]int64{}
	for _, k := range expectedKeys(r.cfg.RedisMode, r.cfg.Keys, r.cfg.Mapping, snap2, budgets2) {
		now[k.Key] = k.Expected
	}
	second, err := readKeys(ctx, r.cfg.Redis, drifting)
	if err != nil {
		return first, err
	}
	for _, k := range drifting {
		v1, v2 := first[k.Key], second[k.Key]
		want, known := now[k.Key]
		switch {
		case !known:
			diff(k, k.Expected, v2, ActionInFlight, "the key's bucket is gone from the truth")
		case !same(v1, v2):
			diff(k, want, v2, ActionInFlight, "busy key: it changed during the quiet window (live claims); not touched")
		case want != k.Expected:
			reason := "the truth moved during the quiet window: a writer is catching up (in flight)"
			if v2 != nil && abs(want-*v2) < abs(k.Expected-*v2) {
				reason += "; the gap shrinks"
			}
			diff(k, want, v2, ActionInFlight, reason)
		case same(v2, ptr(want)):
			// it healed while we waited
		default:
			ok, err := casKey(ctx, r.cfg.Redis, k.Key, v2, want)
			if err != nil {
				return first, err
			}
			if !ok {
				diff(k, want, v2, ActionInFlight, "the key moved between the check and the compare-and-set; not touched")
				continue
			}
			if err := r.record(ctx, r.db, rep.TaskID, StoreRedis, k.Key, v2, want,
				fmt.Sprintf("lost: quiet for %s, truth unchanged; compare-and-set", r.cfg.QuietWindow)); err != nil {
				return first, err
			}
			diff(k, want, v2, ActionFixed, "lost: the key and the truth were both quiet; set by compare-and-set")
		}
	}
	return first, nil
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}
