package coupon

import (
	"context"
	"database/sql"
	"fmt"
	"sort"

	"github.com/couponlink/couponlink/internal/sqltx"
)

// The group transaction of the claim combiner: the claims of one template,
// over any of its channel buckets, in arrival order, answered exactly as the
// single path would answer them one after the other: the same decisions
// (claimRefusal), the same writers (writeGrants) of the same rows
// (user_claim, user_coupon, channel_quota.claimed). Only the per-user
// counts are read differently: the group reads and locks them first, the
// single path raises its one count and reads the old one back. A
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
		if c.err = claimRefusal(c.req, rules, n, has, b); c.err != nil {
			continue
		}
		counts[c.req.UserID] = n + 1
		added[c.req.UserID]++
		b.granted++
		c.out = newClaim(c.req, rules, now)
		granted = append(granted, c)
	}
	if len(granted) == 0 {
		return nil
	}
	if err := countUserClaims(ctx, tx, req0.TemplateID, added, existed); err != nil {
		return err
	}
	// a guard that refuses what the group's locked read allowed fails the group
	return writeGrants(ctx, tx, req0.TemplateID, granted, buckets)
}

// lockBuckets reads (and locks) the bucket rows of the group's channels; a
// channel the template does not have has no entry.
func lockBuckets(ctx context.Context, tx *sql.Tx, template int64, group []*claimCall) (map[string]*bucket, error) {
	args := []any{template}
	seen := map[string]bool{}
	for _, c := range group {
		if !seen[c.req.Channel] {
			seen[c.req.Channel] = true
			args = append(args, c.req.Channel)
		}
	}
	buckets, err := sqltx.Map(ctx, tx, `SELECT channel, quota, claimed FROM channel_quota WHERE template_id = ? AND channel IN (`+
		sqltx.Placeholders(len(args)-1)+`) FOR UPDATE`, args, func(r *sql.Rows) (ch string, b *bucket, err error) {
		b = &bucket{}
		err = r.Scan(&ch, &b.quota, &b.claimed)
		return ch, b, err
	})
	if err != nil {
		return nil, fmt.Errorf("lock the group's channel quotas: %w", err)
	}
	return buckets, nil
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
	counts, err := sqltx.Map(ctx, tx, `SELECT user_id, claimed FROM user_claim WHERE template_id = ? AND user_id IN (`+
		sqltx.Placeholders(len(users))+`) FOR UPDATE`, args, sqltx.KeyValue[string, int64])
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
	for _, fresh := range []bool{true, false} {
		var us []string
		var adds []int64
		for _, u := range users {
			if existed[u] != fresh {
				us, adds = append(us, u), append(adds, added[u])
			}
		}
		if len(us) > 0 {
			if _, err := addUserClaims(ctx, tx, template, us, adds, fresh); err != nil {
				return err
			}
		}
	}
	return nil
}
