package sink_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/inventory"
	"github.com/couponlink/couponlink/sink"
)

// Bootstrap on a database that already holds 100,000 coupons (four
// templates, four channels, every state, release flows): the first start
// counts them from a consistent snapshot — while writers keep going — and
// then streams from exactly the snapshot's position.
func TestBootstrapOnExistingCoupons(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const coupons = 100_000
	channels := []string{"app", "web", "sms", "mini"}
	var tpls []int64
	for i := range 4 {
		quotas := map[string]int64{}
		for _, ch := range channels {
			quotas[ch] = 10_000
		}
		tpl, err := e.Store.CreateTemplate(ctx, coupon.NewTemplate{Name: fmt.Sprint("bulk", i), TotalQuota: 40_000, Channels: quotas,
			ValidSeconds: 86400, PerUserLimit: 1000, ExpiryPolicy: coupon.PolicyRelease})
		require.NoError(t, err)
		tpls = append(tpls, tpl.ID)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	now := time.Now().UTC()
	claimed := map[inventory.Pair]int64{}
	const chunk = 2_000
	for start := 0; start < coupons; start += chunk {
		var b strings.Builder
		args := make([]any, 0, 6*chunk)
		b.WriteString(`INSERT INTO user_coupon (template_id, user_id, channel, status, claimed_at, expires_at) VALUES `)
		for i := start; i < start+chunk; i++ {
			if i > start {
				b.WriteString(", ")
			}
			b.WriteString("(?, ?, ?, ?, ?, ?)")
			p := inventory.Pair{Template: tpls[rng.IntN(len(tpls))], Channel: channels[rng.IntN(len(channels))]}
			claimed[p]++
			st := []coupon.Status{coupon.Available, coupon.Available, coupon.Used, coupon.Used, coupon.Expired, coupon.Returned}[rng.IntN(6)]
			args = append(args, p.Template, fmt.Sprint("u", i%5000), p.Channel, st, now, now.Add(24*time.Hour))
		}
		_, err := e.DB.Exec(b.String(), args...)
		require.NoError(t, err)
	}
	for p, n := range claimed {
		_, err := e.DB.Exec(`UPDATE channel_quota SET claimed = ? WHERE template_id = ? AND channel = ?`, n, p.Template, p.Channel)
		require.NoError(t, err)
	}
	// release flows for a third of the expired coupons
	_, err := e.DB.Exec(`INSERT INTO inventory_flow (user_coupon_id, kind, seq, template_id, channel, from_status, to_status)
		SELECT id, 'release', 0, template_id, channel, 3, 3 FROM user_coupon WHERE status = 3 AND id % 3 = 0`)
	require.NoError(t, err)
	var n int
	require.NoError(t, e.DB.QueryRow(`SELECT COUNT(*) FROM user_coupon`).Scan(&n))
	require.Equal(t, coupons, n)

	c := e.StartCDC(nil)
	e.assertTruth(true) // right after the bootstrap
	e.assertTemplateCaches()
	bootstraps, _ := cdctest.Metric(t, c.Reg, "couponlink_cdc_bootstraps_total", nil)
	require.EqualValues(t, 1, bootstraps)
	require.True(t, e.checkpoint().BootstrappedAt.Valid)

	// then streaming: the write path and raw SQL on the bulk coupons
	_, err = e.DB.Exec(`UPDATE user_coupon SET status = 2, order_id = CONCAT('bulk', id) WHERE status = 1 AND id % 7 = 0`)
	require.NoError(t, err)
	_, err = e.DB.Exec(`INSERT INTO redemption_log (user_coupon_id, template_id, channel, order_id, redeemed_at, idempotency_key)
		SELECT id, template_id, channel, order_id, NOW(6), CONCAT(order_id, '/', id) FROM user_coupon WHERE order_id LIKE 'bulk%'`)
	require.NoError(t, err)
	_, err = e.DB.Exec(`UPDATE user_coupon SET status = 3 WHERE status = 1 AND id % 11 = 0`)
	require.NoError(t, err)
	_, err = e.DB.Exec(`DELETE FROM user_coupon WHERE status = 4 AND id % 13 = 0`)
	require.NoError(t, err)
	w := newWorkload(e, wlConfig{Workers: 3, Ops: 1_000, Quota: 200})
	w.run()
	e.assertTruth(true)
	e.assertTemplateCaches()

	// a rebuild while writers go on: the snapshot and its position agree
	c.Stop(t)
	before := e.checkpoint().BootstrappedAt.Time
	w.cfg.Ops += 1_000
	wait := w.start()
	c = e.StartCDC(nil, func(_ *sink.Config, d *sink.Daemon) { d.Rebuild = true })
	cdctest.WaitFor(t, 60*time.Second, "rebuilt", func() bool { return e.checkpoint().BootstrappedAt.Time.After(before) })
	wait()
	e.assertTruth(true)
	e.assertTemplateCaches()
}
