package sink_test

import (
	"database/sql"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/inventory"
	"github.com/couponlink/couponlink/sink"
)

// A shop whose status codes are not couponlink's numbers (0 unused, 1
// used, 2 expired, 3 and 9 returned): every anomaly row names the states
// in couponlink's words and the codes as the shop stored them, so 0 -> 1
// reads AVAILABLE -> USED and not couponlink's 1 -> 2.
func TestAnomalyRowsCarryTheShopsCodes(t *testing.T) {
	l := newLegacyEnv(t)
	uc := l.tq("t_user_coupon")
	l.exec(`INSERT INTO ` + l.tq("t_coupon_tpl") + ` (id, budget) VALUES (1, 1000)`)
	c := l.StartCDC(l.mapping(), func(cfg *sink.Config, _ *sink.Daemon) { cfg.RedemptionGrace = 300 * time.Millisecond })
	l.WaitCheckpoint()
	ids := map[string]int64{}
	for _, u := range []string{"a", "b", "c", "d"} {
		res, err := l.DB.Exec(`INSERT INTO `+uc+` (tpl_id, source, state, uid) VALUES (1, 'app', 0, ?)`, u)
		require.NoError(t, err)
		ids[u], err = res.LastInsertId()
		require.NoError(t, err)
	}
	l.exec(`UPDATE `+uc+` SET state = 1, order_no = 'oa' WHERE id = ?`, ids["a"]) // no write-off row
	l.exec(`UPDATE `+uc+` SET state = 2 WHERE id = ?`, ids["b"])
	require.NoError(t, l.redeem(ids["b"], "ob", 0, true)) // EXPIRED -> USED, with its write-off row
	l.exec(`UPDATE `+uc+` SET state = 9 WHERE id = ?`, ids["c"])
	l.exec(`DELETE FROM `+uc+` WHERE id = ?`, ids["c"])
	l.exec(`UPDATE `+uc+` SET state = 3 WHERE id = ?`, ids["d"])
	l.exec(`UPDATE `+uc+` SET state = 0 WHERE id = ?`, ids["d"]) // RETURNED -> AVAILABLE
	l.waitSettled(c, 30*time.Second)

	type row struct {
		Kind                 string
		Coupon               int64
		FromStatus, ToStatus sql.NullInt64
		FromState, ToState   sql.NullString
		FromCode, ToCode     sql.NullInt64
	}
	rows, err := l.DB.Query(`SELECT kind, user_coupon_id, from_status, to_status, from_state, to_state, from_code, to_code
		FROM cdc_anomaly ORDER BY user_coupon_id, id`)
	require.NoError(t, err)
	defer rows.Close()
	var got []row
	for rows.Next() {
		var r row
		require.NoError(t, rows.Scan(&r.Kind, &r.Coupon, &r.FromStatus, &r.ToStatus, &r.FromState, &r.ToState, &r.FromCode, &r.ToCode))
		got = append(got, r)
	}
	require.NoError(t, rows.Err())
	n := func(v int64) sql.NullInt64 { return sql.NullInt64{Int64: v, Valid: true} }
	s := func(v string) sql.NullString { return sql.NullString{String: v, Valid: true} }
	require.Equal(t, []row{
		{inventory.AnomalyUsedWithoutRedemption, ids["a"], n(1), n(2), s("AVAILABLE"), s("USED"), n(0), n(1)},
		{inventory.AnomalyIllegalTransition, ids["b"], n(3), n(2), s("EXPIRED"), s("USED"), n(2), n(1)},
		{inventory.AnomalyDeletedCoupon, ids["c"], n(4), sql.NullInt64{}, s("RETURNED"), sql.NullString{}, n(9), sql.NullInt64{}},
		{inventory.AnomalyIllegalTransition, ids["d"], n(4), n(1), s("RETURNED"), s("AVAILABLE"), n(3), n(0)},
	}, got)
	var detail string
	require.NoError(t, l.DB.QueryRow(`SELECT detail FROM cdc_anomaly WHERE user_coupon_id = ?`, ids["d"]).Scan(&detail))
	require.Contains(t, detail, "went RETURNED(3) -> AVAILABLE(0), which is not a legal transition")
	require.NoError(t, l.DB.QueryRow(`SELECT detail FROM cdc_anomaly WHERE user_coupon_id = ?`, ids["c"]).Scan(&detail))
	require.Contains(t, detail, "(RETURNED(9)) was deleted")
}
