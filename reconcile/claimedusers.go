package reconcile

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/internal/sqltx"
	"github.com/couponlink/couponlink/inventory"
)

// The claimed-users walk works in pages so that memory stays bounded
// whatever the size of a set: a page of SSCAN, or of users read from
// MySQL, at a time. Members found without the limit wait for a second
// look; at most claimedCandidates of a set a pass (the rest, the next).
// A pass lists at most claimedListed corrections of a set in each
// direction; the others are one difference, one correction_log row.
const (
	claimedPage       = 1000
	claimedCandidates = 10000
	claimedListed     = 100
)

// A member's correction is read as a count of memberships: 1 is "in the
// set", 0 is "not in it".
const (
	notMember int64 = 0
	member    int64 = 1
)

// claimedSet is one template's claimed set in one pass.
type claimedSet struct {
	key      string
	template int64
	limit    int64
	// candidates are the members found without the limit at the first
	// look; card the set's SCARD once they were found
	candidates []string
	card       int64
}

// claimedUsers compares each claimed set (corrector mode) with the users
// at the limit in MySQL: a user at the limit missing from the set is added
// at once (always safe: it only refuses a claim MySQL would refuse too); a
// member without the limit is removed only when, after the quiet window
// (ClaimedQuiet), it is still without it, and only if the set did not
// change meanwhile (compare-and-set on SCARD, in Lua): a front end SADDs
// before its order commits, so a member without a coupon may be a claim in
// flight; a set that moved is left for the next pass.
func (r *Reconciler) claimedUsers(ctx context.Context, rep *Report) error {
	key := r.claimedKey()
	if key == nil {
		return nil
	}
	q := r.queries()
	var sets []*claimedSet
	_, err := q.WithSnapshotTaken(ctx, r.db, func(tx *sql.Tx, _ canal.Position) error {
		limits, err := q.PerUserLimits(ctx, tx, nil)
		if err != nil {
			return err
		}
		var ids []int64
		for _, id := range sortedIDs(limits) {
			if limits[id] > 0 {
				ids = append(ids, id)
			}
		}
		kept, err := r.keptByCDC(ctx, ids, key)
		if err != nil {
			return err
		}
		for _, id := range ids {
			if !kept(id) {
				continue
			}
			s := &claimedSet{key: key(id), template: id, limit: limits[id]}
			if ok, err := r.isSet(ctx, rep, s); err != nil || !ok {
				if err != nil {
					return err
				}
				continue
			}
			sets = append(sets, s)
			if err := r.addMissing(ctx, rep, tx, s); err != nil {
				return err
			}
			if err := r.findExtra(ctx, rep, tx, s); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("claimed users: %w", err)
	}
	if !anyCandidates(sets) {
		return nil
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(r.cfg.ClaimedQuiet):
	}
	for _, s := range sets {
		if err := r.removeExtra(ctx, rep, s); err != nil {
			return fmt.Errorf("claimed users: %w", err)
		}
	}
	return nil
}

// claimedKey names a template's claimed set: a legacy front end's own
// (corrector mode, redis.claimed_users), or the one the cdc keeps (owner
// mode with couponlink cdc -claimed-sets, for the reference schema and a
// mapping with per-user limits: keptByCDC); nil when there are none to
// compare.
func (r *Reconciler) claimedKey() func(template int64) string {
	m := r.mapping()
	switch {
	case r.cfg.Redis == nil:
		return nil
	case r.cfg.RedisMode == inventory.RedisCorrector && m.Redis != nil && m.Redis.ClaimedUsers != "":
		return func(id int64) string { return legacyKey(m.Redis.ClaimedUsers, id, "") }
	case r.cfg.RedisMode == inventory.RedisOwner && m.HasPerUserLimits():
		return r.cfg.Keys.Claimed
	}
	return nil
}

// keptByCDC says, in owner mode, which of the templates' sets the cdc
// keeps (couponlink cdc -claimed-sets stamps each set it writes in the
// template's stamp hash; one pipeline asks for them all): a set no one
// keeps is not compared. Corrector mode: all.
func (r *Reconciler) keptByCDC(ctx context.Context, templates []int64, key func(int64) string) (func(int64) bool, error) {
	if r.cfg.RedisMode != inventory.RedisOwner {
		return func(int64) bool { return true }, nil
	}
	pipe := r.cfg.Redis.Pipeline()
	asked := make(map[int64]*redis.BoolCmd, len(templates))
	for _, id := range templates {
		asked[id] = pipe.HExists(ctx, r.cfg.Keys.Stamps(id), key(id))
	}
	if len(templates) > 0 {
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, fmt.Errorf("read the claimed sets' stamps: %w", err)
		}
	}
	return func(id int64) bool { return asked[id] != nil && asked[id].Val() }, nil
}

// isSet says whether a claimed set's key is a set (or missing: an empty
// set); a key of another type is left for a person, as a stock key that
// holds no integer: the front end owns the key and its format, and
// couponlink does not overwrite what it cannot read.
func (r *Reconciler) isSet(ctx context.Context, rep *Report, s *claimedSet) (bool, error) {
	typ, err := r.cfg.Redis.Type(ctx, s.key).Result()
	if err != nil {
		return false, fmt.Errorf("read the type of %s: %w", s.key, err)
	}
	if typ == "set" || typ == "none" {
		return true, nil
	}
	rep.Differences = append(rep.Differences, Difference{Store: StoreClaimedUsers, Target: s.key, Template: s.template,
		FoundRaw: "<" + typ + ">", Action: ActionNeedsReview, Reason: fmt.Sprintf("holds a %s, not a set: the front end cannot SADD it, and "+
			"couponlink does not overwrite a key of a format it does not know (is the mapping's claimed_users pattern right?)", typ)})
	return false, nil
}

func anyCandidates(sets []*claimedSet) bool {
	for _, s := range sets {
		if len(s.candidates) > 0 {
			return true
		}
	}
	return false
}

// addMissing walks the users at the limit in tx's snapshot, a page at a
// time, and adds those missing from the set (with -no-fix, reports them).
func (r *Reconciler) addMissing(ctx context.Context, rep *Report, tx *sql.Tx, s *claimedSet) error {
	after, missing := "", 0
	for {
		users, err := r.queries().UsersAtLimit(ctx, tx, s.template, s.limit, after, claimedPage)
		if err != nil || len(users) == 0 {
			if err == nil {
				err = r.unlisted(ctx, rep, s, member, missing-claimedListed)
			}
			return err
		}
		after = users[len(users)-1]
		in, err := areMembers(ctx, r.cfg.Redis, s.key, users)
		if err != nil {
			return err
		}
		var add []any
		for i, u := range users {
			if !in[i] {
				add = append(add, u)
			}
		}
		if len(add) == 0 {
			continue
		}
		if *r.cfg.AutoFix {
			if err := r.cfg.Redis.SAdd(ctx, s.key, add...).Err(); err != nil {
				return fmt.Errorf("add %d users at the limit to %s: %w", len(add), s.key, err)
			}
			r.corrected(StoreClaimedUsers, s.template, "", len(add), nil)
		}
		for _, u := range add {
			if missing++; missing <= claimedListed {
				if err := r.memberDiff(ctx, rep, s, u.(string), member, "holds the per-user limit in MySQL, missing from the set", "added (always safe)"); err != nil {
					return err
				}
			}
		}
	}
}

// findExtra walks the set with SSCAN, a page at a time, and keeps its
// members that hold fewer coupons than the limit in tx's snapshot as the
// candidates for a second look (with -no-fix, reports them); it then
// reads the set's SCARD, which the removal compares.
func (r *Reconciler) findExtra(ctx context.Context, rep *Report, tx *sql.Tx, s *claimedSet) error {
	var cursor uint64
	extra := 0
	for {
		page, next, err := r.cfg.Redis.SScan(ctx, s.key, cursor, "", claimedPage).Result()
		if err != nil {
			return fmt.Errorf("walk %s: %w", s.key, err)
		}
		held, err := r.queries().UserCouponCounts(ctx, tx, s.template, page)
		if err != nil {
			return err
		}
		for _, u := range page {
			if held[u] >= s.limit {
				continue
			}
			extra++
			switch {
			case !*r.cfg.AutoFix:
				if extra <= claimedListed {
					if err := r.memberDiff(ctx, rep, s, u, notMember, "in the set, without the per-user limit in MySQL", ""); err != nil {
						return err
					}
				}
			case len(s.candidates) < claimedCandidates:
				s.candidates = append(s.candidates, u)
			}
		}
		if cursor = next; cursor == 0 {
			break
		}
	}
	if !*r.cfg.AutoFix {
		return r.unlisted(ctx, rep, s, notMember, extra-claimedListed)
	}
	if len(s.candidates) < extra {
		rep.Note = joinNote(rep.Note, fmt.Sprintf("%s: %d members without the limit, %d looked at this pass (the rest the next)", s.key, extra, len(s.candidates)))
	}
	if len(s.candidates) == 0 {
		return nil
	}
	card, err := r.cfg.Redis.SCard(ctx, s.key).Result()
	if err != nil {
		return fmt.Errorf("count %s: %w", s.key, err)
	}
	s.card = card
	return nil
}

// removeExtra is the second look at a set's candidates after the quiet
// window: those that still hold fewer coupons than the limit (read now,
// not in a snapshot: a claim in flight at the first look has committed)
// are removed by compare-and-set, in pages; once the set changed, the
// rest are in flight.
func (r *Reconciler) removeExtra(ctx context.Context, rep *Report, s *claimedSet) error {
	listed := 0
	for start := 0; start < len(s.candidates); start += claimedPage {
		page := s.candidates[start:min(start+claimedPage, len(s.candidates))]
		held, err := r.queries().UserCouponCounts(ctx, r.db, s.template, page)
		if err != nil {
			return err
		}
		var still []string
		for _, u := range page {
			if held[u] < s.limit {
				still = append(still, u)
			}
		}
		if len(still) == 0 {
			continue
		}
		removed, ok, err := casRemove(ctx, r.cfg.Redis, s.key, s.card, still)
		if err != nil {
			return err
		}
		if !ok {
			r.claimedInFlight(rep, s, len(s.candidates)-start)
			return nil
		}
		s.card -= int64(len(removed))
		r.corrected(StoreClaimedUsers, s.template, "", len(removed), nil)
		for _, u := range removed {
			if listed++; listed <= claimedListed {
				if err := r.memberDiff(ctx, rep, s, u, notMember, "in the set, without the per-user limit in MySQL",
					fmt.Sprintf("still so after %s, the set unchanged: removed by compare-and-set", r.cfg.ClaimedQuiet)); err != nil {
					return err
				}
			}
		}
	}
	return r.unlisted(ctx, rep, s, notMember, listed-claimedListed)
}

// claimedInFlight records that n candidates of a set were not removed:
// the set changed during the quiet window (live claims).
func (r *Reconciler) claimedInFlight(rep *Report, s *claimedSet, n int) {
	rep.Differences = append(rep.Differences, Difference{Store: StoreClaimedUsers, Target: s.key, Template: s.template,
		Expected: notMember, Found: ptr(int64(n)), Action: ActionInFlight,
		Reason: fmt.Sprintf("%d members without the per-user limit; the set changed during the quiet window (live claims): not touched, the next pass looks again", n)})
}

// memberDiff records one member's difference (want: member or notMember;
// what: what was found, how: what was done about it) and, when it was
// corrected, its correction_log row. With -no-fix it is reported.
func (r *Reconciler) memberDiff(ctx context.Context, rep *Report, s *claimedSet, user string, want int64, what, how string) error {
	d := Difference{Store: StoreClaimedUsers, Target: fmt.Sprintf("%s %q", s.key, user), Template: s.template, Expected: want,
		Found: ptr(member - want), Action: ActionFixed, Reason: what + "; " + how}
	if !*r.cfg.AutoFix {
		d.Action, d.Reason = ActionReported, what+"; auto-fix is off"
	}
	rep.Differences = append(rep.Differences, d)
	if d.Action != ActionFixed {
		return nil
	}
	return r.record(ctx, r.db, rep.TaskID, StoreClaimedUsers, sqltx.Clip(d.Target, 255), d.Found, want, sqltx.Clip(d.Reason, 255))
}

// unlisted records, as one difference and one correction_log row, the n
// members of a set added (want member) or removed (notMember) beyond
// those listed one by one; nothing when n <= 0.
func (r *Reconciler) unlisted(ctx context.Context, rep *Report, s *claimedSet, want int64, n int) error {
	if n <= 0 {
		return nil
	}
	verb := "added"
	if want == notMember {
		verb = "removed"
	}
	d := Difference{Store: StoreClaimedUsers, Target: s.key + " (unlisted, " + verb + ")", Template: s.template, Action: ActionFixed,
		Reason: fmt.Sprintf("%d more members %s (only %d are listed)", n, verb, claimedListed)}
	d.Expected, d.Found = int64(n)*want, ptr(int64(n)*(member-want))
	if !*r.cfg.AutoFix {
		d.Action, d.Reason = ActionReported, fmt.Sprintf("%d more members to be %s (only %d are listed); auto-fix is off", n, verb, claimedListed)
	}
	rep.Differences = append(rep.Differences, d)
	if d.Action != ActionFixed {
		return nil
	}
	return r.record(ctx, r.db, rep.TaskID, StoreClaimedUsers, d.Target, d.Found, d.Expected, d.Reason)
}

// areMembers says, for each of users, whether it is in the set (SISMEMBER,
// pipelined: one round trip a page, on any Redis version).
func areMembers(ctx context.Context, rdb redis.UniversalClient, key string, users []string) ([]bool, error) {
	pipe := rdb.Pipeline()
	cmds := make([]*redis.BoolCmd, len(users))
	for i, u := range users {
		cmds[i] = pipe.SIsMember(ctx, key, u)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("look up %d users in %s: %w", len(users), key, err)
	}
	out := make([]bool, len(users))
	for i, c := range cmds {
		out[i] = c.Val()
	}
	return out, nil
}

// removeIfUnchanged removes members from a set only if its SCARD is still
// what the first look read: any SADD of a new member (a claim starting)
// or SREM since then changes it, and nothing is removed. It returns
// {1, the members removed...}, or {0} when the set changed. KEYS[1] = the
// set; ARGV[1] = SCARD read; ARGV[2...] = the members.
var removeIfUnchanged = redis.NewScript(`
if redis.call('SCARD', KEYS[1]) ~= tonumber(ARGV[1]) then return {0} end
local out = {1}
for i = 2, #ARGV do
  if redis.call('SREM', KEYS[1], ARGV[i]) == 1 then out[#out + 1] = ARGV[i] end
end
return out
`)

// casRemove runs removeIfUnchanged: the members removed, and false when
// the set changed since card was read (nothing removed).
func casRemove(ctx context.Context, rdb redis.UniversalClient, key string, card int64, users []string) ([]string, bool, error) {
	args := make([]any, 0, len(users)+1)
	args = append(args, card)
	for _, u := range users {
		args = append(args, u)
	}
	res, err := removeIfUnchanged.Run(ctx, rdb, []string{key}, args...).Slice()
	if err != nil {
		return nil, false, fmt.Errorf("remove %d members from %s by compare-and-set: %w", len(users), key, err)
	}
	if n, _ := res[0].(int64); n != 1 {
		return nil, false, nil
	}
	removed := make([]string, 0, len(res)-1)
	for _, v := range res[1:] {
		removed = append(removed, fmt.Sprint(v))
	}
	return removed, true, nil
}

func joinNote(note, more string) string {
	if note == "" {
		return more
	}
	return note + "; " + more
}
