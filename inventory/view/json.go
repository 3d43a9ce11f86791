package view

// How Counts are shown in JSON: the derived view shows the counters and
// frozen; the live view adds the bucket's quota, claimed and claimable.

// States is how the derived counters and frozen show in JSON (the API's
// derived view, `couponlink status -json`).
type States struct {
	Held     int64 `json:"held"`
	Used     int64 `json:"used"`
	Expired  int64 `json:"expired"`
	Returned int64 `json:"returned"`
	Released int64 `json:"released"`
	Frozen   int64 `json:"frozen"`
}

// StatesOf is c's derived states.
func StatesOf(c Counts) States {
	return States{Held: c.Held, Used: c.Used, Expired: c.Expired, Returned: c.Returned, Released: c.Released, Frozen: c.Frozen()}
}

type countsJSON struct {
	Quota     int64 `json:"quota"`
	Claimed   int64 `json:"claimed"`
	Claimable int64 `json:"claimable"`
	States
}

func countsOf(c Counts) countsJSON {
	return countsJSON{Quota: c.Quota, Claimed: c.Claimed, Claimable: c.Claimable(), States: StatesOf(c)}
}
