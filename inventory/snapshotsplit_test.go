package inventory_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/inventory"
)

// A snapshot counted by several readers (snapshotsplit.go) holds exactly
// the counts one reader finds: also the coupons of template ids below,
// between and above those of the template table, and with writes going on
// between the snapshots (a reader that cannot join the snapshot's position
// is left out, never counted at another).
func TestSnapshotSplitCountsWhatOneReaderCounts(t *testing.T) {
	ctx := context.Background()
	db, _ := testenv.MySQL(t)
	exec := func(q string, args ...any) {
		_, err := db.ExecContext(ctx, q, args...)
		require.NoError(t, err, q)
	}
	var tpls, quotas []string
	for id := 10; id <= 400; id += 10 {
		tpls = append(tpls, fmt.Sprintf("(%d, 't%d', 1000000, 86400)", id, id))
		quotas = append(quotas, fmt.Sprintf("(%d, 'a', 500000, 0), (%d, 'b', 500000, 0)", id, id))
	}
	exec("INSERT INTO coupon_template (id, name, total_quota, valid_seconds) VALUES " + strings.Join(tpls, ", "))
	exec("INSERT INTO channel_quota (template_id, channel, quota, claimed) VALUES " + strings.Join(quotas, ", "))
	// ids 1..450 (below the table's lowest, 10, and above its highest, 400), 4 states, 2 channels
	exec(`INSERT INTO user_coupon (template_id, user_id, channel, status, claimed_at, expires_at)
		SELECT 1 + seq % 450, CONCAT('u', seq), IF(seq % 3 = 0, 'a', 'b'), 1 + seq % 4, NOW(6), NOW(6) + INTERVAL 1 DAY FROM seq_0_to_19999`)

	q := inventory.NewQueries(canal.DefaultMapping())
	prev := inventory.SetSnapshotReaders(1)
	t.Cleanup(func() { inventory.SetSnapshotReaders(prev) })
	one, err := q.Snapshot(ctx, db)
	require.NoError(t, err)
	require.Equal(t, 1, one.Taken.Readers)
	var total int64
	for _, c := range one.Counts {
		total += c.Issued()
	}
	require.EqualValues(t, 20000, total)

	// this database is quiet, but the server is shared with the other
	// packages' tests, whose commits move the binlog between the readers'
	// starts: take snapshots until one is split (each must count what one
	// reader counts, whoever joined)
	inventory.SetSnapshotReaders(4)
	readers := 0
	for deadline := time.Now().Add(60 * time.Second); readers < 4 && time.Now().Before(deadline); {
		split, err := q.Snapshot(ctx, db)
		require.NoError(t, err)
		readers = max(readers, split.Taken.Readers)
		require.Equal(t, one.Counts, split.Counts, "%d readers", split.Taken.Readers)
		require.Equal(t, one.Quotas, split.Quotas) // (not one.Pos: the other packages' commits move it)
	}
	require.GreaterOrEqual(t, readers, 2, "no commit on this database: readers join a snapshot sooner or later")
	t.Logf("up to %d readers joined a snapshot of this quiet database", readers)

	// with commits going on, each adding a coupon of template 1 and one of
	// template 450, whose ranges different readers count: a reader counting
	// at another position than the others would find more of one than of
	// the other
	issued := func(snap inventory.Snapshot, tpl int64) (n int64) {
		for p, c := range snap.Counts {
			if p.Template == tpl {
				n += c.Issued()
			}
		}
		return n
	}
	low, high := issued(one, 1), issued(one, 450)
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			if _, err := db.ExecContext(ctx, `INSERT INTO user_coupon (template_id, user_id, channel, status, claimed_at, expires_at)
				VALUES (1, ?, 'a', 1, NOW(6), NOW(6)), (450, ?, 'a', 1, NOW(6), NOW(6))`, fmt.Sprint("w", i), fmt.Sprint("w", i)); err != nil {
				done <- err
				return
			}
		}
	}()
	joined := 0
	for range 20 {
		snap, err := q.Snapshot(ctx, db)
		require.NoError(t, err)
		require.GreaterOrEqual(t, snap.Taken.Readers, 1)
		joined = max(joined, snap.Taken.Readers)
		require.Equal(t, issued(snap, 1)-low, issued(snap, 450)-high, "the readers counted at one position (%d readers)", snap.Taken.Readers)
	}
	close(stop)
	require.NoError(t, <-done)
	t.Logf("at most %d readers joined a snapshot while commits went on", joined)
}
