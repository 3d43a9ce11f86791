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

// The queries of couponlink audit (package audit): what was already
// wrong in a shop's tables when couponlink came, read in one consistent
// snapshot. Each streams its rows in order, the rows of one
// inconsistency each, so that the audit counts them all and keeps a few
// to name, in bounded memory on any number of coupons. They read one
// server's tables (a set of shard tables is refused: AuditRefusal).

// AuditRow is one row an audit query names: a coupon (its id, as text),
// its template and user, the orders behind it (comma-separated) and, for
// the order-table balance, the used coupons (N) and the open orders (M)
// of a (template, user).
type AuditRow struct {
	Coupon   string
	Template int64
	User     string
	Orders   string
	N, M     int64
}

// AuditRefusal says why the audit cannot read the mapping's tables (""
// when it can): a role whose table is a set of shards, or a mapping of
// several sources (audit each source's mapping alone).
func (s *Queries) AuditRefusal() string {
	if s.m.HasSources() {
		return "the mapping names several sources: audit each one with its own mapping"
	}
	for _, t := range []string{s.m.UserCoupon.Table, s.m.RedemptionLog.Table, s.m.Template.Table} {
		if t != "" && s.m.Sharded(t) {
			return fmt.Sprintf("%s is a set of shard tables, which the audit does not read yet", t)
		}
	}
	if o := s.m.Orders; o != nil && s.m.Sharded(o.Table) {
		return fmt.Sprintf("%s is a set of shard tables, which the audit does not read yet", o.Table)
	}
	return ""
}

// alias quotes column c of the table aliased a.
func alias(a string) func(string) string {
	return func(c string) string { return a + "." + quoteIdent(c) }
}

// aliasOptional is alias(a)(c), or NULL when the mapping names no column.
func aliasOptional(a, c string) string {
	if c == "" {
		return "NULL"
	}
	return alias(a)(c)
}

// codesIn is "col IN (codes)" for the stored codes of the states.
func (s *Queries) codesIn(col string, states ...coupon.Status) string {
	var codes []int64
	for _, st := range states {
		codes = append(codes, s.m.Codes(st)...)
	}
	if len(codes) == 0 {
		return "FALSE"
	}
	lits := make([]string, len(codes))
	for i, c := range codes {
		lits[i] = fmt.Sprint(c)
	}
	return fmt.Sprintf("%s IN (%s)", col, strings.Join(lits, ", "))
}

// couponCols are the columns of an AuditRow's coupon, of the coupon table
// aliased c.
func (s *Queries) couponCols() string {
	uc := s.m.UserCoupon
	return fmt.Sprintf("c.%s, c.%s, %s", quoteIdent(uc.ID), quoteIdent(uc.Template), aliasOptional("c", uc.User))
}

// eachAuditRow streams query's rows, each an AuditRow of the columns
// coupon, template, user, orders, into fn.
func eachAuditRow(ctx context.Context, q Querier, query string, fn func(AuditRow) error) error {
	return sqltx.EachRow(ctx, q, query, nil, func(rows *sql.Rows) error {
		var r AuditRow
		var coupon, user, orders sql.NullString
		var tpl sql.NullInt64
		if err := rows.Scan(&coupon, &tpl, &user, &orders); err != nil {
			return err
		}
		r.Coupon, r.Template, r.User, r.Orders = coupon.String, tpl.Int64, user.String, orders.String
		return fn(r)
	})
}

// liveAs is the condition that the coupon aliased c is not soft-deleted
// (TRUE when the table has no soft-delete column).
func (s *Queries) liveAs() string {
	if c := s.m.UserCoupon.Deleted.NotSQL(alias("c")); c != "" {
		return "(" + c + ")"
	}
	return "TRUE"
}

// liveEvidenceAs is the condition that the write-off row aliased r still
// proves a use of a coupon, as the cdc reads it: neither closed nor
// soft-deleted, and naming a coupon (0 names none: an orders table that is
// the write-off table writes it in an order that used no coupon).
func (s *Queries) liveEvidenceAs() string {
	named := alias("r")(s.m.RedemptionLog.Coupon) + " <> 0"
	if c := s.m.EvidenceEnded().NotSQL(alias("r")); c != "" {
		return "(" + c + " AND " + named + ")"
	}
	return named
}

// openAs is the condition that the order aliased o is open: neither
// closed nor soft-deleted (TRUE when the table has neither state).
func (s *Queries) openAs() string {
	o := s.m.Orders
	if c := and(o.ClosedWhen().NotSQL(alias("o")), o.Deleted.NotSQL(alias("o"))); c != "" {
		return "(" + c + ")"
	}
	return "TRUE"
}

// UsedWithoutEvidence streams the live USED coupons, by id, that nothing
// proves used: with evidence table, no write-off row names them; with
// coupon_order, their order column is empty or (when orders is mapped)
// names no open order. Other evidence: nothing (OrderBalance judges
// order_table).
func (s *Queries) UsedWithoutEvidence(ctx context.Context, q Querier, fn func(AuditRow) error) error {
	uc := s.m.UserCoupon
	var missing, orders string
	switch s.m.RedemptionEvidence() {
	case canal.EvidenceTable:
		r := s.m.RedemptionLog
		missing = fmt.Sprintf("NOT EXISTS (SELECT 1 FROM %s r WHERE r.%s = c.%s AND %s)", s.table(r.Table), quoteIdent(r.Coupon), quoteIdent(uc.ID),
			s.liveEvidenceAs())
		orders = "NULL"
	case canal.EvidenceCouponOrder:
		ord := alias("c")(uc.Order)
		missing = fmt.Sprintf("(%s IS NULL OR %s = ''", ord, ord)
		if o := s.m.Orders; o != nil {
			missing += fmt.Sprintf(" OR NOT EXISTS (SELECT 1 FROM %s o WHERE o.%s = %s AND %s)", s.table(o.Table), quoteIdent(o.Order), ord, s.openAs())
		}
		missing += ")"
		orders = ord
	default:
		return nil
	}
	query := fmt.Sprintf("SELECT %s, %s FROM %s c WHERE %s AND %s AND %s ORDER BY c.%s", s.couponCols(), orders, s.table(uc.Table),
		s.codesIn(alias("c")(uc.Status), coupon.Used), s.liveAs(), missing, quoteIdent(uc.ID))
	if err := eachAuditRow(ctx, q, query, fn); err != nil {
		return fmt.Errorf("find the used coupons of %s with no evidence: %w", s.named(uc.Table), err)
	}
	return nil
}

// EvidenceOnUnused streams the evidence of coupons never used, by
// coupon: with evidence table, write-off rows of a coupon that is
// AVAILABLE or EXPIRED (unless inventory_flow records its refund, which
// keeps the write-off of the use it undid) or of no live coupon at all;
// with coupon_order, AVAILABLE or EXPIRED coupons whose order column
// names an order (an open one, when orders is mapped).
func (s *Queries) EvidenceOnUnused(ctx context.Context, q Querier, fn func(AuditRow) error) error {
	uc := s.m.UserCoupon
	unused := s.codesIn(alias("c")(uc.Status), coupon.Available, coupon.Expired)
	var query string
	switch s.m.RedemptionEvidence() {
	case canal.EvidenceTable:
		r := s.m.RedemptionLog
		refunded := ""
		if f := s.m.InventoryFlow; f != nil {
			refunded = fmt.Sprintf(" AND NOT EXISTS (SELECT 1 FROM %s f WHERE f.%s = c.%s AND f.%s = '%s')", s.table(f.Table),
				quoteIdent(f.Coupon), quoteIdent(uc.ID), quoteIdent(f.Kind), coupon.FlowRefund)
		}
		query = fmt.Sprintf("SELECT r.%s, c.%s, %s, %s FROM %s r LEFT JOIN %s c ON c.%s = r.%s AND %s WHERE %s AND (c.%s IS NULL OR (%s%s)) ORDER BY r.%s, r.%s",
			quoteIdent(r.Coupon), quoteIdent(uc.Template), aliasOptional("c", uc.User), aliasOptional("r", r.Order), s.table(r.Table),
			s.table(uc.Table), quoteIdent(uc.ID), quoteIdent(r.Coupon), s.liveAs(), s.liveEvidenceAs(), quoteIdent(uc.ID), unused, refunded,
			quoteIdent(r.Coupon), quoteIdent(r.ID))
	case canal.EvidenceCouponOrder:
		ord := alias("c")(uc.Order)
		open := ""
		if o := s.m.Orders; o != nil {
			open = fmt.Sprintf(" AND EXISTS (SELECT 1 FROM %s o WHERE o.%s = %s AND %s)", s.table(o.Table), quoteIdent(o.Order), ord, s.openAs())
		}
		query = fmt.Sprintf("SELECT %s, %s FROM %s c WHERE %s AND %s AND %s IS NOT NULL AND %s <> ''%s ORDER BY c.%s", s.couponCols(), ord,
			s.table(uc.Table), unused, s.liveAs(), ord, ord, open, quoteIdent(uc.ID))
	default:
		return nil
	}
	if err := eachAuditRow(ctx, q, query, fn); err != nil {
		return fmt.Errorf("find the evidence of unused coupons in %s: %w", s.named(uc.Table), err)
	}
	return nil
}

// DoubleSpends streams, by coupon, the coupons behind write-off rows of
// two or more different orders (evidence table with redemption_log.order;
// nothing otherwise): N is how many orders.
func (s *Queries) DoubleSpends(ctx context.Context, q Querier, fn func(AuditRow) error) error {
	r := s.m.RedemptionLog
	if s.m.RedemptionEvidence() != canal.EvidenceTable || r.Order == "" {
		return nil
	}
	uc := s.m.UserCoupon
	query := fmt.Sprintf(`SELECT g.coupon, c.%s, %s, g.orders, g.n FROM (
		SELECT r.%s AS coupon, COUNT(DISTINCT r.%s) AS n, GROUP_CONCAT(DISTINCT r.%s ORDER BY r.%s SEPARATOR ', ') AS orders
		FROM %s r WHERE %s GROUP BY r.%s HAVING COUNT(DISTINCT r.%s) > 1) g
		LEFT JOIN %s c ON c.%s = g.coupon ORDER BY g.coupon`,
		quoteIdent(uc.Template), aliasOptional("c", uc.User),
		quoteIdent(r.Coupon), quoteIdent(r.Order), quoteIdent(r.Order), quoteIdent(r.Order),
		s.table(r.Table), s.liveEvidenceAs(), quoteIdent(r.Coupon), quoteIdent(r.Order), s.table(uc.Table), quoteIdent(uc.ID))
	err := sqltx.EachRow(ctx, q, query, nil, func(rows *sql.Rows) error {
		var a AuditRow
		var tpl sql.NullInt64
		var user sql.NullString
		if err := rows.Scan(&a.Coupon, &tpl, &user, &a.Orders, &a.N); err != nil {
			return err
		}
		a.Template, a.User = tpl.Int64, user.String
		return fn(a)
	})
	if err != nil {
		return fmt.Errorf("find the coupons of %s behind two orders: %w", s.named(r.Table), err)
	}
	return nil
}

// OrderBalance streams, by (template, user), where the live USED coupons
// (N) and the open orders naming the template (M) differ (evidence
// order_table; nothing otherwise): fewer orders than uses is a use
// without evidence, more is a double spend.
func (s *Queries) OrderBalance(ctx context.Context, q Querier, fn func(AuditRow) error) error {
	o := s.m.Orders
	if s.m.RedemptionEvidence() != canal.EvidenceOrderTable || o == nil {
		return nil
	}
	uc := s.m.UserCoupon
	used := fmt.Sprintf("%s AND %s", s.codesIn(alias("c")(uc.Status), coupon.Used), s.liveAs())
	orders := fmt.Sprintf("o.%s IS NOT NULL AND o.%s <> 0 AND %s", quoteIdent(o.Template), quoteIdent(o.Template), s.openAs())
	// the (template, user) pairs with uses, and those with orders only
	withUses := fmt.Sprintf(`SELECT t, u, n, m FROM (SELECT t, u, n,
			(SELECT COUNT(*) FROM %s o WHERE o.%s = g.t AND o.%s = g.u AND %s) AS m
		FROM (SELECT c.%s AS t, c.%s AS u, COUNT(*) AS n FROM %s c WHERE %s AND c.%s IS NOT NULL GROUP BY 1, 2) g) b
		WHERE n <> m ORDER BY t, u`,
		s.table(o.Table), quoteIdent(o.Template), quoteIdent(o.User), orders,
		quoteIdent(uc.Template), quoteIdent(uc.User), s.table(uc.Table), used, quoteIdent(uc.User))
	ordersOnly := fmt.Sprintf(`SELECT t, u, 0, m FROM (SELECT o.%s AS t, o.%s AS u, COUNT(*) AS m FROM %s o WHERE %s GROUP BY 1, 2) g
		WHERE NOT EXISTS (SELECT 1 FROM %s c WHERE c.%s = g.t AND c.%s = g.u AND %s) ORDER BY t, u`,
		quoteIdent(o.Template), quoteIdent(o.User), s.table(o.Table), orders,
		s.table(uc.Table), quoteIdent(uc.Template), quoteIdent(uc.User), used)
	for _, query := range []string{withUses, ordersOnly} {
		err := sqltx.EachRow(ctx, q, query, nil, func(rows *sql.Rows) error {
			var a AuditRow
			var user sql.NullString
			if err := rows.Scan(&a.Template, &user, &a.N, &a.M); err != nil {
				return err
			}
			a.User = user.String
			return fn(a)
		})
		if err != nil {
			return fmt.Errorf("compare the used coupons of %s with the orders of %s: %w", s.named(uc.Table), s.named(o.Table), err)
		}
	}
	return nil
}

// UsedAfterExpiry streams, by coupon, the USED coupons redeemed after
// their own expiry: the reference schema only, whose redemption_log keeps
// redeemed_at (a legacy mapping names no time of use, and a snapshot
// cannot tell when a coupon was used).
func (s *Queries) UsedAfterExpiry(ctx context.Context, q Querier, fn func(AuditRow) error) error {
	if !s.m.Reference() {
		return nil
	}
	uc, r := s.m.UserCoupon, s.m.RedemptionLog
	query := fmt.Sprintf("SELECT %s, r.%s FROM %s c JOIN %s r ON r.%s = c.%s WHERE %s AND r.redeemed_at > c.%s ORDER BY c.%s, r.%s",
		s.couponCols(), quoteIdent(r.Order), s.table(uc.Table), s.table(r.Table), quoteIdent(r.Coupon), quoteIdent(uc.ID),
		s.codesIn(alias("c")(uc.Status), coupon.Used), quoteIdent(uc.ExpiresAt.Column), quoteIdent(uc.ID), quoteIdent(r.ID))
	if err := eachAuditRow(ctx, q, query, fn); err != nil {
		return fmt.Errorf("find the coupons of %s used after their expiry: %w", s.named(uc.Table), err)
	}
	return nil
}

// EvidenceRows counts the write-offs: the rows of the write-off table
// (evidence table) or the open orders naming a template (order_table);
// ok is false for other evidence.
func (s *Queries) EvidenceRows(ctx context.Context, q Querier) (n int64, ok bool, err error) {
	var query string
	switch s.m.RedemptionEvidence() {
	case canal.EvidenceTable:
		query = "SELECT COUNT(*) FROM " + s.table(s.m.RedemptionLog.Table) + " r WHERE " + s.liveEvidenceAs()
	case canal.EvidenceOrderTable:
		o := s.m.Orders
		query = fmt.Sprintf("SELECT COUNT(*) FROM %s o WHERE o.%s IS NOT NULL AND o.%s <> 0 AND %s", s.table(o.Table),
			quoteIdent(o.Template), quoteIdent(o.Template), s.openAs())
	default:
		return 0, false, nil
	}
	if err := sqltx.EachRow(ctx, q, query, nil, func(rows *sql.Rows) error { return rows.Scan(&n) }); err != nil {
		return 0, false, fmt.Errorf("count the write-offs: %w", err)
	}
	return n, true, nil
}
