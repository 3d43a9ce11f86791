package reconcile

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

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
