package sink_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Expiry by the shop's rule: a shop copies the campaign's end onto each
// coupon at claim time, but the coupons of a fixed-window campaign
// (template.fixed_window: kind 1) follow the campaign's current window.
// An admin extends a fixed-window campaign after its coupons' copied end
// passed: a use in the new window is not reported; a relative-validity
// coupon (kind 2) keeps its own end and is; a fixed-window campaign that
// has ended still reports its use; a campaign switched to a fixed window
// in the binlog is judged by that from there on; a use before a
// fixed-window campaign's start (template.start_time) is reported, one
// after the admin moved the start earlier is not; a restart repeats
// nothing.
func TestLegacyFixedWindowExpiry(t *testing.T) {
	l := newRulesEnv(t)
	l.exec(`ALTER TABLE ` + l.tq("t_user_coupon") + ` ADD COLUMN expire_time DATETIME NULL`)
	l.exec(`ALTER TABLE ` + l.tq("t_coupon_tpl") + ` ADD COLUMN kind TINYINT NOT NULL DEFAULT 2, ADD COLUMN starts DATETIME NULL`)
	l.yaml = strings.Replace(l.yaml, "user: uid}", "user: uid, expires_at: expire_time}", 1)
	l.yaml = strings.Replace(l.yaml, "end_time: ends}", "end_time: ends, start_time: starts, fixed_window: {column: kind, values: [1]}}", 1)
	l.rulesTemplate(1, nil, past) // fixed window, extended below
	l.rulesTemplate(2, nil, future)
	l.rulesTemplate(3, nil, past) // fixed window, not extended
	l.rulesTemplate(4, nil, future)
	l.rulesTemplate(5, nil, future) // fixed window, not open yet; opened below
	l.exec(`UPDATE ` + l.tq("t_coupon_tpl") + ` SET kind = 1 WHERE id IN (1, 3, 5)`)
	l.exec(`UPDATE ` + l.tq("t_coupon_tpl") + ` SET starts = ` + future + ` WHERE id = 5`)
	coupon := func(tpl int64) int64 { // the claim copies the campaign's end, here in the past
		id := l.give(l.DB, tpl, "u")
		l.exec(`UPDATE `+l.tq("t_user_coupon")+` SET expire_time = `+past+` WHERE id = ?`, id)
		return id
	}
	extended, relative, ended, switched := coupon(1), coupon(2), coupon(3), coupon(4)
	early, opened := coupon(5), coupon(5)
	c := l.StartCDC(l.mapping())
	l.WaitCheckpoint()

	l.setEnds(l.DB, 1, future) // the admin extends campaign 1
	l.exec(`UPDATE ` + l.tq("t_coupon_tpl") + ` SET kind = 1 WHERE id = 4`)
	for _, id := range []int64{extended, relative, ended, switched, early} {
		l.use(l.DB, id)
	}
	l.exec(`UPDATE ` + l.tq("t_coupon_tpl") + ` SET starts = ` + past + ` WHERE id = 5`) // the admin opens campaign 5 early
	l.use(l.DB, opened)
	l.WaitCheckpoint()
	want := []string{fmt.Sprint(relative), fmt.Sprint(ended), fmt.Sprint(early)}
	require.ElementsMatch(t, want, l.expiredUses(), "the relative coupon by its own end, the ended campaign's by the campaign's, one before its window opened")
	var detail string
	require.NoError(t, l.DB.QueryRow(`SELECT detail FROM cdc_anomaly WHERE user_coupon_id = ?`, early).Scan(&detail))
	require.Contains(t, detail, "before its template 5's window opened at")

	c.Stop(t)
	l.StartCDC(l.mapping())
	l.WaitCheckpoint()
	require.ElementsMatch(t, want, l.expiredUses(), "a restart repeats nothing")
}
