package sink_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/sink"
)

// A checkpoint whose binlog the server no longer has (a file that does not
// exist; a GTID beyond the server's) stops the daemon with an error
// wrapping canal.ErrBinlogPurged that tells the operator to run --rebuild;
// Daemon.Rebuild then recounts from a snapshot, and counters and Redis are
// right again.
func TestPurgedBinlogNeedsRebuild(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	tpl := e.Template(map[string]int64{"app": 50, "web": 50, "sms": 50}, time.Hour)
	claims := 0
	claim := func(n int) {
		for range n {
			ch := []string{"app", "web", "sms"}[claims%3]
			c, err := e.Store.Claim(ctx, coupon.ClaimRequest{TemplateID: tpl, UserID: fmt.Sprint("u", claims), Channel: ch, RequestID: fmt.Sprint("r", claims)})
			require.NoError(t, err)
			if claims%4 == 0 {
				_, err = e.Store.Redeem(ctx, coupon.RedeemRequest{UserCouponID: c.UserCouponID, OrderID: fmt.Sprint("o", claims)})
				require.NoError(t, err)
			}
			claims++
		}
	}
	claim(10)
	c := e.StartCDC(nil)
	claim(10)
	e.assertTruth(true)
	c.Stop(t)

	for _, tc := range []struct{ name, file, gtid string }{
		{"unknown file, GTID beyond the server", "mysql-bin.999999", "0-1-999999999"},
		{"unknown file, no GTID", "mysql-bin.999999", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.DB.Exec(`UPDATE cdc_checkpoint SET binlog_file = ?, binlog_pos = 4, gtid_set = ? WHERE name = 'default'`, tc.file, tc.gtid)
			require.NoError(t, err)
			c := e.StartCDC(nil)
			err = c.Result(t, 60*time.Second)
			require.ErrorIs(t, err, canal.ErrBinlogPurged)
			require.ErrorContains(t, err, "--rebuild")
			claim(5) // written while the cdc is stopped: the rebuild must count them
		})
	}

	c = e.StartCDC(nil, func(_ *sink.Config, d *sink.Daemon) { d.Rebuild = true })
	// the bogus checkpoint compares as ahead of the server: wait for the rebuild to replace it
	cdctest.WaitFor(t, 60*time.Second, "the rebuild saves a checkpoint the server has", func() bool {
		return e.checkpoint().Pos.File != "mysql-bin.999999"
	})
	e.assertTruth(true)
	e.assertTemplateCaches()
	claim(10) // and it streams from the snapshot's position
	e.assertTruth(true)
	cp := e.checkpoint()
	require.True(t, cp.BootstrappedAt.Valid)
	require.NotEqual(t, "mysql-bin.999999", cp.Pos.File)
	require.Empty(t, e.anomalies())
}
