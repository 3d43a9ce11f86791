package sink_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/inventory"
	"github.com/couponlink/couponlink/reconcile"
)

// A shop with only 0 unused / 1 used / 2 expired maps no RETURNED code:
// coupons claimed, used (with their t_writeoff row) and expired by raw SQL
// are counted exactly, returned stays 0 everywhere, a stored 3 (no state
// of this shop) is one undecodable_row, and a reconcile pass is clean.
func TestLegacyWithoutReturned(t *testing.T) {
	l := newLegacyEnv(t)
	l.yaml = strings.Replace(legacyMappingYAML, ", RETURNED: [3, 9]", "", 1)
	l.codes = map[coupon.Status][]int{coupon.Available: {0}, coupon.Used: {1}, coupon.Expired: {2}}
	m := l.mapping()
	require.Empty(t, m.Codes(coupon.Returned))
	uc := l.tq("t_user_coupon")
	l.exec(`INSERT INTO ` + l.tq("t_coupon_tpl") + ` (id, budget) VALUES (1, 1000), (2, 1000)`)
	// before the first start: counted by the bootstrap
	l.exec(`INSERT INTO ` + uc + ` (tpl_id, source, state, uid) VALUES (1, 'app', 0, 'p0'), (1, 'app', 1, 'p1'), (2, NULL, 2, 'p2')`)
	l.StartCDC(m)
	l.WaitCheckpoint()
	require.Equal(t, l.legacyTruth(), l.Counters(), "bootstrap")

	var claimed []int64
	for i := range 30 {
		res, err := l.DB.Exec(`INSERT INTO `+uc+` (tpl_id, source, state, uid) VALUES (?, ?, 0, ?)`, 1+i%2, []any{"app", "h5", nil}[i%3], fmt.Sprint("u", i))
		require.NoError(t, err)
		id, err := res.LastInsertId()
		require.NoError(t, err)
		claimed = append(claimed, id)
	}
	for i, id := range claimed[:10] { // used, with the write-off row in the same transaction
		require.NoError(t, l.redeem(id, fmt.Sprint("o", i), 0, true))
	}
	for _, id := range claimed[10:18] {
		l.exec(`UPDATE `+uc+` SET state = 2 WHERE id = ? AND state = 0`, id)
	}
	l.exec(`INSERT INTO ` + uc + ` (tpl_id, source, state, uid) VALUES (1, 'app', 3, 'x')`) // no state of this shop
	l.WaitCheckpoint()

	truth := l.legacyTruth()
	require.Equal(t, truth, l.Counters(), "counters differ from the truth with the shop's three codes")
	var used, expired int64
	for _, c := range truth {
		used, expired = used+c.Used, expired+c.Expired
	}
	require.Equal(t, [2]int64{11, 9}, [2]int64{used, expired})
	for p, c := range l.CounterRows() {
		require.Zero(t, c.Returned, "returned of %v", p)
		require.Zero(t, c.Released, "released of %v", p)
	}
	require.Equal(t, map[string]int{inventory.AnomalyUndecodableRow: 1}, l.anomalies(), "only the stored 3")

	binlog, err := canal.ConfigFromDSN(l.DSN)
	require.NoError(t, err)
	r, err := reconcile.New(reconcile.Config{DB: l.DB, Mapping: m, Binlog: binlog, Logger: testenv.QuietLogger(), Registerer: prometheus.NewRegistry()})
	require.NoError(t, err)
	rep, err := r.Pass(l.Ctx)
	require.NoError(t, err)
	require.True(t, rep.CountersCompared, rep.Note)
	require.Equal(t, "clean", rep.Status, rep.Summary())
}
