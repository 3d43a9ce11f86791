package api

import "time"

// The answers of the operator console's operations routes: reconcile
// passes and where the cdc stands.

// ResolveRequest is the body of POST /v1/reconcile/tasks/{id}/resolve:
// who resolves the item, and what was checked or done.
type ResolveRequest struct {
	Operator string `json:"operator"`
	Note     string `json:"note"`
}

// Resolved is the answer of POST /v1/reconcile/tasks/{id}/resolve.
type Resolved struct {
	TaskID     int64  `json:"task_id"`
	ResolvedBy string `json:"resolved_by"`
	// OnBehalfOf is who ResolvedBy (a token's name) acted for, as the
	// request named them; "" when the same or without a token.
	OnBehalfOf string `json:"on_behalf_of,omitempty"`
	Note       string `json:"note"`
}

// ReconcilePass is one reconcile pass as operators read it: when it ran,
// what it found, and, for one that needed review, who resolved it and how.
type ReconcilePass struct {
	TaskID     int64      `json:"task_id"`
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at"`
	Status     string     `json:"status"` // running, clean, auto_fixed, needs_review, acknowledged, error
	Summary    string     `json:"summary"`
	Position   string     `json:"position,omitempty"` // the binlog position the pass compared at
	ResolvedAt *time.Time `json:"resolved_at,omitempty"`
	ResolvedBy string     `json:"resolved_by,omitempty"`
	// ResolvedOnBehalfOf is who ResolvedBy (a token's name) acted for,
	// as the request named them; "" when the same or without a token.
	ResolvedOnBehalfOf string `json:"resolved_on_behalf_of,omitempty"`
	ResolvedNote       string `json:"resolved_note,omitempty"`
	// Corrected counts what the pass corrected, by store (counter,
	// template, quota, legacy: rows; redis: stock keys; claimed_users:
	// members of claimed sets added or removed); absent when it corrected
	// nothing.
	Corrected map[string]int64 `json:"corrected,omitempty"`
}

// ReconcileDifference is one derived value that is not the truth.
type ReconcileDifference struct {
	Store    string `json:"store"`
	Target   string `json:"target"`
	Template int64  `json:"template"`
	Channel  string `json:"channel,omitempty"`
	Field    string `json:"field,omitempty"`
	Expected int64  `json:"expected"`
	Found    *int64 `json:"found"` // nil: missing, or not an integer (FoundRaw)
	// FoundRaw is what a Redis key held when it was not an integer: a
	// quoted string ("garbage") or a wrong type (<hash>).
	FoundRaw string `json:"found_raw,omitempty"`
	Action   string `json:"action"`
	Reason   string `json:"reason,omitempty"`
	// Source is where it was found, with sources: the source whose pass
	// found it, or for a check of the sum over the sources the sources
	// concerned.
	Source string `json:"source,omitempty"`
	// Fingerprint and Finding are the finding a difference left for a
	// person is (see Finding) and its state after the pass: open, or
	// acknowledged when a person acknowledged it as it is found again.
	Fingerprint string `json:"fingerprint,omitempty"`
	Finding     string `json:"finding,omitempty"`
}

// Delta is found − expected (missing, or not an integer, counts as 0).
func (d ReconcileDifference) Delta() int64 {
	if d.Found == nil {
		return -d.Expected
	}
	return *d.Found - d.Expected
}

// ReconcileOpenItem is a pass that needs a person: it needs review and is
// not resolved.
type ReconcileOpenItem struct {
	TaskID      int64                 `json:"task_id"`
	StartedAt   time.Time             `json:"started_at"`
	Summary     string                `json:"summary"`
	Differences []ReconcileDifference `json:"differences"`
}

// ReconcileTasks is the answer of GET /v1/reconcile/tasks: the last
// passes, newest first, and the open items, oldest first.
type ReconcileTasks struct {
	Passes []ReconcilePass     `json:"passes"`
	Open   []ReconcileOpenItem `json:"open"`
}

// CDCState is where one cdc stands: its checkpoint, lag, anomalies,
// webhooks and shards, as `couponlink status -json` prints it.
type CDCState struct {
	Checkpoint     string           `json:"checkpoint"`
	Found          bool             `json:"found"` // false: the cdc has not run against this database
	Position       string           `json:"position,omitempty"`
	ServerPosition string           `json:"server_position"`
	LagSeconds     float64          `json:"lag_seconds"`
	EventTime      *time.Time       `json:"event_time,omitempty"`
	SavedAt        *time.Time       `json:"saved_at,omitempty"`
	Leader         string           `json:"leader,omitempty"`
	Epoch          int64            `json:"epoch"`
	EventsApplied  int64            `json:"events_applied"`
	Batches        int64            `json:"batches"`
	BootstrappedAt *time.Time       `json:"bootstrapped_at,omitempty"`
	Anomalies      map[string]int64 `json:"anomalies"`
	Recent         []Anomaly        `json:"recent_anomalies,omitempty"` // newest first
	Webhooks       Outbox           `json:"webhooks"`
	// EventSinks are the stream sinks' positions (Redis streams, NATS
	// JetStream), by name; a failing one says so and why.
	EventSinks []EventSink `json:"event_sinks,omitempty"`
	// Shards are a legacy mapping's sharded roles and their tables now.
	Shards      []Shards `json:"shards,omitempty"`
	ShardsError string   `json:"shards_error,omitempty"`
}

// Shards is a sharded role: its set as the mapping writes it, and the
// tables it stands for on the server.
type Shards struct {
	Role   string   `json:"role"`
	Set    string   `json:"set"`
	Tables []string `json:"tables"`
}

// Anomaly is one of the latest anomalies the cdc recorded: couponlink's
// states and the codes the source stored, and both together as "change"
// ("AVAILABLE(0) -> USED(1)").
type Anomaly struct {
	ID        int64     `json:"id"`
	Kind      string    `json:"kind"`
	Coupon    int64     `json:"coupon,omitempty"`
	Template  int64     `json:"template,omitempty"`
	Channel   string    `json:"channel,omitempty"`
	FromState string    `json:"from_state,omitempty"`
	ToState   string    `json:"to_state,omitempty"`
	FromCode  *int64    `json:"from_code,omitempty"`
	ToCode    *int64    `json:"to_code,omitempty"`
	Change    string    `json:"change,omitempty"`
	Order     string    `json:"order,omitempty"`
	Detail    string    `json:"detail"`
	At        time.Time `json:"at"`
}

// Outbox is the webhook outbox's events by status.
type Outbox struct {
	Pending       int64      `json:"pending"`
	Delivered     int64      `json:"delivered"`
	Dropped       int64      `json:"dropped"`
	Failing       int64      `json:"failing"` // pending events whose delivery failed at least once
	OldestPending *time.Time `json:"oldest_pending,omitempty"`
	LastError     string     `json:"last_error,omitempty"` // the newest failing event's error
}

// EventSink is a stream sink's delivery: its position in the outbox, what
// it took and dropped, and while it fails (FailedRounds > 0) its last
// error, without secrets.
type EventSink struct {
	Name         string `json:"name"`
	Position     int64  `json:"position"` // the last outbox id it took or skipped
	Delivered    int64  `json:"delivered"`
	Dropped      int64  `json:"dropped"`
	FailedRounds int64  `json:"failed_rounds"` // failed rounds since the position last moved
	LastError    string `json:"last_error,omitempty"`
	LeaseEpoch   int64  `json:"lease_epoch"` // the leader epoch of the cdc delivering to it
}

// CDCProcess is what the cdc's /metrics say; Reachable false: the API
// could not read them (Error says why), and the gauges are null.
type CDCProcess struct {
	MetricsURL         string   `json:"metrics_url,omitempty"`
	Reachable          bool     `json:"reachable"`
	Error              string   `json:"error,omitempty"`
	Leader             *float64 `json:"leader"`               // couponlink_cdc_leader: 1 while it applies the binlog
	RedisBehindBatches *float64 `json:"redis_behind_batches"` // couponlink_redis_behind_batches
	LagSeconds         *float64 `json:"lag_seconds"`          // couponlink_cdc_lag_seconds
}

// CDCStatus is the answer of GET /v1/cdc/status: where the cdc stands,
// its process's gauges when its metrics answer, and the last reconcile
// pass (nil before the first).
type CDCStatus struct {
	CDCState
	Process       CDCProcess     `json:"process"`
	LastReconcile *ReconcilePass `json:"last_reconcile"`
}
