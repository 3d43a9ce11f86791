package sink

import (
	"context"
	"database/sql"

	"github.com/couponlink/couponlink/inventory"
)

// InBatchTx makes cfg's sink run hook in each batch transaction, just
// before the batch's events are written (step 10 of the pipeline).
func InBatchTx(cfg *Config, hook func(ctx context.Context, tx *sql.Tx) error) { cfg.inBatchTx = hook }

// CountTruth makes cfg's sink count the coupons behind its over-issue
// verdicts with count instead of the coupon table.
func CountTruth(cfg *Config, count func(ctx context.Context, templates []int64) (map[inventory.Pair]*inventory.Counts, error)) {
	cfg.countTruth = count
}
