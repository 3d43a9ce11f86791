package inventory

import (
	"database/sql"
	"time"
)

// CDCStatus is where one cdc stands: its checkpoint, lag, anomalies,
// webhooks and shards, as `couponlink status -json` prints it (without
// the inventory; with sources, each source's) and GET /v1/cdc/status
// of the API answers it.
type CDCStatus struct {
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
	Recent         []AnomalyJSON    `json:"recent_anomalies,omitempty"` // newest first
	Webhooks       WebhooksJSON     `json:"webhooks"`
	// Shards are a legacy mapping's sharded roles and their tables now.
	Shards      []ShardsJSON `json:"shards,omitempty"`
	ShardsError string       `json:"shards_error,omitempty"`
}

// ShardsJSON is a sharded role: its set as the mapping writes it, and the
// tables it stands for on the server.
type ShardsJSON struct {
	Role   string   `json:"role"`
	Set    string   `json:"set"`
	Tables []string `json:"tables"`
}

// AnomalyJSON is one of the latest anomalies: couponlink's states and the
// codes the source stored, and both together as "change" ("AVAILABLE(0)
// -> USED(1)").
type AnomalyJSON struct {
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

type WebhooksJSON struct {
	Pending       int64      `json:"pending"`
	Delivered     int64      `json:"delivered"`
	Dropped       int64      `json:"dropped"`
	Failing       int64      `json:"failing"` // pending events whose delivery failed at least once
	OldestPending *time.Time `json:"oldest_pending,omitempty"`
}

// CDCStatusOf is where the named checkpoint stands, as st has it.
func CDCStatusOf(name string, st Status) CDCStatus {
	cp := st.Checkpoint
	v := CDCStatus{Checkpoint: name, Found: st.Found, ServerPosition: st.Server.String(), LagSeconds: st.Lag().Seconds(),
		Anomalies: st.Anomalies, Webhooks: WebhooksJSON{Pending: st.Webhooks["pending"], Delivered: st.Webhooks["delivered"], Dropped: st.Webhooks["dropped"], Failing: st.Webhooks["failing"]}}
	if st.Webhooks["pending"] > 0 {
		v.Webhooks.OldestPending = &st.OldestPending
	}
	if st.Found {
		v.Position, v.Leader, v.Epoch, v.EventsApplied, v.Batches = cp.Pos.String(), cp.Leader, cp.Epoch, cp.EventsApplied, cp.Batches
		v.SavedAt = &cp.UpdatedAt
		if cp.EventTime.Valid {
			v.EventTime = &cp.EventTime.Time
		}
		if cp.BootstrappedAt.Valid {
			v.BootstrappedAt = &cp.BootstrappedAt.Time
		}
	}
	for _, rt := range st.Shards {
		v.Shards = append(v.Shards, ShardsJSON{Role: rt.Role, Set: rt.Written, Tables: rt.Tables})
	}
	v.ShardsError = st.ShardsError
	for _, a := range st.Recent {
		v.Recent = append(v.Recent, AnomalyJSON{ID: a.ID, Kind: a.Kind, Coupon: a.Coupon, Template: a.Template, Channel: a.Channel,
			FromState: a.FromState, ToState: a.ToState, FromCode: codePtr(a.FromCode), ToCode: codePtr(a.ToCode), Change: a.Change(),
			Order: a.Order, Detail: a.Detail, At: a.At.UTC()})
	}
	return v
}

func codePtr(c sql.NullInt64) *int64 {
	if !c.Valid {
		return nil
	}
	return &c.Int64
}
