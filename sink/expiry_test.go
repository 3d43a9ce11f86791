package sink_test

import (
	"database/sql"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/inventory"
	"github.com/couponlink/couponlink/sink"
)

const (
	future = "NOW() + INTERVAL 1 DAY" // a day either way: whatever the server's time zone
	past   = "NOW() - INTERVAL 1 DAY"
)

// setEnds sets a template's end time (an SQL expression), in q.
func (l *legacyEnv) setEnds(q interface {
	Exec(string, ...any) (sql.Result, error)
}, tpl int64, ends string) {
	l.T.Helper()
	_, err := q.Exec(`UPDATE `+l.tq("t_coupon_tpl")+` SET ends = `+ends+` WHERE id = ?`, tpl)
	require.NoError(l.T, err)
}

// use is the shop's redemption: USED, its order and its write-off row.
func (l *legacyEnv) use(q interface {
	Exec(string, ...any) (sql.Result, error)
}, id int64) {
	l.T.Helper()
	order := fmt.Sprint("o", id)
	_, err := q.Exec(`UPDATE `+l.tq("t_user_coupon")+` SET state = 1, order_no = ? WHERE id = ?`, order, id)
	require.NoError(l.T, err)
	_, err = q.Exec(`INSERT INTO `+l.tq("t_writeoff")+` (coupon_id, order_no) VALUES (?, ?)`, id, order)
	require.NoError(l.T, err)
}

// setState moves a coupon to a stored state code.
func (l *legacyEnv) setState(id int64, code int) {
	l.T.Helper()
	l.exec(`UPDATE `+l.tq("t_user_coupon")+` SET state = ?, order_no = NULL WHERE id = ?`, code, id)
}

// expiryRows reads the used_after_expiry anomalies as "coupon template
// what", what being "used" or "restored to AVAILABLE".
func (l *legacyEnv) expiryRows() []string {
	l.T.Helper()
	var out []string
	for _, r := range l.detailRows(inventory.AnomalyUsedAfterExpiry) {
		var c, tpl int64
		_, err := fmt.Sscanf(r, "%d %d", &c, &tpl)
		require.NoError(l.T, err)
		prefix := fmt.Sprintf("%d %d coupon %d was ", c, tpl, c)
		require.True(l.T, strings.HasPrefix(r, prefix), r)
		what, _, ok := strings.Cut(strings.TrimPrefix(r, prefix), " at ")
		require.True(l.T, ok, r)
		require.Contains(l.T, r, fmt.Sprintf("after its template %d ended at", tpl))
		out = append(out, fmt.Sprintf("%d %d %s", c, tpl, what))
	}
	return out
}

// A coupon used, or restored to AVAILABLE, after its template's end time
// in force at that point of the binlog is used_after_expiry: a use before
// the end is fine, one after it is flagged, an end extended in the binlog
// makes a later use fine again, and an end moved into the past after a
// use in the same transaction does not flag that use. Expiring or
// recycling a coupon after the end is fine. A restart repeats nothing.
func TestLegacyUsedAfterExpiry(t *testing.T) {
	l := newRulesEnv(t)
	l.rulesTemplate(1, nil, future)
	l.rulesTemplate(2, nil, "NULL") // no end
	c := make([]int64, 12)
	for i := range c {
		c[i] = l.give(l.DB, 1, fmt.Sprint("u", i))
	}
	other := l.give(l.DB, 2, "u0")
	l.setState(c[9], 2) // EXPIRED before the start
	cdc := l.StartCDC(l.mapping())
	l.WaitCheckpoint() // bootstrapped before the writes below

	l.use(l.DB, c[0]) // before the end: fine
	l.use(l.DB, c[7])
	l.setEnds(l.DB, 1, past)
	l.use(l.DB, c[1])         // after the end
	l.setState(c[0], 0)       // restored from USED after the end
	l.setState(c[2], 2)       // expired: fine
	l.setState(c[7], 9)       // recycled: fine
	l.setState(c[7], 0)       // restored from RETURNED (illegal, too)
	l.setState(c[9], 0)       // restored from EXPIRED (illegal, too)
	l.use(l.DB, other)        // no end: fine
	l.inTx(func(tx *sql.Tx) { // extended, then used: fine
		l.setEnds(tx, 1, future)
		l.use(tx, c[3])
	})
	l.inTx(func(tx *sql.Tx) { // used, then the end moved into the past: fine
		l.use(tx, c[4])
		l.setEnds(tx, 1, past)
	})
	l.use(l.DB, c[5])         // after the end again
	l.inTx(func(tx *sql.Tx) { // a coupon inserted as USED after the end (illegal, too)
		res, err := tx.Exec(`INSERT INTO ` + l.tq("t_user_coupon") + ` (tpl_id, source, state, uid, order_no) VALUES (1, 'app', 1, 'u', 'oi')`)
		require.NoError(t, err)
		id, err := res.LastInsertId()
		require.NoError(t, err)
		c[11] = id
		_, err = tx.Exec(`INSERT INTO `+l.tq("t_writeoff")+` (coupon_id, order_no) VALUES (?, 'oi')`, id)
		require.NoError(t, err)
	})
	l.WaitCheckpoint()
	want := []string{
		fmt.Sprintf("%d 1 used", c[1]), fmt.Sprintf("%d 1 restored to AVAILABLE", c[0]), fmt.Sprintf("%d 1 restored to AVAILABLE", c[7]),
		fmt.Sprintf("%d 1 restored to AVAILABLE", c[9]), fmt.Sprintf("%d 1 used", c[5]), fmt.Sprintf("%d 1 used", c[11]),
	}
	require.ElementsMatch(t, want, l.expiryRows())
	require.Equal(t, map[string]int{inventory.AnomalyUsedAfterExpiry: 6, inventory.AnomalyIllegalTransition: 3}, l.anomalies())

	// while stopped: a use after the end, then the end extended; the replay
	// (one transaction per batch) judges the use by the rules saved with
	// the checkpoint, not by the template row as the restart finds it
	cdc.Stop(t)
	l.use(l.DB, c[6])
	l.setEnds(l.DB, 1, future)
	l.StartCDC(l.mapping(), func(_ *sink.Config, d *sink.Daemon) { d.Tailer.BatchRows = 1 })
	l.use(l.DB, c[8]) // fine
	l.WaitCheckpoint()
	require.ElementsMatch(t, append(want, fmt.Sprintf("%d 1 used", c[6])), l.expiryRows(), "a restart repeats nothing, loses nothing")
}
