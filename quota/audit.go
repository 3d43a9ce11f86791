package quota

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/couponlink/couponlink/api"
)

// AuditEntry is one change of a policy row.
type AuditEntry = api.PolicyChangeEntry

// Audit is the template's policy changes, newest first, at most limit
// (20 when limit <= 0, at most 1000). Template 0 is the defaults' history.
func Audit(ctx context.Context, db *sql.DB, template int64, limit int) ([]AuditEntry, error) {
	if template != DefaultsTemplate {
		if err := checkTemplate(ctx, db, template); err != nil {
			return nil, err
		}
	}
	return readAudit(ctx, db, template, limit)
}

// readAudit reads the changes of template's policy row, whoever has it.
func readAudit(ctx context.Context, db *sql.DB, template int64, limit int) ([]AuditEntry, error) {
	if limit <= 0 {
		limit = 20
	}
	limit = min(limit, 1000)
	rows, err := db.QueryContext(ctx, `SELECT id, template_id, version, action, before_json, after_json, changed_by,
		COALESCE(on_behalf_of, ''), reason, source, created_at FROM quota_policy_audit WHERE template_id = ? ORDER BY id DESC LIMIT ?`, template, limit)
	if err != nil {
		return nil, fmt.Errorf("read quota policy audit of template %d: %w", template, err)
	}
	defer rows.Close()
	out := []AuditEntry{}
	for rows.Next() {
		var e AuditEntry
		var before, after sql.NullString
		if err := rows.Scan(&e.ID, &e.Template, &e.Version, &e.Action, &before, &after, &e.ChangedBy,
			&e.OnBehalfOf, &e.Reason, &e.Source, &e.At); err != nil {
			return nil, fmt.Errorf("read quota policy audit of template %d: %w", template, err)
		}
		if e.Before, err = parseOverride(before); err == nil {
			e.After, err = parseOverride(after)
		}
		if err != nil {
			return nil, fmt.Errorf("read quota policy audit row %d: %w", e.ID, err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read quota policy audit of template %d: %w", template, err)
	}
	return out, nil
}

func parseOverride(s sql.NullString) (*Override, error) {
	if !s.Valid {
		return nil, nil
	}
	var o Override
	if err := json.Unmarshal([]byte(s.String), &o); err != nil {
		return nil, err
	}
	return &o, nil
}
