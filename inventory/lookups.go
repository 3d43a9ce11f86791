package inventory

import (
	"context"
	"database/sql"
	"fmt"
	"slices"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/internal/sqltx"
)

// The lookups of the cdc's anomaly checks, on the source tables.

// Redeemed returns, for the given coupons, the orders of their live
// redemption rows ("" when the mapping names no order column), looked up in every
// shard of a sharded redemption table: a row may be in another shard than
// its coupon.
func (s *Queries) Redeemed(ctx context.Context, q Querier, coupons []int64) (map[int64][]string, error) {
	if err := s.redemptionTable(); err != nil {
		return nil, err
	}
	rl := s.m.RedemptionLog
	order := "''"
	if rl.Order != "" {
		order = "COALESCE(" + quoteIdent(rl.Order) + ", '')"
	}
	out := map[int64][]string{}
	err := inChunks(coupons, 1000, func(chunk []int64) error {
		return s.each(rl.Table, func(table string) error {
			query := fmt.Sprintf("SELECT %s, %s FROM %s WHERE %s IN (%s)%s", quoteIdent(rl.Coupon), order,
				table, quoteIdent(rl.Coupon), sqltx.Placeholders(len(chunk)), andAlso(s.liveEvidence()))
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
	})
	if err != nil {
		return nil, fmt.Errorf("look up redemptions in %s: %w", rl.Table, err)
	}
	return out, nil
}

// PairsOf returns the (template, channel) of the given coupons that still
// have a row, in any shard of a sharded coupon table (coupon ids are unique
// across shards: docs/legacy-schemas.md "Sharded tables").
func (s *Queries) PairsOf(ctx context.Context, q Querier, coupons []int64) (map[int64]Pair, error) {
	uc := s.m.UserCoupon
	out := map[int64]Pair{}
	err := inChunks(coupons, 1000, func(chunk []int64) error {
		return s.each(uc.Table, func(table string) error {
			query := fmt.Sprintf("SELECT %s, %s, %s FROM %s WHERE %s IN (%s)", quoteIdent(uc.ID), quoteIdent(uc.Template),
				s.channelColumn(), table, quoteIdent(uc.ID), sqltx.Placeholders(len(chunk)))
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
	})
	if err != nil {
		return nil, fmt.Errorf("look up coupons in %s: %w", uc.Table, err)
	}
	return out, nil
}

// RedemptionKeys counts the live redemption rows per (coupon, order) — the
// order as bytes, "" when it is NULL or not mapped — over every shard of a
// sharded redemption table, and hands each to fn; with duplicatesOnly,
// only those with more than one row (in one shard or in several).
func (s *Queries) RedemptionKeys(ctx context.Context, q Querier, duplicatesOnly bool, fn func(coupon int64, order string, rows int64) error) error {
	if err := s.redemptionTable(); err != nil {
		return err
	}
	rl := s.m.RedemptionLog
	order := "''"
	if rl.Order != "" {
		order = "CAST(COALESCE(" + quoteIdent(rl.Order) + ", '') AS BINARY)"
	}
	having := ""
	if duplicatesOnly {
		having = "> 1"
	}
	query, args, err := s.groupCount(rl.Table, []string{quoteIdent(rl.Coupon), order}, s.liveEvidence(), nil, having)
	if err != nil {
		return err
	}
	return sqltx.EachRow(ctx, q, query, args, func(rows *sql.Rows) error {
		var c, n int64
		var o string
		if err := rows.Scan(&c, &o, &n); err != nil {
			return err
		}
		return fn(c, o, n)
	})
}

// redemptionTable refuses a lookup in the redemption table of a mapping
// whose evidence is not a write-off table: it has none (the callers skip
// those checks; this says so if one does not).
func (s *Queries) redemptionTable() error {
	if ev := s.m.RedemptionEvidence(); ev != canal.EvidenceTable {
		return fmt.Errorf("the mapping's redemption evidence is %s: there is no redemption table to look in", ev)
	}
	return nil
}

// MaxOrderKey is the longest user id or order number the order_table
// check keeps (VARBINARY(255) in cdc_order_key), in bytes; the cdc cuts
// what the binlog gives it to the same length.
const MaxOrderKey = 255

// orderKeyUser is a user column as the order_table check keys it.
func orderKeyUser(col string) string {
	return fmt.Sprintf("LEFT(COALESCE(CAST(%s AS BINARY), ''), %d)", quoteIdent(col), MaxOrderKey)
}

// LastUsedCoupon returns the highest id among the USED coupons of
// template whose user column is user (as the order_table check keys it);
// 0 when it has none.
func (s *Queries) LastUsedCoupon(ctx context.Context, q Querier, template int64, user string) (int64, error) {
	uc := s.m.UserCoupon
	var id int64
	err := s.eachUserCoupons(ctx, q, "COALESCE(MAX("+quoteIdent(uc.ID)+"), 0)", template, user, s.m.Codes(coupon.Used), func(rows *sql.Rows) error {
		var last int64
		err := rows.Scan(&last)
		id = max(id, last)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("look up the last USED coupon in %s: %w", s.named(uc.Table), err)
	}
	return id, nil
}

// eachUserCoupons selects sel (an expression of user_coupon's columns) from
// the live coupons of template whose user column is user (as the
// order_table check keys it) and whose status is one of codes, in each
// shard of a sharded coupon table, and hands each row to fn.
func (s *Queries) eachUserCoupons(ctx context.Context, q Querier, sel string, template int64, user string, codes []int64, fn func(*sql.Rows) error) error {
	uc := s.m.UserCoupon
	return s.each(uc.Table, func(table string) error {
		query := fmt.Sprintf("SELECT %s FROM %s WHERE %s = ? AND %s IN (%s) AND %s = ?%s", sel, table,
			quoteIdent(uc.Template), quoteIdent(uc.Status), sqltx.Placeholders(len(codes)), orderKeyUser(uc.User), andAlso(s.liveCoupon()))
		return sqltx.EachRow(ctx, q, query, append(append([]any{template}, sqltx.Int64Args(codes)...), []byte(user)), fn)
	})
}

// UsedAmong returns which of the coupons are live and USED, looked up in
// every shard of a sharded coupon table.
func (s *Queries) UsedAmong(ctx context.Context, q Querier, coupons []int64) (map[int64]bool, error) {
	uc := s.m.UserCoupon
	codes := s.m.Codes(coupon.Used)
	out := map[int64]bool{}
	err := inChunks(coupons, 1000, func(chunk []int64) error {
		return s.each(uc.Table, func(table string) error {
			query := fmt.Sprintf("SELECT %s FROM %s WHERE %s IN (%s) AND %s IN (%s)%s", quoteIdent(uc.ID), table, quoteIdent(uc.ID),
				sqltx.Placeholders(len(chunk)), quoteIdent(uc.Status), sqltx.Placeholders(len(codes)), andAlso(s.liveCoupon()))
			return sqltx.EachRow(ctx, q, query, append(sqltx.Int64Args(chunk), sqltx.Int64Args(codes)...), func(rows *sql.Rows) error {
				var c int64
				err := rows.Scan(&c)
				out[c] = true
				return err
			})
		})
	})
	if err != nil {
		return nil, fmt.Errorf("look up USED coupons in %s: %w", s.named(uc.Table), err)
	}
	return out, nil
}

// UserCoupons returns the ids of the live coupons of template whose user
// column is user (as UserClaims keys it), every decodable state, in id
// order: the coupons an excess found at a bootstrap names.
func (s *Queries) UserCoupons(ctx context.Context, q Querier, template int64, user string) ([]int64, error) {
	uc := s.m.UserCoupon
	codes := make([]int64, 0, len(s.status))
	for c := range s.status {
		codes = append(codes, c)
	}
	var ids []int64
	err := s.eachUserCoupons(ctx, q, quoteIdent(uc.ID), template, user, codes, func(rows *sql.Rows) error {
		var id int64
		err := rows.Scan(&id)
		ids = append(ids, id)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list a user's coupons in %s: %w", s.named(uc.Table), err)
	}
	slices.Sort(ids)
	return ids, nil
}

// OrderKeyDifferences hands fn, in q's snapshot, each (template, user)
// whose USED coupons and orders differ (evidence order_table): the counts
// and the highest id among its USED coupons (0: none). The user is the
// bytes of its column ("" for NULL) cut to MaxOrderKey, like the cdc's;
// coupons with a NULL template or soft-deleted, and orders without a
// template (NULL or 0), closed or soft-deleted, are left out, as the cdc
// leaves them.
func (s *Queries) OrderKeyDifferences(ctx context.Context, q Querier, fn func(template int64, user string, used, orders, lastCoupon int64) error) error {
	o := s.m.Orders
	if o == nil || s.m.RedemptionEvidence() != canal.EvidenceOrderTable {
		return fmt.Errorf("the mapping's redemption evidence is %s: there is no order table", s.m.RedemptionEvidence())
	}
	uc := s.m.UserCoupon
	codes := s.m.Codes(coupon.Used)
	user := orderKeyUser
	used, args, err := s.unionAll(uc.Table, func(table string) string {
		return fmt.Sprintf("SELECT %s AS tpl, %s AS usr, COUNT(*) AS used, 0 AS orders, MAX(%s) AS coupon FROM %s WHERE %s IN (%s) AND %s IS NOT NULL%s GROUP BY 1, 2",
			quoteIdent(uc.Template), user(uc.User), quoteIdent(uc.ID), table, quoteIdent(uc.Status), sqltx.Placeholders(len(codes)), quoteIdent(uc.Template),
			andAlso(s.liveCoupon()))
	}, sqltx.Int64Args(codes))
	if err != nil {
		return err
	}
	orders, _, err := s.unionAll(o.Table, func(table string) string {
		return fmt.Sprintf("SELECT %s, %s, 0, COUNT(*), NULL FROM %s WHERE %s IS NOT NULL AND %s <> 0%s GROUP BY 1, 2",
			quoteIdent(o.Template), user(o.User), table, quoteIdent(o.Template), quoteIdent(o.Template), andAlso(s.openOrder()))
	}, nil)
	if err != nil {
		return err
	}
	query := fmt.Sprintf(`SELECT tpl, usr, SUM(used), SUM(orders), COALESCE(MAX(coupon), 0) FROM (%s UNION ALL %s) k
		GROUP BY tpl, usr HAVING SUM(used) <> SUM(orders)`, used, orders)
	err = sqltx.EachRow(ctx, q, query, args, func(rows *sql.Rows) error {
		var tpl, used, orders, last int64
		var usr []byte
		if err := rows.Scan(&tpl, &usr, &used, &orders, &last); err != nil {
			return err
		}
		return fn(tpl, string(usr), used, orders, last)
	})
	if err != nil {
		return fmt.Errorf("compare the USED coupons of %s with the orders of %s: %w", s.named(uc.Table), s.named(o.Table), err)
	}
	return nil
}

// OpenOrders returns which of the given order numbers (orders.order) have
// an open row in the order table: neither closed nor soft-deleted
// (evidence coupon_order: whether an order kept on a coupon row proves
// its use).
func (s *Queries) OpenOrders(ctx context.Context, q Querier, orders []string) (map[string]bool, error) {
	o := s.m.Orders
	if o == nil || o.Order == "" {
		return nil, fmt.Errorf("the mapping names no order table with an order column")
	}
	out := map[string]bool{}
	for start := 0; start < len(orders); start += 1000 {
		chunk := orders[start:min(start+1000, len(orders))]
		args := make([]any, len(chunk))
		for i, v := range chunk {
			args[i] = v
		}
		err := s.each(o.Table, func(table string) error {
			query := fmt.Sprintf("SELECT %s FROM %s WHERE %s IN (%s)%s", quoteIdent(o.Order), table, quoteIdent(o.Order),
				sqltx.Placeholders(len(chunk)), andAlso(s.openOrder()))
			return sqltx.EachRow(ctx, q, query, args, func(rows *sql.Rows) error {
				var v []byte
				err := rows.Scan(&v)
				out[string(v)] = true
				return err
			})
		})
		if err != nil {
			return nil, fmt.Errorf("look up orders in %s: %w", s.named(o.Table), err)
		}
	}
	return out, nil
}
