package inventory

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/internal/sqltx"
)

// ExpiredByTime counts, per pair of the templates ids, the live AVAILABLE
// coupons whose own expiry (user_coupon.expires_at, a wall clock in the
// mapping's zone) had passed at now: a shop that never writes EXPIRED can
// no longer use them, so people see them as expired. None without an
// expires_at column.
func (s *Queries) ExpiredByTime(ctx context.Context, q Querier, ids []int64, now time.Time) (map[Pair]int64, error) {
	uc := s.m.UserCoupon
	out := map[Pair]int64{}
	if uc.ExpiresAt.Column == "" || len(ids) == 0 || s.m.Reference() {
		return out, nil
	}
	codes := s.m.Codes(coupon.Available)
	past, at := s.m.PastSQL(uc.ExpiresAt, quoteIdent(uc.ExpiresAt.Column), now)
	err := inChunks(ids, 500, func(part []int64) error {
		where := fmt.Sprintf("%s IN (%s) AND %s IN (%s) AND %s%s", quoteIdent(uc.Template), sqltx.Placeholders(len(part)),
			quoteIdent(uc.Status), sqltx.Placeholders(len(codes)), past, andAlso(s.liveCoupon()))
		args := append(append(sqltx.Int64Args(part), sqltx.Int64Args(codes)...), at)
		query, all, err := s.groupCount(uc.Table, []string{quoteIdent(uc.Template), s.channelColumn()}, where, args, "")
		if err != nil {
			return err
		}
		return sqltx.EachRow(ctx, q, query, all, func(rows *sql.Rows) error {
			var p Pair
			var ch sql.NullString
			var n int64
			if err := rows.Scan(&p.Template, &ch, &n); err != nil {
				return err
			}
			p.Channel = s.m.DefaultChannel
			if ch.Valid {
				p.Channel = ch.String
			}
			out[p] += n
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("count the coupons past their %s in %s: %w", uc.ExpiresAt.Column, s.named(uc.Table), err)
	}
	return out, nil
}
