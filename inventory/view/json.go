package view

import "github.com/couponlink/couponlink/api"

// How Counts are shown in JSON: the derived view shows the counters and
// frozen; the live view adds the bucket's quota, claimed and claimable.

// States is how the derived counters and frozen show in JSON (the API's
// derived view, `couponlink status -json`).
type States = api.States

// StatesOf is c's derived states.
func StatesOf(c Counts) States {
	return States{Held: c.Held, Used: c.Used, Expired: c.Expired, Returned: c.Returned, Released: c.Released, Frozen: c.Frozen()}
}

func countsOf(c Counts) api.Counts {
	return api.Counts{Quota: c.Quota, Claimed: c.Claimed, Claimable: c.Claimable(), States: StatesOf(c)}
}
