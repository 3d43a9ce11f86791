package audit

import (
	"context"
	"database/sql"
	"time"

	"github.com/couponlink/couponlink/inventory"
	"github.com/couponlink/couponlink/reconcile"
)

// recordChunk is how many findings one statement records.
const recordChunk = 500

// Record writes the findings the report names (at most Config.Examples
// of each kind) into the finding table, seen at at, as findings of kind
// found_at_attach/<kind> (reconcile.FoundAtAttach): a second audit that
// finds the same rows as they were sees them once more (an acknowledged
// one stays acknowledged); changed, they open again. It returns how many
// it wrote.
func Record(ctx context.Context, db *sql.DB, rep *Report, at time.Time) (int, error) {
	var seen []inventory.Seen
	for _, k := range rep.Kinds {
		for _, f := range k.Examples {
			seen = append(seen, reconcile.FoundAtAttach(string(k.Kind), f.Subject(), f.Detail+f.about()))
		}
	}
	for start := 0; start < len(seen); start += recordChunk {
		if err := inventory.RecordFindings(ctx, db, at, seen[start:min(start+recordChunk, len(seen))]); err != nil {
			return 0, err
		}
	}
	return len(seen), nil
}
