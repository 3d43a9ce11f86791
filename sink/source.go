package sink

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/coupon"
)

// source runs couponlink's few queries on the source tables named by the
// mapping: the snapshot counts of a bootstrap, the quotas, and the checks of
// anomalies. It never writes them.
type source struct {
	m      *canal.Mapping
	status map[int64]coupon.Status // stored code -> state
}

func newSource(m *canal.Mapping) *source {
	s := &source{m: m, status: map[int64]coupon.Status{}}
	for _, st := range coupon.Statuses {
		for _, code := range m.Codes(st) {
			s.status[code] = st
		}
	}
	return s
}

func q(ident string) string { return "`" + strings.ReplaceAll(ident, "`", "``") + "`" }

// countCoupons counts user coupons per pair and state, in tx's snapshot.
// It groups by the raw columns, so that MySQL walks the (template, channel,
// status) index in order with no temporary table; a NULL or missing
// channel becomes the mapping's default channel here.
func (s *source) countCoupons(ctx context.Context, tx *sql.Tx) (map[Pair]*Counts, error) {
	uc := s.m.UserCoupon
	channel := "NULL"
	if uc.Channel != "" {
		channel = q(uc.Channel)
	}
	query := fmt.Sprintf("SELECT %s, %s, %s, COUNT(*) FROM %s GROUP BY %s, %s, %s",
		q(uc.Template), channel, q(uc.Status), s.m.QuoteTable(uc.Table), q(uc.Template), channel, q(uc.Status))
	rows, err := tx.QueryContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("count %s: %w", uc.Table, err)
	}
	defer rows.Close()
	out := map[Pair]*Counts{}
	for rows.Next() {
		var p Pair
		var ch sql.NullString
		var code, n int64
		if err := rows.Scan(&p.Template, &ch, &code, &n); err != nil {
			return nil, err
		}
		p.Channel = s.m.DefaultChannel
		if ch.Valid {
			p.Channel = ch.String
		}
		st, ok := s.status[code]
		if !ok {
			return nil, fmt.Errorf("status code %d in %s.%s is not in the mapping (%d coupons have it)", code, uc.Table, uc.Status, n)
		}
		if out[p] == nil {
			out[p] = &Counts{}
		}
		out[p].bump(st, n)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if f := s.m.InventoryFlow; f != nil {
		query := fmt.Sprintf("SELECT %s, %s, COUNT(*) FROM %s WHERE %s = ? GROUP BY 1, 2",
			q(f.Template), q(f.Channel), s.m.QuoteTable(f.Table), q(f.Kind))
		rows, err := tx.QueryContext(ctx, query, coupon.FlowRelease)
		if err != nil {
			return nil, fmt.Errorf("count releases in %s: %w", f.Table, err)
		}
		defer rows.Close()
		for rows.Next() {
			var p Pair
			var n int64
			if err := rows.Scan(&p.Template, &p.Channel, &n); err != nil {
				return nil, err
			}
			if out[p] == nil {
				out[p] = &Counts{}
			}
			out[p].Released += n
		}
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Quota is one channel bucket: its quota and how much of it is claimed.
type Quota struct {
	Quota, Claimed int64
}

// Claimable is what is left to give out.
func (q Quota) Claimable() int64 { return q.Quota - q.Claimed }

// querier is a *sql.DB or a *sql.Tx.
type querier interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}

// quotas reads every channel bucket, or those of the given templates (nil
// when the mapping has none).
func (s *source) quotas(ctx context.Context, qr querier, templates ...int64) (map[Pair]Quota, error) {
	cq := s.m.ChannelQuota
	if cq == nil {
		return nil, nil
	}
	query := fmt.Sprintf("SELECT %s, %s, %s, %s FROM %s", q(cq.Template), q(cq.Channel), q(cq.Quota), q(cq.Claimed), s.m.QuoteTable(cq.Table))
	if len(templates) > 0 {
		query += fmt.Sprintf(" WHERE %s IN (%s)", q(cq.Template), placeholders(len(templates)))
	}
	rows, err := qr.QueryContext(ctx, query, int64Args(templates)...)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", cq.Table, err)
	}
	defer rows.Close()
	out := map[Pair]Quota{}
	for rows.Next() {
		var p Pair
		var v Quota
		if err := rows.Scan(&p.Template, &p.Channel, &v.Quota, &v.Claimed); err != nil {
			return nil, err
		}
		out[p] = v
	}
	return out, rows.Err()
}

// redeemed returns, for the given coupons, the orders of their redemption
// rows ("" when the mapping names no order column).
func (s *source) redeemed(ctx context.Context, db *sql.DB, coupons []int64) (map[int64][]string, error) {
	rl := s.m.RedemptionLog
	order := "''"
	if rl.Order != "" {
		order = "COALESCE(" + q(rl.Order) + ", '')"
	}
	out := map[int64][]string{}
	for start := 0; start < len(coupons); start += 1000 {
		chunk := coupons[start:min(start+1000, len(coupons))]
		query := fmt.Sprintf("SELECT %s, %s FROM %s WHERE %s IN (%s)", q(rl.Coupon), order,
			s.m.QuoteTable(rl.Table), q(rl.Coupon), placeholders(len(chunk)))
		rows, err := db.QueryContext(ctx, query, int64Args(chunk)...)
		if err != nil {
			return nil, fmt.Errorf("look up redemptions in %s: %w", rl.Table, err)
		}
		for rows.Next() {
			var c int64
			var o string
			if err := rows.Scan(&c, &o); err != nil {
				rows.Close()
				return nil, err
			}
			out[c] = append(out[c], o)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// pairsOf returns the (template, channel) of the given coupons that still
// have a row.
func (s *source) pairsOf(ctx context.Context, qr querier, coupons []int64) (map[int64]Pair, error) {
	uc := s.m.UserCoupon
	channel := "NULL"
	if uc.Channel != "" {
		channel = q(uc.Channel)
	}
	out := map[int64]Pair{}
	for start := 0; start < len(coupons); start += 1000 {
		chunk := coupons[start:min(start+1000, len(coupons))]
		rows, err := qr.QueryContext(ctx, fmt.Sprintf("SELECT %s, %s, %s FROM %s WHERE %s IN (%s)", q(uc.ID), q(uc.Template), channel,
			s.m.QuoteTable(uc.Table), q(uc.ID), placeholders(len(chunk))), int64Args(chunk)...)
		if err != nil {
			return nil, fmt.Errorf("look up coupons in %s: %w", uc.Table, err)
		}
		for rows.Next() {
			var c int64
			var p Pair
			var ch sql.NullString
			if err := rows.Scan(&c, &p.Template, &ch); err != nil {
				rows.Close()
				return nil, err
			}
			p.Channel = s.m.DefaultChannel
			if ch.Valid {
				p.Channel = ch.String
			}
			out[c] = p
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

func int64Args(v []int64) []any {
	out := make([]any, len(v))
	for i, x := range v {
		out[i] = x
	}
	return out
}
