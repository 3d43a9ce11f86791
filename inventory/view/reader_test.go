package view_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/api"
	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/inventory/view"
)

// The reader counts a template live and, with a checkpoint named, reads
// the cdc's counters of it with their position; before the cdc ran, the
// derived view says it is not initialized.
func TestReader(t *testing.T) {
	ctx := context.Background()
	db, _ := testenv.MySQL(t)
	exec := func(q string, args ...any) {
		_, err := db.ExecContext(ctx, q, args...)
		require.NoError(t, err, q)
	}
	exec(`INSERT INTO coupon_template (id, name, total_quota, valid_seconds) VALUES (1, 't', 10, 60)`)
	exec(`INSERT INTO channel_quota (template_id, channel, quota, claimed) VALUES (1, 'app', 6, 2), (1, 'sms', 4, 0)`)
	exec(`INSERT INTO user_coupon (template_id, user_id, channel, status, claimed_at, expires_at) VALUES
		(1, 'u1', 'app', 1, NOW(), NOW()), (1, 'u2', 'app', 2, NOW(), NOW())`)

	r := view.Reader{DB: db, Checkpoint: "default"}
	inv, err := r.Inventory(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, view.Counts{Quota: 10, Claimed: 2, Held: 1, Used: 1}, inv.Counts)
	require.Equal(t, map[string]view.Counts{"app": {Quota: 6, Claimed: 2, Held: 1, Used: 1}, "sms": {Quota: 4}}, inv.Channels)
	require.True(t, inv.Conserved())
	require.Equal(t, &view.Derived{Checkpoint: "default", Channels: map[string]view.Counts{}}, inv.Derived, "the cdc has not run")

	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	exec(`INSERT INTO cdc_checkpoint (name, binlog_file, binlog_pos, gtid_set, event_time) VALUES ('default', 'mysql-bin.000003', 42, '0-1-7', ?)`, at)
	exec(`INSERT INTO inventory_counter (template_id, channel, held, used, expired, returned, released) VALUES
		(1, 'app', 1, 1, 0, 0, 0), (1, 'sms', 0, 0, 2, 1, 1), (2, 'app', 5, 0, 0, 0, 0)`)
	inv, err = r.Inventory(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, &view.Derived{Checkpoint: "default", Initialized: true, Position: "mysql-bin.000003:42 gtid=0-1-7", EventTime: at,
		Counts:   view.Counts{Held: 1, Used: 1, Expired: 2, Returned: 1, Released: 1},
		Channels: map[string]view.Counts{"app": {Held: 1, Used: 1}, "sms": {Expired: 2, Returned: 1, Released: 1}}}, inv.Derived)

	inv, err = view.Reader{DB: db}.Inventory(ctx, 1)
	require.NoError(t, err)
	require.Nil(t, inv.Derived, "no checkpoint named: no derived view")
	_, err = r.Inventory(ctx, 99)
	var ce *coupon.Error
	require.True(t, errors.As(err, &ce), "%v", err)
	require.Equal(t, api.CodeNotFound, ce.Code)
}
