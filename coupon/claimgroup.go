package coupon

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"

	"github.com/couponlink/couponlink/internal/sqltx"
)

// The group transaction of the claim combiner: the claims of one template,
// over any of its channel buckets, in arrival order, answered exactly as the
// single path would answer them one after the other, with the rows the
// single path writes (user_claim, user_coupon, channel_quota.claimed). A
// request_id twice in a group: the second is answered after the group
// commits, by the single path, like a retry.
//
// Locks are taken in one order by every writer: the group's per-user rows
// (one locking read, in index order), then its bucket rows (one locking
// read, in index order); the single path locks one user row, then one
// bucket row. So two groups, of one process or of two, never wait on each
// other in a cycle.
//
// It runs at READ COMMITTED so that the locking read of user_claim locks
// only the rows that exist, no gaps: under REPEATABLE READ the gap locks of
// a few hundred new users would block and deadlock the other templates'
// groups. A user whose row was missing at the read is then written by a
// plain INSERT: if another transaction created the row meanwhile, the
// duplicate key fails the group, which falls back to the single path.

// bucket is one channel's row of channel_quota as the group sees it.
type bucket struct {
	quota, claimed int64
	granted        int64 // slots the group gives out in this bucket
}

// runClaimGroup answers every call of the group, or marks them solo.
func (s *Store) runClaimGroup(ctx context.Context, group []*claimCall) {
	answerGroup(ctx, s, "claim", &s.claimStats, group, s.claimGroupTx)
}

// claimGroupTx decides and writes the group. Rule refusals are answers, not
// errors: only a database error fails (and rolls back) the group.
func (s *Store) claimGroupTx(ctx context.Context, tx *sql.Tx, group []*claimCall) error {
	req0, rules := group[0].req, group[0].rules
	replays, err := couponsByRequest(ctx, tx, requestIDs(group))
	if err != nil {
		return err
	}
	todo := group[:0:0]
	for _, c := range group {
		if row, ok := replays[c.req.RequestID]; ok {
			c.out, c.err = replayAnswer(row, c.req)
			continue
		}
		todo = append(todo, c)
	}
	if len(todo) == 0 {
		return nil
	}
	counts, err := lockUserClaims(ctx, tx, req0.TemplateID, todo)
	if err != nil {
		return err
	}
	if err := s.fault("counted", len(todo)); err != nil {
		return err
	}
	existed := make(map[string]bool, len(counts))
	for u := range counts {
		existed[u] = true
	}
	buckets, err := lockBuckets(ctx, tx, req0.TemplateID, todo)
	if err != nil {
		return err
	}
	now := s.clock()
	var granted []*claimCall
	added := map[string]int64{}
	for _, c := range todo {
		n, has := counts[c.req.UserID]
		b := buckets[c.req.Channel]
		switch {
		case has && n >= rules.PerUserLimit:
			c.err = limitReached(c.req, rules)
		case b == nil:
			c.err = Invalid("channel", "template %d has no channel %q", c.req.TemplateID, c.req.Channel)
		case b.claimed+b.granted >= b.quota:
			c.err = soldOut(c.req, b.quota, b.quota)
		default:
			counts[c.req.UserID] = n + 1
			added[c.req.UserID]++
			b.granted++
			c.out = Claim{TemplateID: c.req.TemplateID, UserID: c.req.UserID, Channel: c.req.Channel, Status: Available.String(),
				ClaimedAt: now, ExpiresAt: now.Add(Seconds(rules.ValidSeconds))}
			granted = append(granted, c)
		}
	}
	if len(granted) == 0 {
		return nil
	}
	return s.writeClaimGroup(ctx, tx, granted, buckets, added, existed)
}

// writeClaimGroup writes the granted claims: the per-user counts, the
// coupons, the bucket guards (last, like the single path), and reads each
// request's coupon id back.
func (s *Store) writeClaimGroup(ctx context.Context, tx *sql.Tx, granted []*claimCall, buckets map[string]*bucket,
	added map[string]int64, existed map[string]bool) error {
	req0 := granted[0].req
	if err := countUserClaims(ctx, tx, req0.TemplateID, added, existed); err != nil {
		return err
	}
	args := make([]any, 0, 7*len(granted))
	for _, c := range granted {
		args = append(args, c.req.TemplateID, c.req.UserID, c.req.Channel, Available, c.out.ClaimedAt, c.out.ExpiresAt, c.req.RequestID)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO user_coupon
		(template_id, user_id, channel, status, claimed_at, expires_at, request_id) VALUES `+
		rowsOf("(?, ?, ?, ?, ?, ?, ?)", len(granted)), args...); err != nil {
		return fmt.Errorf("insert the group's coupons: %w", err)
	}
	if err := reserveSlots(ctx, tx, req0.TemplateID, buckets); err != nil {
		return err
	}
	// Auto-increment ids of one multi-row INSERT are consecutive only under
	// innodb_autoinc_lock_mode 0 or 1 and auto_increment_increment 1: read
	// them back instead of assuming either.
	rows, err := couponsByRequest(ctx, tx, requestIDs(granted))
	if err != nil {
		return err
	}
	for _, c := range granted {
		row, ok := rows[c.req.RequestID]
		if !ok {
			return fmt.Errorf("claim group: coupon of request_id %q not found after insert", c.req.RequestID)
		}
		c.out.UserCouponID = row.ID
	}
	return nil
}

// lockBuckets reads (and locks) the bucket rows of the group's channels; a
// channel the template does not have has no entry.
func lockBuckets(ctx context.Context, tx *sql.Tx, template int64, group []*claimCall) (map[string]*bucket, error) {
	buckets := map[string]*bucket{}
	args := []any{template}
	seen := map[string]bool{}
	for _, c := range group {
		if !seen[c.req.Channel] {
			seen[c.req.Channel] = true
			args = append(args, c.req.Channel)
		}
	}
	err := sqltx.EachRow(ctx, tx, `SELECT channel, quota, claimed FROM channel_quota WHERE template_id = ? AND channel IN (`+
		sqltx.Placeholders(len(args)-1)+`) FOR UPDATE`, args, func(r *sql.Rows) error {
		var ch string
		b := &bucket{}
		if err := r.Scan(&ch, &b.quota, &b.claimed); err != nil {
			return err
		}
		buckets[ch] = b
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("lock the group's channel quotas: %w", err)
	}
	return buckets, nil
}

// reserveSlots raises each bucket's claimed by the slots the group gives
// out in it, in one UPDATE whose guard (claimed + k <= quota, per row)
// refuses the whole group if any bucket would pass its quota.
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
		return fmt.Errorf("reserve the group's slots in %d bucket(s): %w", len(channels), err)
	}
	if n, _ := res.RowsAffected(); n != int64(len(channels)) {
		return errGroupGuard
	}
	return nil
}

// lockUserClaims reads (and locks) the per-user counts of the group's
// users that have a row; a missing user has no entry.
func lockUserClaims(ctx context.Context, tx *sql.Tx, template int64, group []*claimCall) (map[string]int64, error) {
	users := map[string]bool{}
	args := []any{template}
	for _, c := range group {
		if !users[c.req.UserID] {
			users[c.req.UserID] = true
			args = append(args, c.req.UserID)
		}
	}
	counts := make(map[string]int64, len(users))
	err := sqltx.EachRow(ctx, tx, `SELECT user_id, claimed FROM user_claim WHERE template_id = ? AND user_id IN (`+
		sqltx.Placeholders(len(users))+`) FOR UPDATE`, args, func(r *sql.Rows) error {
		var u string
		var n int64
		if err := r.Scan(&u, &n); err != nil {
			return err
		}
		counts[u] = n
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("lock the group's per-user counts: %w", err)
	}
	return counts, nil
}

// countUserClaims adds the group's claims to the per-user counts: the rows
// read (and locked) are raised, the missing ones inserted (a concurrent
// insert of the same row fails the group on the duplicate key).
func countUserClaims(ctx context.Context, tx *sql.Tx, template int64, added map[string]int64, existed map[string]bool) error {
	users := make([]string, 0, len(added))
	for u := range added {
		users = append(users, u)
	}
	sort.Strings(users) // one lock order for every writer
	var ins, upd []any
	for _, u := range users {
		if !existed[u] {
			ins = append(ins, template, u, added[u])
		} else {
			upd = append(upd, template, u, added[u])
		}
	}
	if len(ins) > 0 {
		if _, err := tx.ExecContext(ctx, `INSERT INTO user_claim (template_id, user_id, claimed) VALUES `+
			rowsOf("(?, ?, ?)", len(ins)/3), ins...); err != nil {
			return fmt.Errorf("insert the group's per-user counts: %w", err)
		}
	}
	if len(upd) > 0 {
		if _, err := tx.ExecContext(ctx, `INSERT INTO user_claim (template_id, user_id, claimed) VALUES `+
			rowsOf("(?, ?, ?)", len(upd)/3)+` ON DUPLICATE KEY UPDATE claimed = claimed + VALUES(claimed)`, upd...); err != nil {
			return fmt.Errorf("count the group's per-user claims: %w", err)
		}
	}
	return nil
}

// couponsByRequest reads the coupons of the given request_ids.
func couponsByRequest(ctx context.Context, q sqltx.Querier, ids []any) (map[string]couponRow, error) {
	rows, err := couponsWhere(ctx, q, "request_id", ids)
	out := make(map[string]couponRow, len(rows))
	for _, c := range rows {
		out[c.RequestID.String] = c
	}
	return out, err
}

// couponsWhere reads the coupons whose column is one of vals.
func couponsWhere(ctx context.Context, q sqltx.Querier, column string, vals []any) ([]couponRow, error) {
	var out []couponRow
	err := sqltx.EachRow(ctx, q, `SELECT `+couponColumns+` FROM user_coupon WHERE `+column+` IN (`+
		sqltx.Placeholders(len(vals))+`)`, vals, func(r *sql.Rows) error {
		c, err := scanCoupon(r)
		out = append(out, c)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("look up the group's coupons by %s: %w", column, err)
	}
	return out, nil
}

func requestIDs(group []*claimCall) []any {
	ids := make([]any, len(group))
	for i, c := range group {
		ids[i] = c.req.RequestID
	}
	return ids
}

// rowsOf is n copies of a VALUES tuple.
func rowsOf(tuple string, n int) string {
	return strings.TrimSuffix(strings.Repeat(tuple+", ", n), ", ")
}
