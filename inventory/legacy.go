package inventory

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/internal/sqltx"
)

// LegacyCounts are a legacy template's own issued and used counts (nil:
// not mapped) and the truth they must equal: its coupons, and those USED;
// and its budget (nil: NULL, or one of template.unlimited) and remaining-stock column (nil: not mapped,
// or NULL), which must equal the budget minus Taken: its coupons held,
// used or frozen (counted minus released).
type LegacyCounts struct {
	Own   [2]*int64
	Truth [2]int64

	Budget, Remaining *int64
	Taken             int64
}

// LegacyCounts reads a legacy template table's own issued/used counts and
// remaining stock with its budget, together with the coupons they count,
// in one consistent snapshot of its own: the legacy application writes
// them at once, and its counts read outside the truth's snapshot would
// show its later writes as drift. Nil when the mapping names none of them.
func (s *Queries) LegacyCounts(ctx context.Context, db *sql.DB, ids []int64) (map[int64]LegacyCounts, error) {
	t := s.m.Template
	if (t.Issued == "" && t.Used == "" && t.Remaining == "") || len(ids) == 0 {
		return nil, nil
	}
	var out map[int64]LegacyCounts
	err := consistentSnapshot(ctx, db, func(tx *sql.Tx) error {
		var err error
		if out, err = s.legacyOwn(ctx, tx, ids); err != nil {
			return err
		}
		if err := s.legacyTruth(ctx, tx, ids, out); err != nil {
			return err
		}
		return s.legacyReleased(ctx, tx, ids, out)
	})
	return out, err
}

// legacyOwn reads the templates' own counts, budget and remaining stock.
func (s *Queries) legacyOwn(ctx context.Context, tx *sql.Tx, ids []int64) (map[int64]LegacyCounts, error) {
	t := s.m.Template
	if s.m.TemplateElsewhere() {
		out := map[int64]LegacyCounts{} // no copy here: the truth only, for the sum
		for _, id := range ids {
			out[id] = LegacyCounts{}
		}
		return out, nil
	}
	query := fmt.Sprintf("SELECT %s, %s, %s, %s, %s FROM %s WHERE %s IN (%s)", quoteIdent(t.ID), optionalColumn(t.Issued), optionalColumn(t.Used),
		quoteIdent(t.TotalQuota), optionalColumn(t.Remaining), s.table(t.Table), quoteIdent(t.ID), sqltx.Placeholders(len(ids)))
	out, err := sqltx.Map(ctx, tx, query, sqltx.Int64Args(ids), func(rows *sql.Rows) (id int64, v LegacyCounts, err error) {
		var issued, used, budget, remaining sql.NullInt64
		if err := rows.Scan(&id, &issued, &used, &budget, &remaining); err != nil {
			return 0, v, err
		}
		v.Own[0], v.Own[1], v.Remaining = nullable(issued), nullable(used), nullable(remaining)
		if !budget.Valid || !t.IsUnlimited(budget.Int64) { // an unlimited budget has no remaining stock to check
			v.Budget = nullable(budget)
		}
		return id, v, nil
	})
	if err != nil {
		return nil, fmt.Errorf("read %s's own counts: %w", t.Table, err)
	}
	return out, nil
}

func nullable(v sql.NullInt64) *int64 {
	if !v.Valid {
		return nil
	}
	return &v.Int64
}

// legacyReleased sets Taken: the coupons counted minus the releases of
// inventory_flow (when the mapping has it).
func (s *Queries) legacyReleased(ctx context.Context, tx *sql.Tx, ids []int64, out map[int64]LegacyCounts) error {
	for id, v := range out {
		v.Taken = v.Truth[0]
		out[id] = v
	}
	f := s.m.InventoryFlow
	if f == nil {
		return nil
	}
	query := fmt.Sprintf("SELECT %s, COUNT(*) FROM %s WHERE %s = ? AND %s IN (%s) GROUP BY 1", quoteIdent(f.Template), s.table(f.Table),
		quoteIdent(f.Kind), quoteIdent(f.Template), sqltx.Placeholders(len(ids)))
	err := sqltx.EachRow(ctx, tx, query, append([]any{coupon.FlowRelease}, sqltx.Int64Args(ids)...), func(rows *sql.Rows) error {
		var id, n int64
		if err := rows.Scan(&id, &n); err != nil {
			return err
		}
		if v, ok := out[id]; ok {
			v.Taken -= n
			out[id] = v
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("count releases in %s for the legacy counts: %w", f.Table, err)
	}
	return nil
}

// UserClaims counts, in q's snapshot, the coupons of each (template, user)
// (over every shard: a user's coupons may be in several)
// that the cdc counts (a mapped status, a template and a user: a NULL or
// empty user is nobody's), by the user's bytes as the binlog carries them
// cut to MaxOrderKey, and calls fn for each.
func (s *Queries) UserClaims(ctx context.Context, q Querier, fn func(template int64, user string, coupons int64) error) error {
	return s.userClaims(ctx, q, orderKeyUser(s.m.UserCoupon.User), "", nil, fn)
}

// UserClaimsOf is UserClaims for the given users of one template only (a
// user with no coupon counted is absent). The users are matched by the
// column itself, so that its index serves (the reference schema's
// (user_id, template_id)); the column's collation may match more (case,
// trailing spaces), which come back under their own bytes. A user longer
// than MaxOrderKey, as the cdc keys it (cut), matches no row.
func (s *Queries) UserClaimsOf(ctx context.Context, q Querier, template int64, users []string, fn func(template int64, user string, coupons int64) error) error {
	return s.claimsOf(ctx, q, template, users, orderKeyUser(s.m.UserCoupon.User), fn)
}

// UserCouponCounts returns, in q's snapshot, how many coupons of template
// that count toward the per-user limit each of users holds (absent:
// none), keyed by the user column's own value (what a front end's
// claimed set holds), not cut as the cdc keys it.
func (s *Queries) UserCouponCounts(ctx context.Context, q Querier, template int64, users []string) (map[string]int64, error) {
	out := make(map[string]int64, len(users))
	err := s.claimsOf(ctx, q, template, users, quoteIdent(s.m.UserCoupon.User), func(_ int64, user string, n int64) error {
		out[user] = n
		return nil
	})
	return out, err
}

// claimsOf counts the coupons of the given users of one template, 500
// users a query, each keyed by the expression key of the user column.
func (s *Queries) claimsOf(ctx context.Context, q Querier, template int64, users []string, key string, fn func(template int64, user string, coupons int64) error) error {
	for start := 0; start < len(users); start += 500 {
		part := users[start:min(start+500, len(users))]
		args := []any{template}
		for _, u := range part {
			args = append(args, u)
		}
		only := fmt.Sprintf(" AND %s = ? AND %s IN (%s)", quoteIdent(s.m.UserCoupon.Template), quoteIdent(s.m.UserCoupon.User), sqltx.Placeholders(len(part)))
		if err := s.userClaims(ctx, q, key, only, args, fn); err != nil {
			return err
		}
	}
	return nil
}

// userClaims is UserClaims with the user keyed by the expression key and
// a further condition (and its arguments).
func (s *Queries) userClaims(ctx context.Context, q Querier, key, only string, onlyArgs []any, fn func(template int64, user string, coupons int64) error) error {
	uc := s.m.UserCoupon
	where, args := s.claimCounted()
	query, args, err := s.groupCount(uc.Table, []string{quoteIdent(uc.Template), key},
		fmt.Sprintf("%s IS NOT NULL AND %s%s", quoteIdent(uc.Template), where, only), append(args, onlyArgs...), "")
	if err != nil {
		return fmt.Errorf("count coupons per user in %s: %w", uc.Table, err)
	}
	err = sqltx.EachRow(ctx, q, query, args, func(rows *sql.Rows) error {
		var tpl, n int64
		var user []byte
		if err := rows.Scan(&tpl, &user, &n); err != nil {
			return err
		}
		if len(user) == 0 {
			return nil
		}
		return fn(tpl, string(user), n)
	})
	if err != nil {
		return fmt.Errorf("count coupons per user in %s: %w", uc.Table, err)
	}
	return nil
}

// PerUserLimits reads the per-user limit of the templates ids (all of them
// when ids is nil): the mapped column of a legacy template table (absent:
// none), coupon_template.per_user_limit of the reference schema.
func (s *Queries) PerUserLimits(ctx context.Context, q Querier, ids []int64) (map[int64]int64, error) {
	out := map[int64]int64{}
	if !s.m.Reference() {
		infos, err := s.Templates(ctx, q, ids)
		for id, t := range infos {
			if t.PerUserLimit > 0 {
				out[id] = t.PerUserLimit
			}
		}
		return out, err
	}
	scan := func(rows *sql.Rows) error {
		var id, limit int64
		if err := rows.Scan(&id, &limit); err != nil {
			return err
		}
		out[id] = max(limit, 1) // 0 is the API's default: one
		return nil
	}
	const base = "SELECT id, per_user_limit FROM coupon_template"
	var err error
	if ids == nil {
		err = sqltx.EachRow(ctx, q, base, nil, scan)
	} else {
		err = inChunks(ids, 500, func(part []int64) error {
			return sqltx.EachRow(ctx, q, base+" WHERE id IN ("+sqltx.Placeholders(len(part))+")", sqltx.Int64Args(part), scan)
		})
	}
	if err != nil {
		return nil, fmt.Errorf("read the per-user limits from coupon_template: %w", err)
	}
	return out, nil
}

// legacyTruth counts the coupons of the templates in out, and those USED.
func (s *Queries) legacyTruth(ctx context.Context, tx *sql.Tx, ids []int64, out map[int64]LegacyCounts) error {
	uc := s.m.UserCoupon
	usedCodes := map[int64]bool{}
	for _, c := range s.m.Codes(coupon.Used) {
		usedCodes[c] = true
	}
	count := func(rows *sql.Rows) error {
		var id, n int64
		var code sql.NullInt64
		if err := rows.Scan(&id, &code, &n); err != nil {
			return err
		}
		v, ok := out[id]
		if _, mapped := s.status[code.Int64]; !ok || !code.Valid || !mapped {
			return nil // an undecodable coupon is counted nowhere, as the cdc does
		}
		v.Truth[0] += n
		if usedCodes[code.Int64] {
			v.Truth[1] += n
		}
		out[id] = v
		return nil
	}
	// shard by shard: the counts add up, and the ids are not repeated for
	// every shard in one statement
	err := s.each(uc.Table, func(table string) error {
		query := fmt.Sprintf("SELECT %s, %s, COUNT(*) FROM %s WHERE %s IN (%s)%s GROUP BY 1, 2", quoteIdent(uc.Template),
			quoteIdent(uc.Status), table, quoteIdent(uc.Template), sqltx.Placeholders(len(ids)), andAlso(s.liveCoupon()))
		return sqltx.EachRow(ctx, tx, query, sqltx.Int64Args(ids), count)
	})
	if err != nil {
		return fmt.Errorf("count %s for the legacy counts: %w", uc.Table, err)
	}
	return nil
}
