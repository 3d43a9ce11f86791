package inventory

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/couponlink/couponlink/internal/sqltx"
)

// The lookups of the cdc's anomaly checks, on the source tables.

// Redeemed returns, for the given coupons, the orders of their redemption
// rows ("" when the mapping names no order column).
func (s *Source) Redeemed(ctx context.Context, q Querier, coupons []int64) (map[int64][]string, error) {
	rl := s.m.RedemptionLog
	order := "''"
	if rl.Order != "" {
		order = "COALESCE(" + quoteIdent(rl.Order) + ", '')"
	}
	out := map[int64][]string{}
	err := inChunks(coupons, 1000, func(chunk []int64) error {
		query := fmt.Sprintf("SELECT %s, %s FROM %s WHERE %s IN (%s)", quoteIdent(rl.Coupon), order,
			s.table(rl.Table), quoteIdent(rl.Coupon), sqltx.Placeholders(len(chunk)))
		return sqltx.EachRow(ctx, q, query, sqltx.Int64Args(chunk), func(rows *sql.Rows) error {
			var c int64
			var o string
			if err := rows.Scan(&c, &o); err != nil {
				return err
			}
			out[c] = append(out[c], o)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("look up redemptions in %s: %w", rl.Table, err)
	}
	return out, nil
}

// PairsOf returns the (template, channel) of the given coupons that still
// have a row.
func (s *Source) PairsOf(ctx context.Context, q Querier, coupons []int64) (map[int64]Pair, error) {
	uc := s.m.UserCoupon
	out := map[int64]Pair{}
	err := inChunks(coupons, 1000, func(chunk []int64) error {
		query := fmt.Sprintf("SELECT %s, %s, %s FROM %s WHERE %s IN (%s)", quoteIdent(uc.ID), quoteIdent(uc.Template),
			s.channelColumn(), s.table(uc.Table), quoteIdent(uc.ID), sqltx.Placeholders(len(chunk)))
		return sqltx.EachRow(ctx, q, query, sqltx.Int64Args(chunk), func(rows *sql.Rows) error {
			var c int64
			var p Pair
			var ch sql.NullString
			if err := rows.Scan(&c, &p.Template, &ch); err != nil {
				return err
			}
			p.Channel = s.m.DefaultChannel
			if ch.Valid {
				p.Channel = ch.String
			}
			out[c] = p
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("look up coupons in %s: %w", uc.Table, err)
	}
	return out, nil
}

// RedemptionKeys counts the redemption rows per (coupon, order) — the
// order as bytes, "" when it is NULL or not mapped — and hands each to
// fn; with duplicatesOnly, only those with more than one row.
func (s *Source) RedemptionKeys(ctx context.Context, q Querier, duplicatesOnly bool, fn func(coupon int64, order string, rows int64) error) error {
	rl := s.m.RedemptionLog
	order := "''"
	if rl.Order != "" {
		order = "CAST(COALESCE(" + quoteIdent(rl.Order) + ", '') AS BINARY)"
	}
	query := fmt.Sprintf("SELECT %s, %s, COUNT(*) FROM %s GROUP BY 1, 2", quoteIdent(rl.Coupon), order, s.table(rl.Table))
	if duplicatesOnly {
		query += " HAVING COUNT(*) > 1"
	}
	return sqltx.EachRow(ctx, q, query, nil, func(rows *sql.Rows) error {
		var c, n int64
		var o string
		if err := rows.Scan(&c, &o, &n); err != nil {
			return err
		}
		return fn(c, o, n)
	})
}
