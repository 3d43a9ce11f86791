package coupon

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/couponlink/couponlink/internal/sqltx"
)

// MaxLookup is the most coupons UserCoupons tells.
const MaxLookup = 100

// UserCoupons tells the life (History) of each coupon a user holds or
// held of a template, oldest claim first, at most MaxLookup. An unknown
// template is NotFound; a user without coupons of it is an empty list.
func (s *Store) UserCoupons(ctx context.Context, template int64, user string) ([]History, error) {
	if user == "" {
		return nil, Invalid("user_id", "user_id is required")
	}
	if _, err := s.GetTemplate(ctx, template); err != nil {
		return nil, err
	}
	var ids []int64
	err := sqltx.EachRow(ctx, s.db, `SELECT id FROM user_coupon WHERE user_id = ? AND template_id = ? ORDER BY id LIMIT ?`,
		[]any{user, template, MaxLookup}, func(rows *sql.Rows) error {
			var id int64
			if err := rows.Scan(&id); err != nil {
				return err
			}
			ids = append(ids, id)
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("look up the coupons of a user in template %d: %w", template, err)
	}
	out := make([]History, 0, len(ids))
	for _, id := range ids {
		h, err := s.History(ctx, id)
		if err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	return out, nil
}
