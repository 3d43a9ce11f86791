package webhook

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/internal/cdctest"
)

// The dispatcher's series as exposed on the registry it was given, HELP
// and TYPE included: a delivery round per event and result (every event x
// result exists from the start, at 0), and the outbox's pending events.
func TestMetricsExposition(t *testing.T) {
	db := openDB(t)
	clock := newFakeClock()
	rc := newReceiver(t, func(_ int, r request) int {
		if r.Header.Get(HeaderEvent) == QuotaReleased {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	reg := prometheus.NewRegistry()
	d := newTestDispatcher(t, db, rc.srv.URL, clock, func(c *Config) { c.Registerer, c.MaxAttempts, c.Retries = reg, 2, 1 })
	// Retries 1: a send the loaded machine fails on its own is tried again
	// within the round (CI failed on it once; about 1 run in 100 with six
	// busy loops on the two cores saw channel.sold_out fail once, then
	// deliver); the receiver's 500s still fail every round
	ctx := context.Background()
	enqueueCommitted(t, db,
		Event{ID: NewID(), Type: ChannelSoldOut, Template: 1, Channel: "app", Data: map[string]int{"quota": 10}},
		Event{ID: NewID(), Type: QuotaReleased, Template: 1, Channel: "app", Data: map[string]int{"n": 1}})
	_, err := d.Deliver(ctx) // sold out delivered; released failed
	require.NoError(t, err)
	clock.Add(time.Hour)
	_, err = d.Deliver(ctx) // released failed again: its second attempt, dropped
	require.NoError(t, err)
	enqueueCommitted(t, db, Event{ID: NewID(), Type: AnomalyDetected, Template: 1, Data: map[string]int{"n": 1}})
	require.NoError(t, d.housekeep(ctx))

	counts := map[string]int{ChannelSoldOut + " " + resultDelivered: 1, QuotaReleased + " " + resultFailed: 1,
		QuotaReleased + " " + resultDropped: 1}
	var want strings.Builder
	want.WriteString(`# HELP couponlink_webhook_deliveries_total Webhook delivery rounds, by event type and result (delivered; failed: will be tried again; dropped: given up after too many attempts or because the outbox was full).
# TYPE couponlink_webhook_deliveries_total counter
`)
	for _, e := range Types {
		for _, res := range []string{resultDelivered, resultFailed, resultDropped} {
			fmt.Fprintf(&want, "couponlink_webhook_deliveries_total{event=%q,result=%q} %d\n", e, res, counts[e+" "+res])
		}
	}
	want.WriteString(`# HELP couponlink_webhook_outbox_pending Webhook events in the outbox waiting to be delivered.
# TYPE couponlink_webhook_outbox_pending gauge
couponlink_webhook_outbox_pending 1
`)
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want.String()),
		"couponlink_webhook_deliveries_total", "couponlink_webhook_outbox_pending"))
	cdctest.NoDefaultMetrics(t)
}
