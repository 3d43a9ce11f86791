package main

import (
	"context"
	"database/sql"
	"io"
	"time"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/inventory"
	"github.com/couponlink/couponlink/inventory/view"
)

// statusJSON is where the cdc stands, as `couponlink status -json` prints
// it and GET /status of the cdc's ops server answers: what the table of
// `couponlink status` shows.
type statusJSON struct {
	cdcJSON
	Pairs []pairJSON `json:"pairs"`
	// Templates are a legacy mapping's templates (see view.Template).
	Templates []view.Template `json:"templates,omitempty"`
}

// cdcJSON is where one cdc stands: its checkpoint, lag, anomalies,
// webhooks and shards (statusJSON without the inventory; with sources,
// each source's).
type cdcJSON struct {
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
	Recent         []anomalyJSON    `json:"recent_anomalies,omitempty"` // newest first
	Webhooks       webhooksJSON     `json:"webhooks"`
	// Shards are a legacy mapping's sharded roles and their tables now.
	Shards      []shardsJSON `json:"shards,omitempty"`
	ShardsError string       `json:"shards_error,omitempty"`
}

// shardsJSON is a sharded role: its set as the mapping writes it, and the
// tables it stands for on the server.
type shardsJSON struct {
	Role   string   `json:"role"`
	Set    string   `json:"set"`
	Tables []string `json:"tables"`
}

// anomalyJSON is one of the latest anomalies: couponlink's states and the
// codes the source stored, and both together as "change" ("AVAILABLE(0)
// -> USED(1)").
type anomalyJSON struct {
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

type webhooksJSON struct {
	Pending       int64      `json:"pending"`
	Delivered     int64      `json:"delivered"`
	Dropped       int64      `json:"dropped"`
	OldestPending *time.Time `json:"oldest_pending,omitempty"`
}

// pairJSON is one channel bucket: its counters as the API's derived view
// shows them; quota and claimable are absent when the bucket has no
// channel_quota row.
type pairJSON struct {
	Template  int64  `json:"template"`
	Channel   string `json:"channel"`
	Label     string `json:"label,omitempty"` // the mapping's channel_labels
	Quota     *int64 `json:"quota,omitempty"`
	Claimable *int64 `json:"claimable,omitempty"`
	view.States
	// PastEnd: AVAILABLE coupons of an ended legacy campaign, counted in
	// expired, not held (the shop never writes EXPIRED).
	PastEnd int64 `json:"expired_by_end_time,omitempty"`
}

// writeStatusJSON writes the named checkpoint's status as indented JSON;
// m is the legacy mapping (nil: the reference schema).
func writeStatusJSON(ctx context.Context, w io.Writer, db *sql.DB, name string, m *canal.Mapping) error {
	v, err := readStatusJSON(ctx, db, name, m)
	if err != nil {
		return err
	}
	return printJSON(w, v)
}

// readStatusJSON reads the named checkpoint's status (inventory.ReadStatus) as JSON.
func readStatusJSON(ctx context.Context, db *sql.DB, name string, m *canal.Mapping) (statusJSON, error) {
	st, err := inventory.ReadMappedStatus(ctx, db, name, m)
	if err != nil {
		return statusJSON{}, err
	}
	v := statusJSON{cdcJSON: cdcJSONOf(name, st), Pairs: []pairJSON{}, Templates: st.Templates}
	for _, p := range st.Pairs {
		v.Pairs = append(v.Pairs, pairJSONOf(p))
	}
	return v, nil
}

// cdcJSONOf is where the named checkpoint stands, as st has it.
func cdcJSONOf(name string, st inventory.Status) cdcJSON {
	cp := st.Checkpoint
	v := cdcJSON{Checkpoint: name, Found: st.Found, ServerPosition: st.Server.String(), LagSeconds: st.Lag().Seconds(),
		Anomalies: st.Anomalies, Webhooks: webhooksJSON{Pending: st.Webhooks["pending"], Delivered: st.Webhooks["delivered"], Dropped: st.Webhooks["dropped"]}}
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
		v.Shards = append(v.Shards, shardsJSON{Role: rt.Role, Set: rt.Written, Tables: rt.Tables})
	}
	v.ShardsError = st.ShardsError
	for _, a := range st.Recent {
		v.Recent = append(v.Recent, anomalyJSON{ID: a.ID, Kind: a.Kind, Coupon: a.Coupon, Template: a.Template, Channel: a.Channel,
			FromState: a.FromState, ToState: a.ToState, FromCode: codePtr(a.FromCode), ToCode: codePtr(a.ToCode), Change: a.Change(),
			Order: a.Order, Detail: a.Detail, At: a.At.UTC()})
	}
	return v
}

// pairJSONOf is a channel bucket as JSON.
func pairJSONOf(p inventory.PairStatus) pairJSON {
	pj := pairJSON{Template: p.Template, Channel: p.Channel, Label: p.Label, States: view.StatesOf(p.Counts), PastEnd: p.PastEnd}
	if p.HasQuota {
		q, c := p.Quota, p.Claimable()
		pj.Quota, pj.Claimable = &q, &c
	}
	return pj
}

func codePtr(c sql.NullInt64) *int64 {
	if !c.Valid {
		return nil
	}
	return &c.Int64
}
