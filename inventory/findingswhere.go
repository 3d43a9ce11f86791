package inventory

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strconv"

	"github.com/couponlink/couponlink/api"
)

// What a finding names, read back from its subject (sink's and
// reconcile's findingOf write them), and where it was last seen: the
// cdc_anomaly row of its latest occurrence.

var (
	couponSubject   = regexp.MustCompile(`^coupon (\d+)(?: order (".*"))?$`)
	templateSubject = regexp.MustCompile(`^template (\d+) channel (".*")$`)
	targetSubject   = regexp.MustCompile(`^(?:([^:/]+): )?(\d+)(?:/([^/]+))?`) // a reconcile target: [source: ]template/channel/...
)

// FindingsOf is ListFindings with each finding's Where, and only the
// findings naming q.Template when it is set (among the newest 1000 the
// other filters select). checkpoint names the cdc whose anomalies the
// database holds (its source).
func FindingsOf(ctx context.Context, db *sql.DB, q FindingsQuery, checkpoint string) ([]Finding, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = 100
	}
	if q.Template != 0 {
		q.Limit = 1000
	}
	fs, err := ListFindings(ctx, db, q)
	if err != nil {
		return nil, err
	}
	out := fs[:0]
	for _, f := range fs {
		w, err := findingWhere(ctx, db, f, checkpoint)
		if err != nil {
			return nil, err
		}
		if q.Template != 0 && (w == nil || w.Template != q.Template) {
			continue
		}
		f.Where = w
		if out = append(out, f); len(out) == limit {
			break
		}
	}
	return out, nil
}

// findingWhere is what f names and where it was last seen; nil when its
// subject names no row.
func findingWhere(ctx context.Context, db *sql.DB, f Finding, checkpoint string) (*api.FindingWhere, error) {
	if f.Source == api.FindingFromReconcile {
		m := targetSubject.FindStringSubmatch(f.Subject)
		if m == nil {
			return nil, nil
		}
		tpl, _ := strconv.ParseInt(m[2], 10, 64)
		return &api.FindingWhere{Template: tpl, Channel: m[3], Source: m[1]}, nil
	}
	w := &api.FindingWhere{Source: checkpoint}
	query := `SELECT id, COALESCE(template_id, 0), COALESCE(channel, ''), COALESCE(user_coupon_id, 0), COALESCE(order_id, ''),
		binlog_file, binlog_pos, COALESCE(gtid_set, ''), event_time FROM cdc_anomaly WHERE kind = ? AND `
	var args []any
	if m := couponSubject.FindStringSubmatch(f.Subject); m != nil {
		w.Coupon, _ = strconv.ParseInt(m[1], 10, 64)
		query, args = query+`user_coupon_id = ?`, []any{f.Kind, w.Coupon}
	} else if m := templateSubject.FindStringSubmatch(f.Subject); m != nil {
		w.Template, _ = strconv.ParseInt(m[1], 10, 64)
		w.Channel, _ = strconv.Unquote(m[2])
		query, args = query+`template_id = ? AND channel = ?`, []any{f.Kind, w.Template, w.Channel}
	} else {
		query, args = query+`detail = ?`, []any{f.Kind, f.Summary}
	}
	var file, gtid string
	var pos uint64
	var at sql.NullTime
	err := db.QueryRowContext(ctx, query+` ORDER BY id DESC LIMIT 1`, args...).
		Scan(&w.Anomaly, &w.Template, &w.Channel, &w.Coupon, &w.Order, &file, &pos, &gtid, &at)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return w, nil
	case err != nil:
		return nil, fmt.Errorf("read the latest anomaly of finding %s: %w", f.Fingerprint, err)
	}
	w.Position, w.EventTime = fmt.Sprintf("%s:%d", file, pos), timePtr(at)
	if gtid != "" {
		w.Position += " gtid=" + gtid
	}
	return w, nil
}
