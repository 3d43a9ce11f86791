package view

// How Counts are shown in JSON: the derived view shows the counters and
// frozen; the live view adds the bucket's quota, claimed and claimable.

type statesJSON struct {
	Held     int64 `json:"held"`
	Used     int64 `json:"used"`
	Expired  int64 `json:"expired"`
	Returned int64 `json:"returned"`
	Released int64 `json:"released"`
	Frozen   int64 `json:"frozen"`
}

func statesOf(c Counts) statesJSON {
	return statesJSON{Held: c.Held, Used: c.Used, Expired: c.Expired, Returned: c.Returned, Released: c.Released, Frozen: c.Frozen()}
}

type countsJSON struct {
	Quota     int64 `json:"quota"`
	Claimed   int64 `json:"claimed"`
	Claimable int64 `json:"claimable"`
	statesJSON
}

func countsOf(c Counts) countsJSON {
	return countsJSON{Quota: c.Quota, Claimed: c.Claimed, Claimable: c.Claimable(), statesJSON: statesOf(c)}
}
