package api

// The inventory of a template, as GET /v1/templates/{id}/inventory
// answers it: the live counts and the cdc's counters beside them.

// States are the counts by state: the derived counters and frozen
// (expired + returned − released).
type States struct {
	Held     int64 `json:"held"`
	Used     int64 `json:"used"`
	Expired  int64 `json:"expired"`
	Returned int64 `json:"returned"`
	Released int64 `json:"released"`
	Frozen   int64 `json:"frozen"`
}

// Counts are a channel bucket's (or a template's) quota, claim guard,
// claimable and states.
type Counts struct {
	Quota     int64 `json:"quota"`
	Claimed   int64 `json:"claimed"`
	Claimable int64 `json:"claimable"`
	States
}

// Derived are the cdc's counters of a template (without quota: the
// counters do not hold it) and the binlog position they reflect.
type Derived struct {
	Position   string `json:"position"`
	EventTime  string `json:"event_time,omitempty"` // RFC 3339, UTC; "": no event yet
	Checkpoint string `json:"checkpoint"`
	States
	Channels    map[string]States `json:"channels"`
	Initialized bool              `json:"initialized"` // false: the cdc has not run against this database
}

// Inventory is a template's quota counted live, per channel and in total,
// whether the total is conserved, and the cdc's counters when the API
// names a cdc.
type Inventory struct {
	TemplateID int64 `json:"template_id"`
	TotalQuota int64 `json:"total_quota"`
	Counts
	Channels  map[string]Counts `json:"channels"`
	Conserved bool              `json:"conserved"`
	Derived   *Derived          `json:"derived,omitempty"`
}

// TemplateSummary is one template as the console's campaigns page shows
// it (GET /v1/templates): its quota as four states (claimable from the
// channel buckets' claim guards, held/used/frozen from the cdc's
// counters), redemption rate, anomalies recorded by the cdc and where
// reconciliation stands.
type TemplateSummary struct {
	ID         int64  `json:"id"`
	Name       string `json:"name"`
	TotalQuota int64  `json:"total_quota"`
	Counts
	// RedemptionRate is used / (issued − released); nil while nothing is held or used.
	RedemptionRate *float64 `json:"redemption_rate"`
	Anomalies      int64    `json:"anomalies"`
	// Reconcile is needs_review when an open reconcile item names the
	// template, else the status of the last finished pass as it is for
	// the template (clean, auto_fixed, acknowledged, error; clean when it
	// needed review for other templates only; resolved when its item,
	// which named the template, was resolved), or "none" before the first.
	Reconcile string `json:"reconcile"`
}

// A template's reconcile status in the catalogue (TemplateSummary.Reconcile),
// besides the pass statuses it repeats.
const (
	ReconcileNeedsReview = "needs_review"
	ReconcileClean       = "clean"
	ReconcileResolved    = "resolved"
)

// TemplatePage is a page of templates, by id; NextAfter is the after of
// the next page (0: this is the last).
type TemplatePage struct {
	Templates []TemplateSummary `json:"templates"`
	NextAfter int64             `json:"next_after"`
}
