package quota

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/couponlink/couponlink/api"
	"github.com/couponlink/couponlink/coupon"
)

// The quota_policy table: one row of defaults (template 0) and one
// override row per template that has one. This file reads them.

// DefaultsTemplate is the quota_policy row that holds the defaults the cdc
// runs with (no template has id 0).
const DefaultsTemplate int64 = 0

// PolicyView is a template's policy as operators read it: what applies,
// the defaults it inherits, and what its override row sets.
type PolicyView = api.PolicyView

// policyRow is one quota_policy row.
type policyRow struct {
	Override  Override
	Version   int64
	UpdatedBy string
	UpdatedAt time.Time
}

const policyColumns = `mode, low, high, min_claims, max_share, reserve, cooldown_seconds, min_age_seconds, version, updated_by, updated_at`

type scanner interface{ Scan(...any) error }

func scanPolicy(r scanner, extra ...any) (policyRow, error) {
	var (
		p                           policyRow
		mode                        sql.NullString
		low, high, share, reserve   sql.NullFloat64
		minClaims, cooldown, minAge sql.NullInt64
	)
	dst := append(extra, &mode, &low, &high, &minClaims, &share, &reserve, &cooldown, &minAge, &p.Version, &p.UpdatedBy, &p.UpdatedAt)
	if err := r.Scan(dst...); err != nil {
		return p, err
	}
	o := &p.Override
	o.Mode = nullable(mode.String, mode.Valid)
	o.Low, o.High = nullable(low.Float64, low.Valid), nullable(high.Float64, high.Valid)
	o.MaxShare, o.Reserve = nullable(share.Float64, share.Valid), nullable(reserve.Float64, reserve.Valid)
	o.MinClaims = nullable(minClaims.Int64, minClaims.Valid)
	o.CooldownSeconds, o.MinAgeSeconds = nullable(cooldown.Int64, cooldown.Valid), nullable(minAge.Int64, minAge.Valid)
	return p, nil
}

func nullable[T any](v T, valid bool) *T {
	if !valid {
		return nil
	}
	return &v
}

type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// readPolicy reads a template's policy row; found is false when it has none.
func readPolicy(ctx context.Context, q queryer, template int64, lock bool) (p policyRow, found bool, err error) {
	query := `SELECT ` + policyColumns + ` FROM quota_policy WHERE template_id = ?`
	if lock {
		query += ` FOR UPDATE`
	}
	p, err = scanPolicy(q.QueryRowContext(ctx, query, template))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return policyRow{}, false, nil
	case err != nil:
		return p, false, fmt.Errorf("read quota policy of template %d: %w", template, err)
	}
	return p, true, nil
}

// readDefaults is Defaults() with the defaults row applied over it.
func readDefaults(ctx context.Context, q queryer) (Policy, error) {
	row, _, err := readPolicy(ctx, q, DefaultsTemplate, false)
	if err != nil {
		return Policy{}, err
	}
	return row.Override.Apply(Defaults()), nil
}

// LoadPolicies reads every policy row: defaults is Defaults() with the
// defaults row (template 0) applied over it, overrides holds every other
// row by template. A template's policy is overrides[id].Apply(defaults).
func LoadPolicies(ctx context.Context, db *sql.DB) (defaults Policy, overrides map[int64]Override, err error) {
	rows, err := db.QueryContext(ctx, `SELECT template_id, `+policyColumns+` FROM quota_policy`)
	if err != nil {
		return Policy{}, nil, fmt.Errorf("load quota policies: %w", err)
	}
	defer rows.Close()
	defaults, overrides = Defaults(), map[int64]Override{}
	for rows.Next() {
		var id int64
		p, err := scanPolicy(rows, &id)
		if err != nil {
			return Policy{}, nil, fmt.Errorf("load quota policies: %w", err)
		}
		if id == DefaultsTemplate {
			defaults = p.Override.Apply(defaults)
		} else {
			overrides[id] = p.Override
		}
	}
	if err := rows.Err(); err != nil {
		return Policy{}, nil, fmt.Errorf("load quota policies: %w", err)
	}
	return defaults, overrides, nil
}

// checkTemplate returns a not_found *coupon.Error when the template does not exist.
func checkTemplate(ctx context.Context, q queryer, template int64) error {
	var id int64
	err := q.QueryRowContext(ctx, `SELECT id FROM coupon_template WHERE id = ?`, template).Scan(&id)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return coupon.NotFound("template", template)
	case err != nil:
		return fmt.Errorf("look up template %d: %w", template, err)
	}
	return nil
}

// GetPolicy is a template's policy: effective, defaults and override.
func GetPolicy(ctx context.Context, db *sql.DB, template int64) (PolicyView, error) {
	if err := checkTemplate(ctx, db, template); err != nil {
		return PolicyView{}, err
	}
	return view(ctx, db, template, false)
}

// view reads the defaults and the template's row into a PolicyView.
func view(ctx context.Context, q queryer, template int64, lock bool) (PolicyView, error) {
	defaults, err := readDefaults(ctx, q)
	if err != nil {
		return PolicyView{}, err
	}
	row, found, err := readPolicy(ctx, q, template, lock)
	if err != nil {
		return PolicyView{}, err
	}
	return makeView(template, defaults, row, found), nil
}

func makeView(template int64, defaults Policy, row policyRow, found bool) PolicyView {
	v := PolicyView{Template: template, Defaults: defaults, Effective: row.Override.Apply(defaults)}
	if found {
		at := row.UpdatedAt
		v.Override, v.Version, v.UpdatedBy, v.UpdatedAt = row.Override, row.Version, row.UpdatedBy, &at
	}
	return v
}
