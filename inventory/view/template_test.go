package view_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/inventory/view"
)

// A legacy template in status: claimable is budget − taken, 0 once the
// campaign has ended, unknown without a budget; an ended campaign's
// AVAILABLE coupons are shown as expired, and the JSON says how many.
func TestStatusOfLegacyTemplate(t *testing.T) {
	c, moved := view.PastEnd(view.Counts{Held: 5, Used: 3, Expired: 1, Returned: 1, Released: 1})
	require.Equal(t, view.Counts{Used: 3, Expired: 6, Returned: 1, Released: 1}, c)
	require.Equal(t, int64(5), moved)
	require.Equal(t, int64(9), c.Taken(), "taken is unchanged")

	rem := int64(40)
	tpl := view.Template{ID: 7, Found: true, Name: "spring", Budget: 50, HasBudget: true, Remaining: &rem, PerUserLimit: 2,
		Counts: view.Counts{Held: 5, Used: 3, Expired: 1}, Channels: []view.Channel{
			{Name: "0", Label: "back office", Counts: view.Counts{Held: 2, Used: 3}},
			{Name: "1", Counts: view.Counts{Held: 3, Expired: 1}, HasQuota: true}}}
	tpl.Channels[1].Quota, tpl.Channels[1].Claimed = 10, 4
	n, ok := tpl.Claimable()
	require.True(t, ok)
	require.Equal(t, int64(41), n)
	require.Equal(t, "0 (back office)", tpl.Channels[0].Display())
	require.Equal(t, "1", tpl.Channels[1].Display())
	got, err := json.Marshal(tpl)
	require.NoError(t, err)
	require.JSONEq(t, `{"template": 7, "found": true, "name": "spring", "budget": 50, "remaining": 40, "claimable": 41, "per_user_limit": 2,
		"ended": false, "held": 5, "used": 3, "expired": 1, "returned": 0, "released": 0, "frozen": 1, "expired_by_end_time": 0,
		"channels": [
			{"channel": "0", "label": "back office", "held": 2, "used": 3, "expired": 0, "returned": 0, "released": 0, "frozen": 0},
			{"channel": "1", "quota": 10, "claimable": 6, "held": 3, "used": 0, "expired": 1, "returned": 0, "released": 0, "frozen": 1}]}`, string(got))

	tpl.Ended, tpl.EndTime = true, time.Date(2026, 6, 30, 23, 59, 59, 0, time.UTC)
	tpl.Counts, tpl.PastEnd = view.PastEnd(tpl.Counts)
	n, ok = tpl.Claimable()
	require.Equal(t, [2]any{int64(0), true}, [2]any{n, ok}, "nothing is claimable once the campaign has ended")
	got, err = json.Marshal(tpl)
	require.NoError(t, err)
	var v map[string]any
	require.NoError(t, json.Unmarshal(got, &v))
	require.Equal(t, []any{"2026-06-30T23:59:59Z", true, 0.0, 6.0, 5.0, 0.0}, []any{v["end_time"], v["ended"], v["held"], v["expired"],
		v["expired_by_end_time"], v["claimable"]})

	none := view.Template{ID: 8, Counts: view.Counts{Held: 1}}
	_, ok = none.Claimable()
	require.False(t, ok, "no budget, no claimable")
	got, err = json.Marshal(none)
	require.NoError(t, err)
	v = nil
	require.NoError(t, json.Unmarshal(got, &v))
	require.Equal(t, []any{nil, nil, false}, []any{v["budget"], v["claimable"], v["found"]})
	require.NotContains(t, v, "remaining")
}

// An unlimited budget has no claimable number (null, "unlimited": true),
// never a negative one; a campaign off the shelf has 0 claimable; coupons
// past their own expiry move from held to expired, at most all held.
func TestUnlimitedAndOffShelfTemplates(t *testing.T) {
	unlimited := view.Template{ID: 1, Found: true, Unlimited: true, Counts: view.Counts{Held: 7, Used: 3}}
	_, known := unlimited.Claimable()
	require.False(t, known)
	out, err := json.Marshal(unlimited)
	require.NoError(t, err)
	require.Contains(t, string(out), `"budget":null`)
	require.Contains(t, string(out), `"claimable":null`)
	require.Contains(t, string(out), `"unlimited":true`)
	require.NotContains(t, string(out), `"off_shelf"`)

	off := view.Template{ID: 2, Found: true, Budget: 10, HasBudget: true, OffShelf: true, Counts: view.Counts{Held: 4}}
	n, known := off.Claimable()
	require.True(t, known)
	require.Zero(t, n)
	unlimited.OffShelf = true
	n, known = unlimited.Claimable()
	require.True(t, known, "an unlimited campaign off the shelf has nothing claimable")
	require.Zero(t, n)
	out, err = json.Marshal(off)
	require.NoError(t, err)
	require.Contains(t, string(out), `"claimable":0`)
	require.Contains(t, string(out), `"off_shelf":true`)

	c, moved := view.PastOwnExpiry(view.Counts{Held: 3, Expired: 1, Used: 2}, 5)
	require.Equal(t, int64(3), moved)
	require.Equal(t, view.Counts{Held: 0, Expired: 4, Used: 2}, c)
	c, moved = view.PastOwnExpiry(view.Counts{Held: 3}, 1)
	require.Equal(t, int64(1), moved)
	require.Equal(t, view.Counts{Held: 2, Expired: 1}, c)
}
