package coupon

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/couponlink/couponlink/internal/sqltx"
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
// The group transaction answers each request as redeemOne would: it reads
// the coupons, then every request's (order, coupon) key (a redemption
// found is answered as the single path's replay, for any coupon state,
// which is also what the single path answers once its insert hit the key);
// a coupon that is not AVAILABLE and before its expiry is refused alone
// (already_used, illegal_transition, coupon_expired; an unknown coupon
// not_found). The others get one multi-row INSERT of their redemption_log
// rows and one UPDATE of their coupons, each guarded by its own (id,
// version, status) as on the single path; the rows the UPDATE changed must
// be all of them, else the group rolls back and falls back. Redemption ids
// are read back by idempotency_key.

// redeemLanes is how many redemption groups of one process may be in
// flight at once (Store.redeemLanes; benchmarks vary it).
const redeemLanes = 4

// redeemCall is one caller's redemption on its way through the combiner.
type redeemCall struct {
	member
	req RedeemRequest
	key string // redemption_log.idempotency_key
	out Redemption
	err error
}

func (c *redeemCall) base() *member    { return &c.member }
func (c *redeemCall) groupKey() string { return strconv.FormatInt(c.req.UserCouponID, 10) }
func (c *redeemCall) single(s *Store)  { c.out, c.err = s.redeemOne(c.ctx, c.req) }
func (c *redeemCall) reset()           { c.out, c.err = Redemption{}, nil }

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
	if call.solo {
		call.single(s)
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
	var rows []couponRow
	for _, c := range group {
		row, ok := coupons[c.req.UserCouponID]
		k, replay := replays[c.key]
		switch {
		case !ok:
			c.err = NotFound("user coupon", c.req.UserCouponID)
		case replay:
			c.out, c.err = k.replay()
		case !redeemable(row, now):
			c.err = redeemRefusal(row, now)
		default:
			c.out = Redemption{UserCouponID: row.ID, OrderID: c.req.OrderID, RedeemedAt: now, Status: Used.String()}
			todo, rows = append(todo, c), append(rows, row)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	return s.writeRedeemGroup(ctx, tx, todo, rows, now)
}

// writeRedeemGroup writes the redemptions of todo (rows: their coupons as
// read): the redemption_log rows, then the coupons under their version
// guards, and reads each request's redemption id back.
func (s *Store) writeRedeemGroup(ctx context.Context, tx *sql.Tx, todo []*redeemCall, rows []couponRow, now time.Time) error {
	ins := make([]any, 0, 6*len(todo))
	for i, c := range todo {
		ins = append(ins, rows[i].ID, rows[i].TemplateID, rows[i].Channel, c.req.OrderID, now, c.key)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO redemption_log
		(user_coupon_id, template_id, channel, order_id, redeemed_at, idempotency_key) VALUES `+
		rowsOf("(?, ?, ?, ?, ?, ?)", len(todo)), ins...); err != nil {
		return fmt.Errorf("insert the group's redemptions: %w", err)
	}
	// status = USED, order_id per coupon, WHERE each coupon's own (id,
	// version) and status AVAILABLE: the single path's guard, n times
	args := []any{Used}
	for i, c := range todo {
		args = append(args, rows[i].ID, c.req.OrderID)
	}
	args = append(args, now)
	for _, r := range rows {
		args = append(args, r.ID)
	}
	for _, r := range rows {
		args = append(args, r.ID, r.Version)
	}
	args = append(args, Available)
	res, err := tx.ExecContext(ctx, `UPDATE user_coupon SET status = ?, version = version + 1,
		order_id = CASE id `+strings.Repeat("WHEN ? THEN ? ", len(todo))+`END, redeemed_at = ?
		WHERE id IN (`+sqltx.Placeholders(len(todo))+`) AND (id, version) IN (`+rowsOf("(?, ?)", len(todo))+`) AND status = ?`, args...)
	if err != nil {
		return fmt.Errorf("update the group's coupons to USED: %w", err)
	}
	if n, _ := res.RowsAffected(); n != int64(len(todo)) {
		return fmt.Errorf("%w: %d of %d coupons changed since the group read them", errGroupGuard, int64(len(todo))-n, len(todo))
	}
	return s.readRedemptionIDs(ctx, tx, todo)
}

// readRedemptionIDs reads each written request's redemption id by its key:
// the ids of one multi-row INSERT are not assumed consecutive.
func (s *Store) readRedemptionIDs(ctx context.Context, tx *sql.Tx, todo []*redeemCall) error {
	keys := make([]any, len(todo))
	for i, c := range todo {
		keys[i] = c.key
	}
	ids := make(map[string]int64, len(todo))
	err := sqltx.EachRow(ctx, tx, `SELECT idempotency_key, id FROM redemption_log WHERE idempotency_key IN (`+
		sqltx.Placeholders(len(keys))+`)`, keys, func(r *sql.Rows) error {
		var k string
		var id int64
		err := r.Scan(&k, &id)
		ids[k] = id
		return err
	})
	if err != nil {
		return fmt.Errorf("read the group's redemption ids: %w", err)
	}
	for _, c := range todo {
		if c.out.RedemptionID = ids[c.key]; c.out.RedemptionID == 0 {
			return fmt.Errorf("redemption group: redemption %q not found after insert", c.key)
		}
	}
	return nil
}

// couponsByID reads the coupons of the given ids (an unknown id has no entry).
func couponsByID(ctx context.Context, q sqltx.Querier, ids []any) (map[int64]couponRow, error) {
	rows, err := couponsWhere(ctx, q, "id", ids)
	out := make(map[int64]couponRow, len(rows))
	for _, c := range rows {
		out[c.ID] = c
	}
	return out, err
}
