package view

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/couponlink/couponlink/api"
	"github.com/couponlink/couponlink/internal/sqltx"
)

// CatalogQuery selects a page of templates: those whose name contains
// Search (or whose id is Search), with an id above After, at most Limit.
type CatalogQuery struct {
	Search string
	After  int64
	Limit  int
}

// Catalog limits: the page size when none is asked for, and the largest.
const (
	DefaultCatalogLimit = 50
	MaxCatalogLimit     = 500
)

// CatalogEntry is one template as the console's campaigns page shows it.
type CatalogEntry = api.TemplateSummary

// CatalogPage is a page of templates, by id.
type CatalogPage = api.TemplatePage

// Catalog reads a page of templates in one snapshot.
func Catalog(ctx context.Context, db *sql.DB, q CatalogQuery) (CatalogPage, error) {
	if q.Limit <= 0 {
		q.Limit = DefaultCatalogLimit
	}
	q.Limit = min(q.Limit, MaxCatalogLimit)
	page := CatalogPage{Templates: []CatalogEntry{}}
	err := sqltx.Run(ctx, db, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true}, func(tx *sql.Tx) error {
		page = CatalogPage{Templates: []CatalogEntry{}}
		ids, byID, err := catalogTemplates(ctx, tx, q, &page)
		if err != nil || len(ids) == 0 {
			return err
		}
		if err := catalogCounts(ctx, tx, ids, byID); err != nil {
			return err
		}
		if err := catalogAnomalies(ctx, tx, ids, byID); err != nil {
			return err
		}
		return catalogReconcile(ctx, tx, byID)
	})
	if err != nil {
		return CatalogPage{}, fmt.Errorf("read templates: %w", err)
	}
	for i := range page.Templates {
		e := &page.Templates[i]
		e.Claimable = e.Quota - e.Claimed
		e.Frozen = e.Expired + e.Returned - e.Released
		if d := e.Held + e.Used + e.Expired + e.Returned - e.Released; d > 0 {
			r := float64(e.Used) / float64(d)
			e.RedemptionRate = &r
		}
	}
	return page, nil
}

// catalogTemplates reads the page's template rows (one more than the
// limit, to know whether a next page exists).
func catalogTemplates(ctx context.Context, tx *sql.Tx, q CatalogQuery, page *CatalogPage) ([]int64, map[int64]*CatalogEntry, error) {
	query := `SELECT id, name, total_quota FROM coupon_template WHERE id > ?`
	args := []any{q.After}
	if s := strings.TrimSpace(q.Search); s != "" {
		like := "%" + strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s) + "%"
		if id, err := strconv.ParseInt(s, 10, 64); err == nil {
			query += ` AND (id = ? OR LOWER(name) LIKE LOWER(?))`
			args = append(args, id, like)
		} else {
			query += ` AND LOWER(name) LIKE LOWER(?)`
			args = append(args, like)
		}
	}
	query += ` ORDER BY id LIMIT ?`
	args = append(args, q.Limit+1)
	err := sqltx.EachRow(ctx, tx, query, args, func(rows *sql.Rows) error {
		var e CatalogEntry
		if err := rows.Scan(&e.ID, &e.Name, &e.TotalQuota); err != nil {
			return err
		}
		page.Templates = append(page.Templates, e)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	if len(page.Templates) > q.Limit {
		page.Templates = page.Templates[:q.Limit]
		page.NextAfter = page.Templates[q.Limit-1].ID
	}
	ids := make([]int64, len(page.Templates))
	byID := make(map[int64]*CatalogEntry, len(ids))
	for i := range page.Templates {
		ids[i], byID[page.Templates[i].ID] = page.Templates[i].ID, &page.Templates[i]
	}
	return ids, byID, nil
}

// catalogCounts sums the channel buckets and the cdc's counters of ids.
func catalogCounts(ctx context.Context, tx *sql.Tx, ids []int64, byID map[int64]*CatalogEntry) error {
	in := sqltx.Placeholders(len(ids))
	err := sqltx.EachRow(ctx, tx, `SELECT template_id, SUM(quota), SUM(claimed) FROM channel_quota WHERE template_id IN (`+in+`)
		GROUP BY template_id`, sqltx.Int64Args(ids), func(rows *sql.Rows) error {
		var id, q, c int64
		if err := rows.Scan(&id, &q, &c); err != nil {
			return err
		}
		byID[id].Quota, byID[id].Claimed = q, c
		return nil
	})
	if err != nil {
		return fmt.Errorf("sum channel quotas: %w", err)
	}
	err = sqltx.EachRow(ctx, tx, `SELECT template_id, SUM(held), SUM(used), SUM(expired), SUM(returned), SUM(released)
		FROM inventory_counter WHERE template_id IN (`+in+`) GROUP BY template_id`, sqltx.Int64Args(ids), func(rows *sql.Rows) error {
		var id int64
		var s States
		if err := rows.Scan(&id, &s.Held, &s.Used, &s.Expired, &s.Returned, &s.Released); err != nil {
			return err
		}
		byID[id].States = s
		return nil
	})
	if err != nil {
		return fmt.Errorf("sum counters: %w", err)
	}
	return nil
}

// catalogAnomalies counts the cdc's anomalies of each template.
func catalogAnomalies(ctx context.Context, tx *sql.Tx, ids []int64, byID map[int64]*CatalogEntry) error {
	err := sqltx.EachRow(ctx, tx, `SELECT template_id, COUNT(*) FROM cdc_anomaly WHERE template_id IN (`+sqltx.Placeholders(len(ids))+`)
		GROUP BY template_id`, sqltx.Int64Args(ids), func(rows *sql.Rows) error {
		var id, n int64
		if err := rows.Scan(&id, &n); err != nil {
			return err
		}
		byID[id].Anomalies = n
		return nil
	})
	if err != nil {
		return fmt.Errorf("count anomalies: %w", err)
	}
	return nil
}

// catalogReconcile sets each template's reconcile status: needs_review
// when an open item names it, else the last finished pass's status as it
// is for the template: a pass that needed review for other templates is
// clean for this one, and one whose item was resolved is resolved for
// the templates its differences named (clean for the others).
func catalogReconcile(ctx context.Context, tx *sql.Tx, byID map[int64]*CatalogEntry) error {
	var id int64
	last, raw := "none", "[]"
	var resolved sql.NullTime
	err := tx.QueryRowContext(ctx, `SELECT id, status, resolved_at, COALESCE(differences, '[]') FROM reconcile_task
		WHERE finished_at IS NOT NULL ORDER BY id DESC LIMIT 1`).Scan(&id, &last, &resolved, &raw)
	if err != nil && err != sql.ErrNoRows {
		return fmt.Errorf("read the last reconcile pass: %w", err)
	}
	if last == api.ReconcileNeedsReview { // the items say which templates need review, or were resolved
		last = api.ReconcileClean
	}
	for _, e := range byID {
		e.Reconcile = last
	}
	if resolved.Valid {
		if err := markNamed(byID, id, raw, api.ReconcileResolved); err != nil {
			return err
		}
	}
	return sqltx.EachRow(ctx, tx, `SELECT id, COALESCE(differences, '[]') FROM reconcile_task
		WHERE status = 'needs_review' AND resolved_at IS NULL`, nil, func(rows *sql.Rows) error {
		if err := rows.Scan(&id, &raw); err != nil {
			return err
		}
		return markNamed(byID, id, raw, api.ReconcileNeedsReview)
	})
}

// markNamed gives status to the templates the differences of reconcile
// task id (raw, as stored) name.
func markNamed(byID map[int64]*CatalogEntry, id int64, raw, status string) error {
	var diffs []struct {
		Template int64 `json:"template"`
	}
	if err := json.Unmarshal([]byte(raw), &diffs); err != nil {
		return fmt.Errorf("read differences of reconcile task %d: %w", id, err)
	}
	for _, d := range diffs {
		if e := byID[d.Template]; e != nil {
			e.Reconcile = status
		}
	}
	return nil
}
