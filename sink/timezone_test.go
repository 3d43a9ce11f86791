package sink_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/inventory"
	"github.com/couponlink/couponlink/sink"
)

// A shop in Shanghai writes its DATETIMEs as Shanghai wall clocks: an end
// time, and a coupon's own expiry, of UTC_TIMESTAMP() + 4 hours read in
// Shanghai (UTC+8) passed 4 hours ago, but read as UTC is 4 hours ahead. A
// use now, between the two readings, is used_after_expiry only with
// time_zone: Asia/Shanghai, and status counts the unused coupon past its
// own expiry as expired only then; an expiry 10 hours ahead (2 hours ahead
// in Shanghai) is fine either way.
func TestLegacyTimeZone(t *testing.T) {
	for _, zone := range []string{"", "Asia/Shanghai"} {
		t.Run("time_zone="+zone, func(t *testing.T) {
			l := newRulesEnv(t)
			l.exec(`ALTER TABLE ` + l.tq("t_user_coupon") + ` ADD COLUMN expire_time DATETIME NULL`)
			l.yaml = strings.Replace(l.yaml, "user: uid}", "user: uid, expires_at: expire_time}", 1)
			if zone != "" {
				l.yaml += "time_zone: " + zone + "\n"
			}
			const between = "UTC_TIMESTAMP() + INTERVAL 4 HOUR" // past in Shanghai, ahead in UTC
			const ahead = "UTC_TIMESTAMP() + INTERVAL 10 HOUR"  // ahead in both
			l.rulesTemplate(1, nil, between)
			l.rulesTemplate(2, nil, "NULL") // no end: only the coupons' own expiry
			l.StartCDC(l.mapping())
			l.WaitCheckpoint()
			coupon := func(tpl int64, expires string) int64 {
				id := l.give(l.DB, tpl, "u")
				l.exec(`UPDATE `+l.tq("t_user_coupon")+` SET expire_time = `+expires+` WHERE id = ?`, id)
				return id
			}
			l.rulesTemplate(3, nil, between) // read from the binlog, not the snapshot
			ended, ownExpired, fine, unused := coupon(1, "NULL"), coupon(2, between), coupon(2, ahead), coupon(2, between)
			endedLater := coupon(3, "NULL")
			for _, id := range []int64{ended, ownExpired, fine, endedLater} {
				l.use(l.DB, id)
			}
			l.WaitCheckpoint()

			var got []string
			for _, r := range l.detailRows(sink.AnomalyUsedAfterExpiry) {
				var c, tpl int64
				_, err := fmt.Sscanf(r, "%d %d", &c, &tpl)
				require.NoError(t, err, r)
				got = append(got, fmt.Sprint(c))
			}
			view, err := inventory.NewQueries(l.mapping()).ReadTemplate(context.Background(), l.DB, 2)
			require.NoError(t, err)
			if zone == "" {
				require.Empty(t, got, "read as UTC, nothing had ended")
				require.Zero(t, view.PastEnd)
				return
			}
			require.ElementsMatch(t, []string{fmt.Sprint(ended), fmt.Sprint(ownExpired), fmt.Sprint(endedLater)}, got,
				"read in Shanghai: the campaigns' ends (from the snapshot and from the binlog) and a coupon's own expiry had passed")
			require.Equal(t, int64(1), view.PastEnd, "coupon %d, unused past its own expiry, is shown as expired", unused)
			require.Equal(t, [2]int64{0, 1}, [2]int64{view.Held, view.Expired}, "held 0, expired 1")
		})
	}
}
