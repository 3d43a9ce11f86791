package coupon

import (
	"context"
	"database/sql"
	"strconv"
	"time"
)

// The redemption combiner. Redemptions of distinct coupons share no row,
// but each of their transactions waits for its own COMMIT's log flush:
// redemptions that arrive while a group of their lane is in flight wait,
// and the next transaction takes up to CombineMax of them. A coupon always
// takes the lane of its id (a few lanes keep a few groups in flight), so
// two requests for one coupon meet in one queue; a group holds a coupon
// once, and the coupon's later request is answered by the single path
// after the group, exactly as the loser of two concurrent requests is
// today (the replay of the same redemption, or already_used).
//
// The group transaction answers each request as redeemOne would, by the
// same decision (redemptionDecision) and the same writers
// (writeRedemptions): it reads the coupons, then every request's (order,
// coupon) key (a redemption found is answered as the single path's replay,
// for any coupon state, which is also what the single path answers once
// its insert hit the key); a coupon that is not AVAILABLE and before its
// expiry is refused alone (already_used, illegal_transition,
// coupon_expired; an unknown coupon not_found). The others get one
// multi-row INSERT of their redemption_log rows and one UPDATE of their
// coupons, each guarded by its own (id, version, status); the rows the
// UPDATE changed must be all of them, else the group rolls back and falls
// back.

// redeemLanes is how many redemption groups of one process may be in
// flight at once (Store.redeemLanes; benchmarks vary it).
const redeemLanes = 4

// redeemCall is one caller's redemption on its way through the combiner.
type redeemCall struct {
	member
	req    RedeemRequest
	key    string    // redemption_log.idempotency_key
	coupon couponRow // as read, when it is to be redeemed
	out    Redemption
	err    error
}

func (c *redeemCall) base() *member    { return &c.member }
func (c *redeemCall) groupKey() string { return strconv.FormatInt(c.req.UserCouponID, 10) }
func (c *redeemCall) single(s *Store)  { c.out, c.err = s.redeemOne(c.ctx, c.req) }
func (c *redeemCall) reset()           { c.out, c.err = Redemption{}, nil }

// decide answers c by redemptionDecision (coupons: as read; k: its key's
// redemption, if looked up and found), or keeps its coupon to be written.
func (c *redeemCall) decide(coupons map[int64]couponRow, k *keyedRedemption, now time.Time) (write bool) {
	row, ok := coupons[c.req.UserCouponID]
	var p *couponRow
	if ok {
		c.coupon, p = row, &row
	}
	c.out, write, c.err = redemptionDecision(c.req, p, k, now)
	return write
}

// ObserveRedemptionGroups sets the observer of redemption group sizes (a metric).
func (s *Store) ObserveRedemptionGroups(fn GroupObserver) { s.redeemStats.observer.Store(&fn) }

// RedemptionGroups is how many redemption groups the combiner ran (0 when it is off).
func (s *Store) RedemptionGroups() int64 { return s.redeemStats.groups.Load() }

// RedemptionFallbacks is how many redemption groups fell back to single redemptions.
func (s *Store) RedemptionFallbacks() int64 { return s.redeemStats.fallbacks.Load() }

// redeemCombined runs a validated redemption through its lane's combiner.
func (s *Store) redeemCombined(ctx context.Context, req RedeemRequest) (Redemption, error) {
	call := &redeemCall{member: newMember(ctx), req: req, key: RedemptionKey(req.OrderID, req.UserCouponID)}
	if err := s.redemptions.do(int(req.UserCouponID%int64(s.redeemLanes)), call); err != nil {
		return Redemption{}, err
	}
	return call.out, call.err
}

// runRedeemGroup answers every call of the group, or marks them solo.
func (s *Store) runRedeemGroup(ctx context.Context, group []*redeemCall) {
	answerGroup(ctx, s, "redemption", &s.redeemStats, group, s.redeemGroupTx)
}

// redeemGroupTx decides and writes a group of distinct coupons. Rule
// refusals and replays are answers, not errors: only a database error (or
// a version guard that refuses) fails and rolls back the group.
func (s *Store) redeemGroupTx(ctx context.Context, tx *sql.Tx, group []*redeemCall) error {
	ids, keys := make([]any, len(group)), make([]any, len(group))
	for i, c := range group {
		ids[i], keys[i] = c.req.UserCouponID, c.key
	}
	// the coupons first, then the keys, as on the single path
	coupons, err := couponsByID(ctx, tx, ids)
	if err != nil {
		return err
	}
	replays, err := redemptionsByKey(ctx, tx, keys)
	if err != nil {
		return err
	}
	if err := s.fault("read", len(group)); err != nil {
		return err
	}
	now := s.clock()
	var todo []*redeemCall
	for _, c := range group {
		var k *keyedRedemption
		if r, found := replays[c.key]; found {
			k = &r
		}
		if c.decide(coupons, k, now) {
			todo = append(todo, c)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	// a version guard that refuses fails the group
	return writeRedemptions(ctx, tx, todo)
}
