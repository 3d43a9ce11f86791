package inventory

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/couponlink/couponlink/internal/sqltx"
)

// TemplateInfo is a template row as the mapping reads it: its budget and,
// where the mapping names the columns, its name, the shop's own remaining
// stock, its per-user limit and its end time.
type TemplateInfo struct {
	ID   int64
	Name string
	// Budget is total_quota; HasBudget is false when it is NULL.
	Budget    int64
	HasBudget bool
	// Remaining is the shop's remaining-stock column; nil when the mapping
	// names none or it is NULL.
	Remaining *int64
	// PerUserLimit is 0 when the template has none (unmapped, NULL or 0).
	PerUserLimit int64
	// EndTime is zero when the template has none (unmapped or NULL); an
	// instant, its DATETIME read in the mapping's zone (canal.Mapping.WallTime).
	EndTime time.Time
	// Unlimited: the budget is one of template.unlimited (HasBudget is
	// then false). OffShelf: the campaign is off the shelf (its status or
	// soft delete): nothing is claimable.
	Unlimited, OffShelf bool
	// Window: the campaign's coupons follow its current window, not their
	// own expiry (template.fixed_window), which opens at StartTime (zero:
	// none).
	Window    bool
	StartTime time.Time
}

// Outside reports whether a use at t is outside a fixed-window campaign's
// window: before its start (its end is Ended's).
func (t TemplateInfo) Outside(at time.Time) bool {
	return t.Window && !t.StartTime.IsZero() && at.Before(t.StartTime)
}

// Ended reports whether the template's campaign had ended at t.
func (t TemplateInfo) Ended(at time.Time) bool { return !t.EndTime.IsZero() && at.After(t.EndTime) }

// SameRules reports whether t and o judge alike: the rules a cdc follows
// and saves (budget, unlimited, per-user limit, end time, off the shelf),
// not the name or the shop's remaining column. A rule added to
// TemplateInfo belongs here, next to its field.
func (t TemplateInfo) SameRules(o TemplateInfo) bool {
	return t.HasBudget == o.HasBudget && t.Budget == o.Budget && t.Unlimited == o.Unlimited &&
		t.PerUserLimit == o.PerUserLimit && t.EndTime.Equal(o.EndTime) && t.OffShelf == o.OffShelf && t.Window == o.Window &&
		t.StartTime.Equal(o.StartTime)
}

// Templates reads the template rows of ids (all of them when ids is nil)
// from the template table, by query. Unknown ids are absent, and all of
// them on a source whose template table is on another source.
func (s *Queries) Templates(ctx context.Context, q Querier, ids []int64) (map[int64]TemplateInfo, error) {
	t := s.m.Template
	if s.m.TemplateElsewhere() {
		return map[int64]TemplateInfo{}, nil // on another source: this server has no row (the sums take that source's)
	}
	base := fmt.Sprintf("SELECT %s, %s, %s, %s, %s, %s, %s, %s, %s FROM %s", quoteIdent(t.ID), quoteIdent(t.TotalQuota), optionalColumn(t.Name),
		optionalColumn(t.Remaining), optionalColumn(t.PerUserLimit), optionalColumn(t.EndTime.Column), s.offShelf(), s.fixedWindow(),
		optionalColumn(t.StartTime.Column), s.table(t.Table))
	out := make(map[int64]TemplateInfo, len(ids))
	scan := func(rows *sql.Rows) error {
		var v TemplateInfo
		var budget, remaining, limit sql.NullInt64
		var offShelf, window int64
		var name sql.NullString
		var end, start any
		if err := rows.Scan(&v.ID, &budget, &name, &remaining, &limit, &end, &offShelf, &window, &start); err != nil {
			return err
		}
		v.Name, v.Budget, v.HasBudget, v.PerUserLimit = name.String, budget.Int64, budget.Valid, max(limit.Int64, 0)
		v.Unlimited = budget.Valid && t.IsUnlimited(budget.Int64)
		v.HasBudget = v.HasBudget && !v.Unlimited
		v.OffShelf, v.Window = offShelf == 1, window == 1
		if remaining.Valid {
			v.Remaining = &remaining.Int64
		}
		var err error
		if v.EndTime, err = s.m.ReadTime(t.EndTime, end); err != nil {
			return fmt.Errorf("template %d: %s: %w", v.ID, t.EndTime.Column, err)
		}
		if v.StartTime, err = s.m.ReadTime(t.StartTime, start); err != nil {
			return fmt.Errorf("template %d: %s: %w", v.ID, t.StartTime.Column, err)
		}
		out[v.ID] = v
		return nil
	}
	var err error
	if ids == nil {
		err = sqltx.EachRow(ctx, q, base+" ORDER BY 1", nil, scan)
	} else {
		err = inChunks(ids, 500, func(part []int64) error {
			query := fmt.Sprintf("%s WHERE %s IN (%s)", base, quoteIdent(t.ID), sqltx.Placeholders(len(part)))
			return sqltx.EachRow(ctx, q, query, sqltx.Int64Args(part), scan)
		})
	}
	if err != nil {
		return nil, fmt.Errorf("read templates from %s: %w", s.named(t.Table), err)
	}
	return out, nil
}

// TemplateQuotas reads the total quota of the given templates from the
// template table, by query. Unknown ids, and templates whose budget is
// NULL (no known budget: nothing to judge over-issue against), are absent
// from the result.
func (s *Queries) TemplateQuotas(ctx context.Context, q Querier, ids []int64) (map[int64]int64, error) {
	if len(ids) == 0 {
		return map[int64]int64{}, nil
	}
	info, err := s.Templates(ctx, q, ids)
	if err != nil {
		return nil, err
	}
	out := make(map[int64]int64, len(info))
	for id, v := range info {
		if v.HasBudget {
			out[id] = v.Budget
		}
	}
	return out, nil
}
