package inventory

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/internal/sqltx"
)

// RecentAnomalies is how many of the latest anomalies status shows.
const RecentAnomalies = 5

// Anomaly is one cdc_anomaly row, as status shows it.
type Anomaly struct {
	ID       int64
	Kind     string
	Coupon   int64 // 0: none
	Template int64 // 0: none
	Channel  string
	// FromState and ToState are couponlink's state names ("" for none);
	// FromCode and ToCode the codes the source stored (invalid: none or
	// not known).
	FromState, ToState string
	FromCode, ToCode   sql.NullInt64
	Order              string
	Detail             string
	At                 time.Time // when it was recorded
}

// Change is the coupon's transition in couponlink's states with the
// source's codes, "AVAILABLE(0) -> USED(1)"; "" for an anomaly of no
// coupon transition (an over-issue, an undecodable row).
func (a Anomaly) Change() string {
	if a.FromState == "" && a.ToState == "" && !a.FromCode.Valid && !a.ToCode.Valid {
		return ""
	}
	return canal.StateText(a.FromState, a.FromCode) + " -> " + canal.StateText(a.ToState, a.ToCode)
}

// readAnomalies counts the anomalies by kind and reads the latest ones.
func readAnomalies(ctx context.Context, db *sql.DB, st *Status) error {
	var err error
	st.Anomalies, err = sqltx.Map(ctx, db, `SELECT kind, COUNT(*) FROM cdc_anomaly GROUP BY kind`, nil, sqltx.KeyValue[string, int64])
	if err != nil {
		return fmt.Errorf("count anomalies: %w", err)
	}
	st.Recent, err = sqltx.List(ctx, db, `SELECT id, kind, user_coupon_id, template_id, channel, from_state, to_state, from_code, to_code,
		order_id, detail, created_at FROM cdc_anomaly ORDER BY id DESC LIMIT ?`, []any{RecentAnomalies}, func(rows *sql.Rows) (Anomaly, error) {
		var a Anomaly
		var coupon, template sql.NullInt64
		var channel, from, to, order sql.NullString
		if err := rows.Scan(&a.ID, &a.Kind, &coupon, &template, &channel, &from, &to, &a.FromCode, &a.ToCode, &order, &a.Detail, &a.At); err != nil {
			return a, err
		}
		a.Coupon, a.Template, a.Channel = coupon.Int64, template.Int64, channel.String
		a.FromState, a.ToState, a.Order = from.String, to.String, order.String
		return a, nil
	})
	if err != nil {
		return fmt.Errorf("read the latest anomalies: %w", err)
	}
	return nil
}
