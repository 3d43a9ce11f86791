package sink_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/inventory"
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

			got := l.expiredUses()
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

// Integer times, as shops written on PHP frameworks keep them (unix
// seconds or milliseconds in an INT or BIGINT), judge exactly as DATETIMEs:
// the same workload on the three schemas gives the same used_after_expiry
// anomalies (a campaign ended, from the snapshot and from the binlog; a
// coupon's own expiry) and the same coupon counted expired by its own
// time.
func TestLegacyIntegerTimes(t *testing.T) {
	day := 86400
	for _, c := range []struct {
		unit, column string
		at           func(days int) string // an SQL expression of now + days
	}{
		{"", "DATETIME", func(days int) string { return fmt.Sprintf("NOW() + INTERVAL %d DAY", days) }},
		{"unix_seconds", "INT", func(days int) string { return fmt.Sprintf("UNIX_TIMESTAMP() + %d", days*day) }},
		{"unix_millis", "BIGINT", func(days int) string { return fmt.Sprintf("(UNIX_TIMESTAMP() + %d) * 1000", days*day) }},
	} {
		t.Run(c.column+" "+c.unit, func(t *testing.T) {
			l := newRulesEnv(t)
			l.exec(`ALTER TABLE ` + l.tq("t_coupon_tpl") + ` MODIFY ends ` + c.column + ` NULL`)
			l.exec(`ALTER TABLE ` + l.tq("t_user_coupon") + ` ADD COLUMN expire_time ` + c.column + ` NULL`)
			col := func(name string) string {
				if c.unit == "" {
					return name
				}
				return "{column: " + name + ", unit: " + c.unit + "}"
			}
			l.yaml = strings.Replace(l.yaml, "user: uid}", "user: uid, expires_at: "+col("expire_time")+"}", 1)
			l.yaml = strings.Replace(l.yaml, "end_time: ends}", "end_time: "+col("ends")+"}", 1)
			l.rulesTemplate(1, nil, c.at(1))
			l.rulesTemplate(2, nil, "NULL") // no end: the coupons' own expiry only
			coupon := func(tpl int64, expires string) int64 {
				id := l.give(l.DB, tpl, "u")
				l.exec(`UPDATE `+l.tq("t_user_coupon")+` SET expire_time = `+expires+` WHERE id = ?`, id)
				return id
			}
			ended, ownExpired, fine, unused := coupon(1, "NULL"), coupon(2, c.at(-1)), coupon(2, c.at(1)), coupon(2, c.at(-1))
			l.StartCDC(l.mapping())
			l.WaitCheckpoint()
			l.setEnds(l.DB, 1, c.at(-1))
			l.rulesTemplate(3, nil, c.at(-1)) // read from the binlog, not the snapshot
			endedLater := coupon(3, "NULL")
			for _, id := range []int64{ended, ownExpired, fine, endedLater} {
				l.use(l.DB, id)
			}
			l.WaitCheckpoint()

			require.ElementsMatch(t, []string{fmt.Sprint(ended), fmt.Sprint(ownExpired), fmt.Sprint(endedLater)}, l.expiredUses())
			view, err := inventory.NewQueries(l.mapping()).ReadTemplate(context.Background(), l.DB, 2)
			require.NoError(t, err)
			require.Equal(t, int64(1), view.PastEnd, "coupon %d, unused past its own expiry, is shown as expired", unused)
			ended1, err := inventory.NewQueries(l.mapping()).ReadTemplate(context.Background(), l.DB, 1)
			require.NoError(t, err)
			require.True(t, ended1.Ended, "template 1's end, read by query, has passed")
		})
	}
}

// expiredUses are the coupons of the used_after_expiry anomalies.
func (l *legacyEnv) expiredUses() []string {
	l.T.Helper()
	var out []string
	for _, r := range l.detailRows(inventory.AnomalyUsedAfterExpiry) {
		var c, tpl int64
		_, err := fmt.Sscanf(r, "%d %d", &c, &tpl)
		require.NoError(l.T, err, r)
		out = append(out, fmt.Sprint(c))
	}
	return out
}
