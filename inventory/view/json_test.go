package view_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/inventory/view"
)

// The inventory route's answer, key for key: the live counts with their
// quota, claimable and frozen, conservation, and the cdc's counters
// without quota.
func TestInventoryJSON(t *testing.T) {
	app := view.Counts{Quota: 6, Claimed: 5, Held: 2, Used: 1, Expired: 1, Returned: 2, Released: 1}
	sms := view.Counts{Quota: 4, Claimed: 1, Used: 1}
	inv := view.Inventory{TemplateID: 7, TotalQuota: 10, Counts: app, Channels: map[string]view.Counts{"app": app, "sms": sms},
		Derived: &view.Derived{Checkpoint: "default", Initialized: true, Position: "mysql-bin.000002:4711 gtid=0-1-9",
			EventTime: time.Date(2026, 11, 30, 12, 0, 1, 0, time.FixedZone("x", 3600)),
			Counts:    view.Counts{Held: 2, Used: 1, Expired: 1, Returned: 2, Released: 1},
			Channels:  map[string]view.Counts{"app": {Held: 2, Used: 1, Expired: 1, Returned: 2, Released: 1}}}}
	inv.Counts.Add(sms)
	got, err := json.Marshal(inv)
	require.NoError(t, err)
	require.JSONEq(t, `{"template_id": 7, "total_quota": 10,
		"quota": 10, "claimed": 6, "claimable": 4, "held": 2, "used": 2, "expired": 1, "returned": 2, "released": 1, "frozen": 2,
		"channels": {
			"app": {"quota": 6, "claimed": 5, "claimable": 1, "held": 2, "used": 1, "expired": 1, "returned": 2, "released": 1, "frozen": 2},
			"sms": {"quota": 4, "claimed": 1, "claimable": 3, "held": 0, "used": 1, "expired": 0, "returned": 0, "released": 0, "frozen": 0}},
		"conserved": true,
		"derived": {"position": "mysql-bin.000002:4711 gtid=0-1-9", "event_time": "2026-11-30T11:00:01Z", "checkpoint": "default",
			"held": 2, "used": 1, "expired": 1, "returned": 2, "released": 1, "frozen": 2,
			"channels": {"app": {"held": 2, "used": 1, "expired": 1, "returned": 2, "released": 1, "frozen": 2}},
			"initialized": true}}`, string(got))

	// no cdc asked for: no derived; a cdc that has not run: no position yet
	inv.Derived = nil
	got, err = json.Marshal(inv)
	require.NoError(t, err)
	require.NotContains(t, string(got), "derived")
	got, err = json.Marshal(view.Derived{Checkpoint: "default", Channels: map[string]view.Counts{}})
	require.NoError(t, err)
	require.JSONEq(t, `{"position": "", "checkpoint": "default", "held": 0, "used": 0, "expired": 0, "returned": 0,
		"released": 0, "frozen": 0, "channels": {}, "initialized": false}`, string(got))
}
