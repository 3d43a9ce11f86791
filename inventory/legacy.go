package inventory

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/internal/sqltx"
)

// LegacyCounts are a legacy template's own issued and used counts (nil:
// not mapped) and the truth they must equal: its coupons, and those USED.
type LegacyCounts struct {
	Own   [2]*int64
	Truth [2]int64
}

// LegacyCounts reads a legacy template table's own issued/used counts
// together with the coupons they count, in one consistent snapshot of its
// own: the legacy application writes both at once, and its counts read
// outside the truth's snapshot would show its later writes as drift. Nil
// when the mapping names neither count.
func (s *Source) LegacyCounts(ctx context.Context, db *sql.DB, ids []int64) (map[int64]LegacyCounts, error) {
	t := s.m.Template
	if (t.Issued == "" && t.Used == "") || len(ids) == 0 {
		return nil, nil
	}
	var out map[int64]LegacyCounts
	err := consistentSnapshot(ctx, db, func(tx *sql.Tx) error {
		var err error
		if out, err = s.legacyOwn(ctx, tx, ids); err != nil {
			return err
		}
		return s.legacyTruth(ctx, tx, ids, out)
	})
	return out, err
}

// legacyOwn reads the templates' own counts.
func (s *Source) legacyOwn(ctx context.Context, tx *sql.Tx, ids []int64) (map[int64]LegacyCounts, error) {
	t := s.m.Template
	col := func(c string) string {
		if c == "" {
			return "NULL"
		}
		return quoteIdent(c)
	}
	query := fmt.Sprintf("SELECT %s, %s, %s FROM %s WHERE %s IN (%s)", quoteIdent(t.ID), col(t.Issued), col(t.Used),
		s.table(t.Table), quoteIdent(t.ID), sqltx.Placeholders(len(ids)))
	out := map[int64]LegacyCounts{}
	err := sqltx.EachRow(ctx, tx, query, sqltx.Int64Args(ids), func(rows *sql.Rows) error {
		var id int64
		var issued, used sql.NullInt64
		if err := rows.Scan(&id, &issued, &used); err != nil {
			return err
		}
		var v LegacyCounts
		if issued.Valid {
			v.Own[0] = &issued.Int64
		}
		if used.Valid {
			v.Own[1] = &used.Int64
		}
		out[id] = v
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read %s's own counts: %w", t.Table, err)
	}
	return out, nil
}

// legacyTruth counts the coupons of the templates in out, and those USED.
func (s *Source) legacyTruth(ctx context.Context, tx *sql.Tx, ids []int64, out map[int64]LegacyCounts) error {
	uc := s.m.UserCoupon
	usedCodes := map[int64]bool{}
	for _, c := range s.m.Codes(coupon.Used) {
		usedCodes[c] = true
	}
	query := fmt.Sprintf("SELECT %s, %s, COUNT(*) FROM %s WHERE %s IN (%s) GROUP BY 1, 2", quoteIdent(uc.Template),
		quoteIdent(uc.Status), s.table(uc.Table), quoteIdent(uc.Template), sqltx.Placeholders(len(ids)))
	err := sqltx.EachRow(ctx, tx, query, sqltx.Int64Args(ids), func(rows *sql.Rows) error {
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
	})
	if err != nil {
		return fmt.Errorf("count %s for the legacy counts: %w", uc.Table, err)
	}
	return nil
}
