package inventory

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/couponlink/couponlink/internal/sqltx"
)

// claimCounted is the condition on user_coupon of the coupons that count
// toward a per-user limit, as the cdc counts them (UserClaims): a user, a
// mapped status (every state), not soft-deleted; with its arguments.
func (s *Queries) claimCounted() (string, []any) {
	uc := s.m.UserCoupon
	codes := make([]int64, 0, len(s.status))
	for c := range s.status {
		codes = append(codes, c)
	}
	return fmt.Sprintf("%s IS NOT NULL AND %s IN (%s)%s", quoteIdent(uc.User), quoteIdent(uc.Status),
		sqltx.Placeholders(len(codes)), andAlso(s.liveCoupon())), sqltx.Int64Args(codes)
}

// UsersAtLimit returns, in q's snapshot, up to n users after `after` (in
// the user column's order; "" from the first) who hold at least limit
// coupons of template that count toward it, in that order: one page of a
// walk that never holds all the users at once. The users are the user
// column's values (a front end's claimed set holds the same); an index on
// (template, user) lets each page start where the last ended.
func (s *Queries) UsersAtLimit(ctx context.Context, q Querier, template, limit int64, after string, n int) ([]string, error) {
	uc := s.m.UserCoupon
	where, args := s.claimCounted()
	// the page's order and end ride on the HAVING clause (ints, no argument)
	query, args, err := s.groupCount(uc.Table, []string{quoteIdent(uc.User)},
		fmt.Sprintf("%s = ? AND %s > ? AND %s", quoteIdent(uc.Template), quoteIdent(uc.User), where),
		append([]any{template, after}, args...), fmt.Sprintf(">= %d ORDER BY 1 LIMIT %d", limit, n))
	if err != nil {
		return nil, err
	}
	var out []string
	err = eachUserCount(ctx, q, query, args, func(user string, _ int64) { out = append(out, user) })
	if err != nil {
		return nil, fmt.Errorf("list the users at the limit of template %d in %s: %w", template, s.named(uc.Table), err)
	}
	return out, nil
}

// eachUserCount runs a query of (user, count) rows and hands fn each.
func eachUserCount(ctx context.Context, q Querier, query string, args []any, fn func(user string, coupons int64)) error {
	return sqltx.EachRow(ctx, q, query, args, func(rows *sql.Rows) error {
		var user string
		var c int64
		err := rows.Scan(&user, &c)
		fn(user, c)
		return err
	})
}
