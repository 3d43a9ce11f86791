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
	"github.com/couponlink/couponlink/inventory"
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
func expectedKeys(mode inventory.RedisMode, keys inventory.Keys, m *canal.Mapping, snap inventory.Snapshot, budgets map[int64]int64) []stockKey {
	var out []stockKey
	switch mode {
	case inventory.RedisOwner:
		total := map[int64]int64{}
		for p, q := range snap.Quotas {
			out = append(out, stockKey{Key: keys.Stock(p.Template, p.Channel), Template: p.Template, Channel: p.Channel, Expected: q.Claimable()})
			total[p.Template] += q.Claimable()
		}
		for tpl, n := range total {
			out = append(out, stockKey{Key: keys.TemplateStock(tpl), Template: tpl, Expected: n})
		}
	case inventory.RedisCorrector:
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

// keyValue is what a stock key holds, as read.
type keyValue struct {
	N *int64 // the integer it holds; nil when it is missing or holds something else
	// Bad says what it holds when that is not an integer a DECR can use: a
	// quoted string ("garbage", "007", "1.5") or a wrong type (<hash>).
	Bad string
	// token is what the compare-and-set compares (see keyToken): the raw
	// value, so a key that holds anything at all is only written if unchanged.
	token string
}

// keyToken is a key's content as one string: "" missing, "s:<value>" a
// string, "t:<type>:<DUMP>" any other type. The read of a wrong-type key
// and the compare-and-set compute it with the same Lua.
const keyToken = `
local function token(k)
  local t = redis.call('TYPE', k).ok
  if t == 'none' then return '' end
  if t == 'string' then return 's:' .. redis.call('GET', k) end
  return 't:' .. t .. ':' .. redis.call('DUMP', k)
end
`

var readToken = redis.NewScript(keyToken + `return token(KEYS[1])`)

// compareAndSet writes the true value only if the key still holds what we
// read (token; "" for missing): a concurrent DECR is never overwritten. SET
// replaces a key of any type, so a wrong-type key is deleted and set in
// one step. KEYS[1] = key; ARGV[1] = token read, ARGV[2] = new value.
var compareAndSet = redis.NewScript(keyToken + `
if token(KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2])
return 1
`)

func intValue(n int64) keyValue {
	return keyValue{N: &n, token: "s:" + strconv.FormatInt(n, 10)}
}

// stringValue reads a string key's value: an integer only in Redis's own
// canonical form (what INCR/DECR accept: no sign "+", no leading zeros,
// no spaces).
func stringValue(v string) keyValue {
	if n, err := strconv.ParseInt(v, 10, 64); err == nil && strconv.FormatInt(n, 10) == v {
		return intValue(n)
	}
	shown := v
	if len(shown) > 40 {
		shown = shown[:40] + "…"
	}
	return keyValue{Bad: strconv.Quote(shown), token: "s:" + v}
}

// snapshot is the value as the task records it: the integer, null when
// missing, or what it holds when that is not an integer.
func (v keyValue) snapshot() any {
	if v.Bad != "" {
		return v.Bad
	}
	return v.N
}

// readKeys GETs the keys (pipelined); a missing key has an empty keyValue.
// A key of another type than string is read again, whole, by readToken.
func readKeys(ctx context.Context, rdb redis.UniversalClient, ks []stockKey) (map[string]keyValue, error) {
	pipe := rdb.Pipeline()
	cmds := make([]*redis.StringCmd, len(ks))
	for i, k := range ks {
		cmds[i] = pipe.Get(ctx, k.Key)
	}
	_, _ = pipe.Exec(ctx) // each command carries its own error
	out := make(map[string]keyValue, len(ks))
	for i, k := range ks {
		v, err := cmds[i].Result()
		switch {
		case err == nil:
			out[k.Key] = stringValue(v)
		case errors.Is(err, redis.Nil):
			out[k.Key] = keyValue{}
		case redis.HasErrorPrefix(err, "WRONGTYPE"):
			tok, err := readToken.Run(ctx, rdb, []string{k.Key}).Text()
			if err != nil {
				return nil, fmt.Errorf("read %s: %w", k.Key, err)
			}
			out[k.Key] = tokenValue(tok)
		default:
			return nil, fmt.Errorf("read %d stock keys: %s: %w", len(ks), k.Key, err)
		}
	}
	return out, nil
}

// tokenValue is the keyValue of a token read by readToken.
func tokenValue(tok string) keyValue {
	switch {
	case tok == "":
		return keyValue{}
	case strings.HasPrefix(tok, "s:"):
		return stringValue(tok[2:])
	}
	typ, _, _ := strings.Cut(strings.TrimPrefix(tok, "t:"), ":")
	return keyValue{Bad: "<" + typ + ">", token: tok}
}

func casKey(ctx context.Context, rdb redis.UniversalClient, key string, old keyValue, value int64) (bool, error) {
	n, err := compareAndSet.Run(ctx, rdb, []string{key}, old.token, value).Int()
	if err != nil {
		return false, fmt.Errorf("compare-and-set %s: %w", key, err)
	}
	return n == 1, nil
}

// redis compares the stock keys with the truth and corrects the keys whose
// difference is "lost": after a quiet window neither the key nor the truth
// moved. A key that moved is busy (live DECRs); a truth that moved is a
// writer catching up ("in flight"): both are left for the next pass. A key
// that holds something else than an integer (a string like "garbage", a
// hash) is drift like a missing key: in owner mode it is corrected the same
// way; in corrector mode it is left for a person, since the legacy front
// end owns the key and its format. It returns the keys as first read.
func (r *Reconciler) redis(ctx context.Context, rep *Report, snap inventory.Snapshot, budgets map[int64]int64) (map[string]any, error) {
	if r.cfg.Redis == nil || r.cfg.RedisMode == inventory.RedisOff {
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
	read := make(map[string]any, len(first))
	for k, v := range first {
		read[k] = v.snapshot()
	}
	diff := func(k stockKey, expected int64, found keyValue, action, reason string) {
		rep.Differences = append(rep.Differences, Difference{Store: StoreRedis, Target: k.Key, Template: k.Template, Channel: k.Channel,
			Expected: expected, Found: found.N, FoundRaw: found.Bad, Action: action, Reason: reason})
	}
	var drifting []stockKey
	for _, k := range ks {
		v := first[k.Key]
		switch {
		case v.token == intValue(k.Expected).token:
		case v.Bad != "" && r.cfg.RedisMode == inventory.RedisCorrector:
			diff(k, k.Expected, v, ActionNeedsReview, fmt.Sprintf("holds %s, not an integer: the legacy front end cannot DECR it, and "+
				"couponlink does not overwrite a value of a format it does not know (is the mapping's key pattern right?)", v.Bad))
		case !*r.cfg.AutoFix:
			diff(k, k.Expected, v, ActionReported, "auto-fix is off")
		default:
			drifting = append(drifting, k)
		}
	}
	if len(drifting) == 0 {
		return read, nil
	}
	// what is left undone when the pass stops on an error is recorded as such
	done := 0
	stopped := func(err error) (map[string]any, error) {
		for _, k := range drifting[done:] {
			diff(k, k.Expected, first[k.Key], ActionInFlight, reasonNotHandled)
		}
		return read, err
	}
	select {
	case <-ctx.Done():
		return stopped(ctx.Err())
	case <-time.After(r.cfg.QuietWindow):
	}
	// the truth again: in owner mode the keys follow channel_quota alone,
	// so a read of the buckets does; a legacy front end's keys need the counts
	var snap2 inventory.Snapshot
	if r.cfg.RedisMode == inventory.RedisOwner {
		snap2.Quotas, err = r.src.Quotas(ctx, r.db)
	} else {
		snap2, err = r.src.Snapshot(ctx, r.db)
	}
	if err != nil {
		return stopped(fmt.Errorf("second look at the truth: %w", err))
	}
	budgets2 := budgets
	if r.cfg.RedisMode == inventory.RedisCorrector {
		if budgets2, err = r.src.TemplateQuotas(ctx, r.db, templateIDs(snap2)); err != nil {
			return stopped(err)
		}
	}
	now := map[string]int64{}
	for _, k := range expectedKeys(r.cfg.RedisMode, r.cfg.Keys, r.cfg.Mapping, snap2, budgets2) {
		now[k.Key] = k.Expected
	}
	second, err := readKeys(ctx, r.cfg.Redis, drifting)
	if err != nil {
		return stopped(err)
	}
	for ; done < len(drifting); done++ {
		k := drifting[done]
		v1, v2 := first[k.Key], second[k.Key]
		want, known := now[k.Key]
		switch {
		case !known:
			diff(k, k.Expected, v2, ActionInFlight, "the key's bucket is gone from the truth")
		case v1.token != v2.token:
			diff(k, want, v2, ActionInFlight, "busy key: it changed during the quiet window (live claims); not touched")
		case want != k.Expected:
			reason := "the truth moved during the quiet window: a writer is catching up (in flight)"
			if v2.N != nil && abs(want-*v2.N) < abs(k.Expected-*v2.N) {
				reason += "; the gap shrinks"
			}
			diff(k, want, v2, ActionInFlight, reason)
		case v2.token == intValue(want).token:
			// it healed while we waited
		default:
			ok, err := casKey(ctx, r.cfg.Redis, k.Key, v2, want)
			if err != nil {
				return stopped(err)
			}
			if !ok {
				diff(k, want, v2, ActionInFlight, "the key moved between the check and the compare-and-set; not touched")
				continue
			}
			held := ""
			if v2.Bad != "" {
				held = fmt.Sprintf("held %s, not an integer; ", v2.Bad)
			}
			// the key is set: what follows is recorded even if the record fails
			if err := r.record(ctx, r.db, rep.TaskID, StoreRedis, k.Key, v2.N, want,
				fmt.Sprintf("%slost: quiet for %s, truth unchanged; compare-and-set", held, r.cfg.QuietWindow)); err != nil {
				diff(k, want, v2, ActionFixed, held+"set by compare-and-set; its correction_log row could not be written")
				done++
				return stopped(err)
			}
			diff(k, want, v2, ActionFixed, held+"lost: the key and the truth were both quiet; set by compare-and-set")
		}
	}
	return read, nil
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}
