package coupon

import (
	"context"
	"database/sql"
	"sync"
	"sync/atomic"

	"github.com/couponlink/couponlink/api"
	"github.com/couponlink/couponlink/internal/sqltx"
)

// The sold-out memory: in a flash sale a bucket of 2,000 coupons meets
// 200,000 claims, and all but 2,000 of them are refused sold_out. Without
// the memory every refusal runs the claim's write transaction (the single
// path raises the user's count, inserts the coupon and rolls both back when
// the bucket's guard refuses; a group locks the users' and the bucket's
// rows) and waits in its template's queue behind the groups that grant.
//
// The store remembers, per process, each bucket (template, channel) that a
// claim found sold out under the row lock. A claim of a remembered bucket
// is first checked by one read, an autocommit SELECT of primary or unique
// key look-ups, no lock, no write:
//
//   - the bucket's quota and claimed, as committed now;
//   - the user's per-user count of the template;
//   - whether a coupon with the claim's request_id exists.
//
// The checks of one bucket share their reads as the claims share their
// transactions: while one read of a bucket runs, the claims that arrive for
// it wait, and the next read takes up to CombineMax of them (one UNION ALL
// statement; the write combiner's queue, combiner.go, with a read in place
// of the transaction). So a refusal costs a fraction of one statement.
//
// The claim is refused sold_out from that read only when the bucket is full
// (claimed >= quota), the user is below the per-user limit and the
// request_id is new: exactly the claims the write path would refuse
// sold_out at that moment, with the same answer (code, status, message).
// Anything else goes on to the write path as before: a bucket with a free
// slot (quota came back: a release, a transfer, a quota change, raw SQL)
// is forgotten and the claim is decided by the bucket's guard, which stays
// the only authority for a grant; a user at the limit is answered
// limit_reached and a known request_id its replay (or idempotency
// conflict), both by the write path as today. So the memory is never
// stale beyond one committed read: there is no refresh period to tune, and
// several API processes, each with its own memory, decide as one.
//
// Only claims of remembered buckets pay the read, and a claim that is
// granted after all (the read found a free slot) pays it once per time the
// bucket filled up. A retry sent while its first
// attempt is still in flight may be refused sold_out if the first attempt
// has not committed yet; once the first attempt was answered, its coupon is
// committed and the retry gets the replay.

// soldOutMemory is the set of buckets a claim found sold out, and the
// queue of their checks.
type soldOutMemory struct {
	mu      sync.Mutex
	buckets map[soldOutKey]struct{}
	db      *sql.DB
	checks  *combiner[soldOutKey, *soldOutCall]
	stats   groupStats
	refused atomic.Int64 // claims refused from the memory's read
}

type soldOutKey struct {
	template int64
	channel  string
}

// maxSoldOut bounds the memory: past it, it starts empty again (it only
// saves work; a forgotten bucket is learned again by its next refusal).
const maxSoldOut = 10000

func newSoldOutMemory(s *Store, max int) *soldOutMemory {
	m := &soldOutMemory{buckets: map[soldOutKey]struct{}{}, db: s.db}
	m.checks = newCombiner[soldOutKey](s, max, &m.stats, m.check)
	return m
}

func (m *soldOutMemory) has(k soldOutKey) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.buckets[k]
	return ok
}

func (m *soldOutMemory) set(k soldOutKey, soldOut bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !soldOut {
		delete(m.buckets, k)
		return
	}
	if len(m.buckets) >= maxSoldOut {
		clear(m.buckets)
	}
	m.buckets[k] = struct{}{}
}

// learn remembers req's bucket when the write path answered req sold_out.
func (m *soldOutMemory) learn(req ClaimRequest, err error) {
	if m == nil || err == nil {
		return
	}
	if e, ok := AsError(err); ok && e.Code == api.CodeSoldOut {
		m.set(soldOutKey{req.TemplateID, req.Channel}, true)
	}
}

// refusal is req's sold_out answer when its bucket is remembered and its
// check confirms it; nil: the write path decides (also when the check
// failed: the write path meets the same database).
func (m *soldOutMemory) refusal(ctx context.Context, req ClaimRequest, rules templateRules) error {
	if m == nil {
		return nil
	}
	k := soldOutKey{req.TemplateID, req.Channel}
	if !m.has(k) {
		return nil
	}
	call := &soldOutCall{member: newMember(ctx), req: req, rules: rules, memory: m}
	if err := m.checks.do(k, call); err != nil {
		return nil
	}
	if call.refusal != nil {
		m.refused.Add(1)
	}
	return call.refusal
}

// soldOutCall is one claim's check on its way through the memory's queue.
type soldOutCall struct {
	member
	req     ClaimRequest
	rules   templateRules
	memory  *soldOutMemory
	refusal error // the answer: sold_out, or nil for the write path
}

func (c *soldOutCall) base() *member    { return &c.member }
func (c *soldOutCall) groupKey() string { return c.req.RequestID }
func (c *soldOutCall) single(*Store)    { c.memory.check(c.ctx, []*soldOutCall{c}) }
func (c *soldOutCall) reset()           { c.refusal = nil }

// check reads, in one statement, the bucket of the group's claims (one
// bucket), their users' counts and which of their request ids have a
// coupon, and answers each claim: sold_out, or nil (the write path). A
// failed read leaves every claim to the write path.
func (m *soldOutMemory) check(ctx context.Context, group []*soldOutCall) {
	req0 := group[0].req
	users, reqs := make([]any, 0, len(group)), make([]any, 0, len(group))
	for _, c := range group {
		users, reqs = append(users, c.req.UserID), append(reqs, c.req.RequestID)
	}
	var b *bucket
	counts, replays := map[string]int64{}, map[string]bool{}
	args := append(append([]any{req0.TemplateID, req0.Channel, req0.TemplateID}, users...), reqs...)
	err := sqltx.EachRow(ctx, m.db, `SELECT 0, '', quota, claimed FROM channel_quota WHERE template_id = ? AND channel = ?
		UNION ALL SELECT 1, user_id, claimed, 0 FROM user_claim WHERE template_id = ? AND user_id IN (`+sqltx.Placeholders(len(users))+`)
		UNION ALL SELECT 2, request_id, 0, 0 FROM user_coupon WHERE request_id IN (`+sqltx.Placeholders(len(reqs))+`)`,
		args, func(r *sql.Rows) error {
			var kind int
			var id string
			var x, y int64
			if err := r.Scan(&kind, &id, &x, &y); err != nil {
				return err
			}
			switch kind {
			case 0:
				b = &bucket{quota: x, claimed: y}
			case 1:
				counts[id] = x
			default:
				replays[id] = true
			}
			return nil
		})
	k := soldOutKey{req0.TemplateID, req0.Channel}
	if err != nil || b == nil || slotRefusal(req0, b) == nil {
		m.set(k, err != nil) // a free slot (or no bucket): forgotten
		return
	}
	for _, c := range group {
		n, counted := counts[c.req.UserID]
		if !replays[c.req.RequestID] && limitRefusal(c.req, c.rules, n, counted) == nil {
			c.refusal = slotRefusal(c.req, b)
		}
	}
}

// ClaimsRefusedFromMemory is how many claims the sold-out memory refused
// without a write transaction (0 when it is off).
func (s *Store) ClaimsRefusedFromMemory() int64 {
	if s.soldOut == nil {
		return 0
	}
	return s.soldOut.refused.Load()
}
