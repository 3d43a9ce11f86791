package coupon

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/couponlink/couponlink/internal/sqltx"
)

// The readers and writers of the write path. Each takes n rows: the single
// path calls them with one, a combiner's group transaction with the
// group's. So a table's column list, and a guard, exist once.

// errSlotGuard means a bucket's guard refused the slots asked of it.
var errSlotGuard = errors.New("a channel bucket's guard refused the slots asked of it")

// rowsOf is n copies of a VALUES tuple.
func rowsOf(tuple string, n int) string {
	return strings.TrimSuffix(strings.Repeat(tuple+", ", n), ", ")
}

// insertRows inserts n rows into a table's columns (into: "table (a, b,
// ...)"), args holding each row's values in turn, and suffix after them.
func insertRows(ctx context.Context, tx *sql.Tx, into string, n int, args []any, suffix string) (sql.Result, error) {
	tuple := "(" + sqltx.Placeholders(len(args)/n) + ")"
	return tx.ExecContext(ctx, `INSERT INTO `+into+` VALUES `+rowsOf(tuple, n)+suffix, args...)
}

// couponsWhere reads the coupons of a condition on user_coupon.
func couponsWhere(ctx context.Context, q sqltx.Querier, where string, args ...any) ([]couponRow, error) {
	return sqltx.List(ctx, q, `SELECT `+couponColumns+` FROM user_coupon WHERE `+where, args, func(r *sql.Rows) (couponRow, error) {
		return scanCoupon(r)
	})
}

// couponsBy reads the coupons whose column is one of vals, by key.
func couponsBy[K comparable](ctx context.Context, q sqltx.Querier, column string, vals []any, key func(couponRow) K) (map[K]couponRow, error) {
	rows, err := couponsWhere(ctx, q, column+` IN (`+sqltx.Placeholders(len(vals))+`)`, vals...)
	if err != nil {
		return nil, fmt.Errorf("look up %d coupon(s) by %s: %w", len(vals), column, err)
	}
	out := make(map[K]couponRow, len(rows))
	for _, c := range rows {
		out[key(c)] = c
	}
	return out, nil
}

// couponsByRequest reads the coupons of the given request_ids.
func couponsByRequest(ctx context.Context, q sqltx.Querier, ids []any) (map[string]couponRow, error) {
	return couponsBy(ctx, q, "request_id", ids, func(c couponRow) string { return c.RequestID.String })
}

// couponsByID reads the coupons of the given ids (an unknown id has no entry).
func couponsByID(ctx context.Context, q sqltx.Querier, ids []any) (map[int64]couponRow, error) {
	return couponsBy(ctx, q, "id", ids, func(c couponRow) int64 { return c.ID })
}

// addUserClaims raises the per-user counts of a template, users[i]'s by
// adds[i]. fresh: every row is new, and a row another transaction
// inserted meanwhile fails the statement on the duplicate key. Else a row
// that exists is raised, and LastInsertId is the count it had before (for
// one row; 0 when it was inserted).
func addUserClaims(ctx context.Context, tx *sql.Tx, template int64, users []string, adds []int64, fresh bool) (sql.Result, error) {
	args := make([]any, 0, 3*len(users))
	for i, u := range users {
		args = append(args, template, u, adds[i])
	}
	suffix := ` ON DUPLICATE KEY UPDATE claimed = LAST_INSERT_ID(claimed) + VALUES(claimed)`
	if fresh {
		suffix = ""
	}
	res, err := insertRows(ctx, tx, `user_claim (template_id, user_id, claimed)`, len(users), args, suffix)
	if err != nil {
		return nil, fmt.Errorf("count the claims of %d user(s): %w", len(users), err)
	}
	return res, nil
}

// insertCoupons writes the coupons of granted claims (each c.out as
// decided) and fills in their ids.
func insertCoupons(ctx context.Context, tx *sql.Tx, granted []*claimCall) error {
	args := make([]any, 0, 7*len(granted))
	keys := make([]string, len(granted))
	for i, c := range granted {
		args = append(args, c.req.TemplateID, c.req.UserID, c.req.Channel, Available, c.out.ClaimedAt, c.out.ExpiresAt, c.req.RequestID)
		keys[i] = c.req.RequestID
	}
	ids, err := insertWithIDs(ctx, tx, "user_coupon", "template_id, user_id, channel, status, claimed_at, expires_at, request_id",
		"request_id", keys, args)
	if err != nil {
		return fmt.Errorf("insert %d coupon(s): %w", len(granted), err)
	}
	for _, c := range granted {
		id, ok := ids[c.req.RequestID]
		if !ok {
			return fmt.Errorf("coupon of request_id %q not found after insert", c.req.RequestID)
		}
		c.out.UserCouponID = id
	}
	return nil
}

// insertWithIDs inserts a row of args (as insertRows) for each of keys,
// the values of its unique column key, and returns each row's id by its
// key: one row's from LastInsertId, more read back from the key's unique
// index alone, which holds the id (no row is read). The auto-increment ids
// of one multi-row INSERT are consecutive only under
// innodb_autoinc_lock_mode 0 or 1 and auto_increment_increment 1, and
// neither is assumed.
func insertWithIDs(ctx context.Context, tx *sql.Tx, table, columns, key string, keys []string, args []any) (map[string]int64, error) {
	res, err := insertRows(ctx, tx, table+" ("+columns+")", len(keys), args, "")
	if err != nil {
		return nil, err
	}
	if len(keys) == 1 {
		id, err := res.LastInsertId()
		return map[string]int64{keys[0]: id}, err
	}
	vals := make([]any, len(keys))
	for i, k := range keys {
		vals[i] = k
	}
	ids, err := sqltx.Map(ctx, tx, `SELECT `+key+`, id FROM `+table+` WHERE `+key+` IN (`+sqltx.Placeholders(len(vals))+`)`,
		vals, sqltx.KeyValue[string, int64])
	if err != nil {
		return nil, fmt.Errorf("read back the ids: %w", err)
	}
	return ids, nil
}

func requestIDs(calls []*claimCall) []any {
	ids := make([]any, len(calls))
	for i, c := range calls {
		ids[i] = c.req.RequestID
	}
	return ids
}

// reserveSlots raises each bucket's claimed by the slots given out in it,
// in one UPDATE whose guard (claimed + k <= quota, per row) is the
// authority on a grant: if any bucket would pass its quota it refuses with
// errSlotGuard, and the caller rolls back.
func reserveSlots(ctx context.Context, tx *sql.Tx, template int64, buckets map[string]*bucket) error {
	channels := make([]string, 0, len(buckets))
	for ch, b := range buckets {
		if b.granted > 0 {
			channels = append(channels, ch)
		}
	}
	sort.Strings(channels)
	cases := make([]any, 0, 2*len(channels))
	in := make([]any, 0, len(channels))
	for _, ch := range channels {
		cases = append(cases, ch, buckets[ch].granted)
		in = append(in, ch)
	}
	add := "CASE channel " + strings.Repeat("WHEN ? THEN ? ", len(channels)) + "END"
	args := append(append(append(append([]any{}, cases...), template), in...), cases...)
	res, err := tx.ExecContext(ctx, `UPDATE channel_quota SET claimed = claimed + `+add+`
		WHERE template_id = ? AND channel IN (`+sqltx.Placeholders(len(in))+`) AND claimed + `+add+` <= quota`, args...)
	if err != nil {
		return fmt.Errorf("reserve slots in %d bucket(s): %w", len(channels), err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("reserve slots in %d bucket(s): %w", len(channels), err)
	}
	if n != int64(len(channels)) {
		return errSlotGuard
	}
	return nil
}

// insertRedemptions writes the redemption_log rows of decided redemptions
// (each c.out, of its coupon c.coupon as read) and fills in their ids.
func insertRedemptions(ctx context.Context, tx *sql.Tx, calls []*redeemCall) error {
	args := make([]any, 0, 6*len(calls))
	keys := make([]string, len(calls))
	for i, c := range calls {
		args = append(args, c.coupon.ID, c.coupon.TemplateID, c.coupon.Channel, c.req.OrderID, c.out.RedeemedAt, c.key)
		keys[i] = c.key
	}
	ids, err := insertWithIDs(ctx, tx, "redemption_log", "user_coupon_id, template_id, channel, order_id, redeemed_at, idempotency_key",
		"idempotency_key", keys, args)
	if err != nil {
		return fmt.Errorf("insert %d redemption(s): %w", len(calls), err)
	}
	for _, c := range calls {
		if c.out.RedemptionID = ids[c.key]; c.out.RedemptionID == 0 {
			return fmt.Errorf("redemption %q not found after insert", c.key)
		}
	}
	return nil
}

// markUsed moves the coupons of decided redemptions to USED, each by its
// order at its redemption's time, under its own version guard.
func markUsed(ctx context.Context, tx *sql.Tx, calls []*redeemCall) error {
	rows := make([]couponRow, len(calls))
	orders := make([]any, 0, 2*len(calls))
	times := make([]any, 0, 2*len(calls))
	for i, c := range calls {
		rows[i] = c.coupon
		orders = append(orders, c.coupon.ID, c.req.OrderID)
		times = append(times, c.coupon.ID, c.out.RedeemedAt)
	}
	byID := "CASE id " + strings.Repeat("WHEN ? THEN ? ", len(calls)) + "END"
	return moveCoupons(ctx, tx, Used, rows, "order_id = "+byID+", redeemed_at = "+byID, append(orders, times...)...)
}

// moveCoupons moves coupons from the state each was read in to to, each
// guarded by its own (id, version, status): a coupon another transaction
// changed since the read makes it errRaceLost, and the caller rolls back
// (nothing is half-applied). set is more assignments, with their args.
func moveCoupons(ctx context.Context, tx *sql.Tx, to Status, cs []couponRow, set string, args ...any) error {
	q := `UPDATE user_coupon SET status = ?, version = version + 1`
	if set != "" {
		q += ", " + set
	}
	ids := make([]any, 0, len(cs))
	guards := make([]any, 0, 3*len(cs))
	for _, c := range cs {
		ids = append(ids, c.ID)
		guards = append(guards, c.ID, c.Version, c.Status)
	}
	q += ` WHERE id IN (` + sqltx.Placeholders(len(cs)) + `) AND (id, version, status) IN (` + rowsOf("(?, ?, ?)", len(cs)) + `)`
	res, err := tx.ExecContext(ctx, q, append(append(append([]any{to}, args...), ids...), guards...)...)
	if err != nil {
		return fmt.Errorf("move %d coupon(s) to %s: %w", len(cs), to, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("move %d coupon(s) to %s: %w", len(cs), to, err)
	}
	if n != int64(len(cs)) {
		return fmt.Errorf("%w: %d of %d coupon(s) changed since they were read", errRaceLost, int64(len(cs))-n, len(cs))
	}
	return nil
}

// insertFlows writes inventory_flow rows; LastInsertId is the id of the
// first (for one row: its id).
func insertFlows(ctx context.Context, tx *sql.Tx, fs ...flowRow) (sql.Result, error) {
	args := make([]any, 0, 14*len(fs))
	for _, f := range fs {
		args = append(args, f.Coupon.ID, f.Kind, f.Seq, f.Coupon.TemplateID, f.Coupon.Channel, f.From, f.To,
			nullString(f.Mode), nullString(f.OrderID), nullString(f.Reason), nullString(f.Operator), nullString(f.OnBehalfOf), nullString(f.RequestID), f.CreatedAt)
	}
	return insertRows(ctx, tx, `inventory_flow (user_coupon_id, kind, seq, template_id, channel, from_status, to_status,
		mode, order_id, reason, operator, on_behalf_of, request_id, created_at)`, len(fs), args, "")
}

// insertFlow writes one inventory_flow row and returns its id.
func insertFlow(ctx context.Context, tx *sql.Tx, f flowRow) (int64, error) {
	res, err := insertFlows(ctx, tx, f)
	if err != nil {
		return 0, err
	}
	return res.LastInsertId()
}
