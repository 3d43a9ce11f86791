package inventory

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/couponlink/couponlink/api"
	"github.com/couponlink/couponlink/internal/redact"
	"github.com/couponlink/couponlink/internal/sqltx"
)

// EventSinkJSON is a stream sink's delivery, as the status shows it.
type EventSinkJSON = api.EventSink

// readEventSinks reads the stream sinks' positions (event_sink_position)
// by name, and the newest failing webhook event's error.
func readEventSinks(ctx context.Context, db *sql.DB, st *Status) error {
	var err error
	st.EventSinks, err = sqltx.List(ctx, db, `SELECT sink, last_id, delivered, dropped, attempts, COALESCE(last_error, ''), lease_epoch
		FROM event_sink_position ORDER BY sink`, nil, func(rows *sql.Rows) (EventSinkJSON, error) {
		var s EventSinkJSON
		if err := rows.Scan(&s.Name, &s.Position, &s.Delivered, &s.Dropped, &s.FailedRounds, &s.LastError, &s.LeaseEpoch); err != nil {
			return s, err
		}
		if s.FailedRounds == 0 {
			s.LastError = "" // an error of the past
		}
		s.LastError = redact.Text(s.LastError) // as stored by a version that kept it whole
		return s, nil
	})
	if err != nil {
		return fmt.Errorf("read the event sinks' positions: %w", err)
	}
	err = db.QueryRowContext(ctx, `SELECT COALESCE(last_error, '') FROM webhook_outbox WHERE status = 'pending' AND attempts > 0
		ORDER BY id DESC LIMIT 1`).Scan(&st.WebhookError)
	if err != nil && err != sql.ErrNoRows {
		return fmt.Errorf("read the failing webhook events: %w", err)
	}
	st.WebhookError = redact.Text(st.WebhookError)
	return nil
}
