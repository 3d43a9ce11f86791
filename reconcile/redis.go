package reconcile

import (
	"context"
	"fmt"
	"time"

	"github.com/couponlink/couponlink/inventory"
)

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
	c := &keyCheck{r: r, rep: rep, first: first}
	c.firstLook(ks)
	if len(c.drifting) == 0 {
		return read, nil
	}
	select {
	case <-ctx.Done():
		return read, c.stopped(ctx.Err())
	case <-time.After(r.cfg.QuietWindow):
	}
	now, err := r.keysNow(ctx, budgets)
	if err != nil {
		return read, c.stopped(err)
	}
	second, err := readKeys(ctx, r.cfg.Redis, c.drifting)
	if err != nil {
		return read, c.stopped(err)
	}
	return read, c.secondLook(ctx, now, second)
}

// keyCheck is one pass over the stock keys: the values first read, and the
// keys that drift, looked at again after the quiet window in order (done
// of them so far).
type keyCheck struct {
	r        *Reconciler
	rep      *Report
	first    map[string]keyValue
	drifting []stockKey
	done     int
}

func (c *keyCheck) diff(k stockKey, expected int64, found keyValue, action, reason string) {
	c.rep.Differences = append(c.rep.Differences, Difference{Store: StoreRedis, Target: k.Key, Template: k.Template, Channel: k.Channel,
		Expected: expected, Found: found.N, FoundRaw: found.Bad, Action: action, Reason: reason})
}

// stopped records the drifting keys not handled yet as in flight, when the
// pass stops on err, and returns err.
func (c *keyCheck) stopped(err error) error {
	for _, k := range c.drifting[c.done:] {
		c.diff(k, k.Expected, c.first[k.Key], ActionInFlight, reasonNotHandled)
	}
	return err
}

// firstLook sorts the keys read first: equal to the truth, left for a
// person or reported, or drifting (to be looked at again).
func (c *keyCheck) firstLook(ks []stockKey) {
	for _, k := range ks {
		v := c.first[k.Key]
		switch {
		case v.token == intValue(k.Expected).token:
		case v.Bad != "" && c.r.cfg.RedisMode == inventory.RedisCorrector:
			c.diff(k, k.Expected, v, ActionNeedsReview, fmt.Sprintf("holds %s, not an integer: the legacy front end cannot DECR it, and "+
				"couponlink does not overwrite a value of a format it does not know (is the mapping's key pattern right?)", v.Bad))
		case !*c.r.cfg.AutoFix:
			c.diff(k, k.Expected, v, ActionReported, "auto-fix is off")
		default:
			c.drifting = append(c.drifting, k)
		}
	}
}

// keysNow reads the truth again and returns what each stock key should
// hold now: in owner mode the keys follow channel_quota alone, so a read
// of the buckets does; a legacy front end's keys need the counts.
func (r *Reconciler) keysNow(ctx context.Context, budgets map[int64]int64) (map[string]int64, error) {
	var snap inventory.Snapshot
	var err error
	switch {
	case r.sum != nil:
		var parts []partTruth
		if snap, parts, err = r.sum.truth(ctx); err == nil {
			budgets, _ = agreedBudgets(parts)
		}
	case r.cfg.RedisMode == inventory.RedisOwner:
		snap.Quotas, err = r.queries().Quotas(ctx, r.db)
	default:
		snap, err = r.queries().Snapshot(ctx, r.db)
	}
	if err != nil {
		return nil, fmt.Errorf("second look at the truth: %w", err)
	}
	if r.cfg.RedisMode == inventory.RedisCorrector && r.sum == nil {
		if budgets, err = r.queries().TemplateQuotas(ctx, r.db, templateIDs(snap)); err != nil {
			return nil, err
		}
	}
	now := map[string]int64{}
	for _, k := range expectedKeys(r.cfg.RedisMode, r.cfg.Keys, r.cfg.Mapping, snap, budgets) {
		now[k.Key] = k.Expected
	}
	return now, nil
}

// secondLook handles each drifting key by what it and the truth did during
// the quiet window (second: the keys read again; now: the truth again):
// a key that is lost is set by compare-and-set, the others are in flight.
func (c *keyCheck) secondLook(ctx context.Context, now map[string]int64, second map[string]keyValue) error {
	for ; c.done < len(c.drifting); c.done++ {
		k := c.drifting[c.done]
		v1, v2 := c.first[k.Key], second[k.Key]
		want, known := now[k.Key]
		switch {
		case !known:
			c.diff(k, k.Expected, v2, ActionInFlight, "the key's bucket is gone from the truth")
		case v1.token != v2.token:
			c.diff(k, want, v2, ActionInFlight, "busy key: it changed during the quiet window (live claims); not touched")
		case want != k.Expected:
			reason := "the truth moved during the quiet window: a writer is catching up (in flight)"
			if v2.N != nil && abs(want-*v2.N) < abs(k.Expected-*v2.N) {
				reason += "; the gap shrinks"
			}
			c.diff(k, want, v2, ActionInFlight, reason)
		case v2.token == intValue(want).token:
			// it healed while we waited
		default:
			if err := c.set(ctx, k, v2, want); err != nil {
				return c.stopped(err)
			}
		}
	}
	return nil
}

// set corrects a lost key by compare-and-set and records the correction.
// On an error the keys after k are left to stopped (k too, unless it was
// set).
func (c *keyCheck) set(ctx context.Context, k stockKey, v2 keyValue, want int64) error {
	r := c.r
	ok, err := casKey(ctx, r.cfg.Redis, k.Key, v2, want)
	if err != nil {
		return err
	}
	if !ok {
		c.diff(k, want, v2, ActionInFlight, "the key moved between the check and the compare-and-set; not touched")
		return nil
	}
	held := ""
	if v2.Bad != "" {
		held = fmt.Sprintf("held %s, not an integer; ", v2.Bad)
	}
	// the key is set: what follows is recorded even if the record fails
	err = r.record(ctx, r.db, c.rep.TaskID, StoreRedis, k.Key, v2.N, want,
		fmt.Sprintf("%slost: quiet for %s, truth unchanged; compare-and-set", held, r.cfg.QuietWindow))
	r.corrected(StoreRedis, k.Template, k.Channel, 1, err)
	if err != nil {
		c.diff(k, want, v2, ActionFixed, held+"set by compare-and-set; its correction_log row could not be written")
		c.done++
		return err
	}
	c.diff(k, want, v2, ActionFixed, held+"lost: the key and the truth were both quiet; set by compare-and-set")
	return nil
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}
