package sink

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/couponlink/couponlink/inventory"
)

// followCorrections is the correction chore's pass: it reloads the counter
// mirror (metrics, over-issue) when the reconciler or a person corrected
// inventory_counter. The counters in MySQL need nothing: the cdc adds
// deltas to whatever they hold.
func (s *Sink) followCorrections(ctx context.Context, log *slog.Logger) error {
	var last int64
	if err := s.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(id), 0) FROM correction_log`).Scan(&last); err != nil {
		return fmt.Errorf("look for corrections: %w", err)
	}
	if last == s.lastCorrection {
		return nil
	}
	counts, err := inventory.LoadCounters(ctx, s.db)
	if err != nil {
		return err
	}
	s.setMirror(counts, s.quotas)
	s.judgeOverIssueByTruth(ctx, nil)
	s.lastCorrection = last
	log.Info("counters corrected outside the cdc: mirror reloaded", "correction_id", last)
	return nil
}
