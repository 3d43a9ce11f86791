package sink

import (
	"context"
	"database/sql"
)

// InBatchTx makes cfg's sink run hook in each batch transaction, just
// before the batch's events are written (step 10 of the pipeline).
func InBatchTx(cfg *Config, hook func(ctx context.Context, tx *sql.Tx) error) { cfg.inBatchTx = hook }
