package sink_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/inventory"
)

// An anomaly is a finding, recorded in the batch's transaction: an
// acknowledged finding recorded again as it was stays acknowledged (seen
// twice); the same coupon's anomaly of the same kind with another detail
// opens it again. cdc_anomaly keeps every occurrence.
func TestAnomalyFindingsAcknowledgedStayChangedReopens(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	tpl := e.Template(map[string]int64{"app": 100, "web": 100}, time.Hour)
	c := e.StartCDC(nil)
	e.WaitCheckpoint()
	cl, err := e.Store.Claim(ctx, coupon.ClaimRequest{TemplateID: tpl, UserID: "f1", Channel: "app", RequestID: "f1"})
	require.NoError(t, err)
	exec := func(q string, args ...any) {
		_, err := e.DB.Exec(q, args...)
		require.NoError(t, err, q)
	}
	unexpire := func() { // AVAILABLE -> EXPIRED (legal) -> AVAILABLE (illegal)
		exec(`UPDATE user_coupon SET status = 3 WHERE id = ?`, cl.UserCouponID)
		exec(`UPDATE user_coupon SET status = 1 WHERE id = ?`, cl.UserCouponID)
		e.waitSettled(c, 30*time.Second)
	}
	finding := func() inventory.Finding {
		t.Helper()
		fs, err := inventory.ListFindings(ctx, e.DB, inventory.FindingsQuery{Source: "cdc"})
		require.NoError(t, err)
		require.Len(t, fs, 1)
		require.Equal(t, inventory.AnomalyIllegalTransition, fs[0].Kind)
		return fs[0]
	}

	unexpire()
	f := finding()
	require.Equal(t, "open", f.State)
	require.Equal(t, int64(1), f.TimesSeen)
	_, err = inventory.AckFinding(ctx, e.DB, f.Fingerprint, "ann", "a test put it back", "")
	require.NoError(t, err)

	unexpire()
	f = finding()
	require.Equal(t, "acknowledged", f.State, "found again as it was")
	require.Equal(t, int64(2), f.TimesSeen)

	exec(`UPDATE user_coupon SET channel = 'web' WHERE id = ?`, cl.UserCouponID) // another illegal change of that coupon
	e.waitSettled(c, 30*time.Second)
	f = finding()
	require.Equal(t, "open", f.State, "changed: open again")
	require.Equal(t, int64(3), f.TimesSeen)
	require.Equal(t, map[string]int{inventory.AnomalyIllegalTransition: 3}, e.anomalies())
}
