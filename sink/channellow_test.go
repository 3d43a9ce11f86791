package sink_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/sink"
	"github.com/couponlink/couponlink/webhook"
)

// channel.low: the change that brings a bucket's claimable slots from
// above share × quota (rounded up) to at or below it, not to 0, writes one
// event; staying low writes none; the last slot is channel.sold_out.
func TestChannelLowEvents(t *testing.T) {
	e := newEnv(t)
	e.StartCDC(nil, func(c *sink.Config, _ *sink.Daemon) { c.Webhooks, c.ChannelLow = true, 0.2 })
	tpl := e.Template(map[string]int64{"app": 10}, time.Hour)
	e.WaitCheckpoint() // bootstrapped: the changes below come from the binlog
	set := func(q string, args ...any) {
		_, err := e.DB.Exec(q+` WHERE template_id = ? AND channel = 'app'`, append(args, tpl)...)
		require.NoError(t, err)
	}
	set(`UPDATE channel_quota SET claimed = 5`)  // claimable 5 > 2
	set(`UPDATE channel_quota SET claimed = 8`)  // 2: low
	set(`UPDATE channel_quota SET claimed = 9`)  // 1: still low
	set(`UPDATE channel_quota SET claimed = 10`) // 0: sold out
	set(`UPDATE channel_quota SET quota = 20`)   // 10 > 4
	set(`UPDATE channel_quota SET claimed = 19`) // 1: low again
	e.WaitCheckpoint()
	low := e.outbox(webhook.ChannelLow)
	require.Len(t, low, 2)
	require.Equal(t, map[string]any{"quota": 10.0, "claimed": 8.0, "claimable": 2.0, "threshold": 2.0, "low_share": 0.2}, low[0]["data"])
	require.Equal(t, map[string]any{"quota": 20.0, "claimed": 19.0, "claimable": 1.0, "threshold": 4.0, "low_share": 0.2}, low[1]["data"])
	require.Equal(t, "app", low[0]["channel"])
	require.EqualValues(t, tpl, low[0]["template"])
	require.Len(t, e.outbox(webhook.ChannelSoldOut), 1)
}
