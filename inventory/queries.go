package inventory

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/internal/sqltx"
)

// Queries runs couponlink's queries on the source tables a mapping names
// (the reference schema's user_coupon, redemption_log, channel_quota,
// inventory_flow and coupon_template, or a legacy schema's): the counts of
// a snapshot, the channel buckets, the template quotas, a legacy
// template's own counts and the lookups of the cdc's anomaly checks. Every
// such query is here, quoted by one function. It never writes them.
type Queries struct {
	m       *canal.Mapping
	status  map[int64]coupon.Status // stored code -> state
	idChunk int                     // ids a read of DuplicateCouponIDs
}

// NewQueries returns the queries of mapping m (canal.DefaultMapping() for
// the reference schema).
func NewQueries(m *canal.Mapping) *Queries {
	s := &Queries{m: m, status: map[int64]coupon.Status{}, idChunk: 10000}
	for _, st := range coupon.Statuses {
		for _, code := range m.Codes(st) {
			s.status[code] = st
		}
	}
	return s
}

// Querier is a *sql.DB, a *sql.Tx or a *sql.Conn.
type Querier = sqltx.Querier

// quoteIdent quotes a table or column name for MySQL.
func quoteIdent(ident string) string { return "`" + strings.ReplaceAll(ident, "`", "``") + "`" }

// table quotes a mapped table name, with its schema when one is known:
// `legacydb`.`t_user_coupon`.
func (s *Queries) table(name string) string {
	sch, tbl := s.m.SchemaTable(name)
	if sch == "" {
		return quoteIdent(tbl)
	}
	return quoteIdent(sch) + "." + quoteIdent(tbl)
}

// named is a mapped table's name for messages: schema.table.
func (s *Queries) named(name string) string {
	sch, tbl := s.m.SchemaTable(name)
	if sch == "" {
		return tbl
	}
	return sch + "." + tbl
}

// optionalColumn quotes an optional mapped column, or is NULL when the
// mapping names none.
func optionalColumn(c string) string {
	if c == "" {
		return "NULL"
	}
	return quoteIdent(c)
}

// channelColumn is the coupon table's channel column, or NULL (the
// mapping's default channel) when it has none.
func (s *Queries) channelColumn() string { return optionalColumn(s.m.UserCoupon.Channel) }

// CountTemplates counts the user coupons of the given templates per pair
// and state, as they are now (no snapshot position): the truth a check
// confirms a suspicion against, a few templates at a time.
func (s *Queries) CountTemplates(ctx context.Context, q Querier, templates []int64) (map[Pair]*Counts, error) {
	if len(templates) == 0 {
		return map[Pair]*Counts{}, nil
	}
	return s.countCoupons(ctx, q, templates)
}

// countCoupons counts user coupons per pair and state, in q's snapshot,
// summed over the shards of a sharded coupon table (only the templates
// given, when some are), and the releases.
func (s *Queries) countCoupons(ctx context.Context, q Querier, templates []int64) (map[Pair]*Counts, error) {
	out := map[Pair]*Counts{}
	where := ""
	if len(templates) > 0 {
		where = fmt.Sprintf("%s IN (%s)", quoteIdent(s.m.UserCoupon.Template), sqltx.Placeholders(len(templates)))
	}
	if err := s.countRange(ctx, q, where, sqltx.Int64Args(templates), out); err != nil {
		return nil, err
	}
	return out, s.countReleases(ctx, q, templates, out)
}

// countRange adds to out the user coupons matching cond (may be "") per
// pair and state. It groups by the raw columns, so that MySQL walks the
// (template, channel, status) index in order with no temporary table; a
// NULL or missing channel becomes the mapping's default channel here.
func (s *Queries) countRange(ctx context.Context, q Querier, cond string, args []any, out map[Pair]*Counts) error {
	uc := s.m.UserCoupon
	query, args, err := s.groupCount(uc.Table, []string{quoteIdent(uc.Template), s.channelColumn(), quoteIdent(uc.Status)}, and(s.liveCoupon(), cond), args, "")
	if err != nil {
		return fmt.Errorf("count %s: %w", uc.Table, err)
	}
	err = sqltx.EachRow(ctx, q, query, args, func(rows *sql.Rows) error {
		var p Pair
		var tpl, code sql.NullInt64
		var ch sql.NullString
		var n int64
		if err := rows.Scan(&tpl, &ch, &code, &n); err != nil {
			return err
		}
		st, ok := s.status[code.Int64]
		if !tpl.Valid || !code.Valid || !ok {
			return nil // undecodable (a NULL or unmapped status, a NULL template): counted nowhere, as the cdc does
		}
		p.Template, p.Channel = tpl.Int64, s.m.DefaultChannel
		if ch.Valid {
			p.Channel = ch.String
		}
		at(out, p).Bump(st, n)
		return nil
	})
	if err != nil {
		return fmt.Errorf("count %s: %w", uc.Table, err)
	}
	return nil
}

// countReleases adds the releases (inventory_flow) to out, of the
// templates given or of all.
func (s *Queries) countReleases(ctx context.Context, q Querier, templates []int64, out map[Pair]*Counts) error {
	f := s.m.InventoryFlow
	if f == nil {
		return nil
	}
	flowWhere := ""
	if len(templates) > 0 {
		flowWhere = fmt.Sprintf(" AND %s IN (%s)", quoteIdent(f.Template), sqltx.Placeholders(len(templates)))
	}
	query := fmt.Sprintf("SELECT %s, %s, COUNT(*) FROM %s WHERE %s = ?%s GROUP BY 1, 2",
		quoteIdent(f.Template), quoteIdent(f.Channel), s.table(f.Table), quoteIdent(f.Kind), flowWhere)
	err := sqltx.EachRow(ctx, q, query, append([]any{coupon.FlowRelease}, sqltx.Int64Args(templates)...), func(rows *sql.Rows) error {
		var p Pair
		var n int64
		if err := rows.Scan(&p.Template, &p.Channel, &n); err != nil {
			return err
		}
		at(out, p).Released += n
		return nil
	})
	if err != nil {
		return fmt.Errorf("count releases in %s: %w", f.Table, err)
	}
	return nil
}

// at returns the counts of p in m, added when missing.
func at(m map[Pair]*Counts, p Pair) *Counts {
	if m[p] == nil {
		m[p] = &Counts{}
	}
	return m[p]
}

// Quotas reads every channel bucket, or those of the given templates (nil
// when the mapping has none).
func (s *Queries) Quotas(ctx context.Context, q Querier, templates ...int64) (map[Pair]Quota, error) {
	cq := s.m.ChannelQuota
	if cq == nil {
		return nil, nil
	}
	query := fmt.Sprintf("SELECT %s, %s, %s, %s FROM %s", quoteIdent(cq.Template), quoteIdent(cq.Channel),
		quoteIdent(cq.Quota), quoteIdent(cq.Claimed), s.table(cq.Table))
	if len(templates) > 0 {
		query += fmt.Sprintf(" WHERE %s IN (%s)", quoteIdent(cq.Template), sqltx.Placeholders(len(templates)))
	}
	out, err := sqltx.Map(ctx, q, query, sqltx.Int64Args(templates), func(rows *sql.Rows) (p Pair, v Quota, err error) {
		err = rows.Scan(&p.Template, &p.Channel, &v.Quota, &v.Claimed)
		return p, v, err
	})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", cq.Table, err)
	}
	return out, nil
}

// inChunks calls fn with the ids, at most n at a time.
func inChunks(ids []int64, n int, fn func([]int64) error) error {
	for start := 0; start < len(ids); start += n {
		if err := fn(ids[start:min(start+n, len(ids))]); err != nil {
			return err
		}
	}
	return nil
}
