package sink_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/sink"
)

// A cdc whose batches keep failing (the counters' table renamed away) while
// the server's binlog moves on is visible: its lag grows, it is stalled
// (couponlink_cdc_stalled 1, Stalled for /healthz) after StallAfter; once
// the table is back it catches up and is healthy again.
func TestStallIsVisible(t *testing.T) {
	l := newLegacyEnv(t)
	exec := func(q string) {
		t.Helper()
		_, err := l.DB.Exec(q)
		require.NoError(t, err, q)
	}
	exec(`INSERT INTO ` + l.tq("t_coupon_tpl") + ` (id, budget) VALUES (1, 1000)`)
	var d *sink.Daemon
	c := l.StartCDC(l.mapping(), func(_ *sink.Config, dd *sink.Daemon) {
		dd.StallAfter, dd.StallCheckEvery, d = time.Second, 50*time.Millisecond, dd
	})
	l.WaitCheckpoint()
	metric := func(name string) float64 {
		v, _ := cdctest.Metric(t, c.Reg, name, nil)
		return v
	}
	require.NoError(t, d.Stalled())

	exec(`RENAME TABLE inventory_counter TO inventory_counter_away`)
	renamed := true
	t.Cleanup(func() {
		if renamed {
			_, _ = l.DB.Exec(`RENAME TABLE inventory_counter_away TO inventory_counter`)
		}
	})
	insert := `INSERT INTO ` + l.tq("t_user_coupon") + ` (tpl_id, source, state, uid) VALUES (1, 'app', 0, 'u')`
	exec(insert)
	cdctest.WaitFor(t, 30*time.Second, "lag beyond 3 s and a stall", func() bool {
		exec(insert) // the server's binlog moves on
		return metric("couponlink_cdc_lag_seconds") > 3 && metric("couponlink_cdc_stalled") == 1 && d.Stalled() != nil
	})
	require.ErrorContains(t, d.Stalled(), "has not moved for")

	exec(`RENAME TABLE inventory_counter_away TO inventory_counter`)
	renamed = false
	cdctest.WaitFor(t, 60*time.Second, "caught up, not stalled", func() bool {
		return metric("couponlink_cdc_stalled") == 0 && d.Stalled() == nil && metric("couponlink_cdc_lag_seconds") < 3
	})
	l.WaitCheckpoint()
	require.Equal(t, l.legacyTruth(), l.Counters())
}
