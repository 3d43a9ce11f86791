package main

import (
	"context"
	"database/sql"
	"io"
	"time"

	"github.com/couponlink/couponlink/inventory"
	"github.com/couponlink/couponlink/inventory/view"
)

// statusJSON is where the cdc stands, as `couponlink status -json` prints
// it and GET /status of the cdc's ops server answers: what the table of
// `couponlink status` shows.
type statusJSON struct {
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
	Webhooks       webhooksJSON     `json:"webhooks"`
	Pairs          []pairJSON       `json:"pairs"`
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
	Quota     *int64 `json:"quota,omitempty"`
	Claimable *int64 `json:"claimable,omitempty"`
	view.States
}

// writeStatusJSON writes the named checkpoint's status as indented JSON.
func writeStatusJSON(ctx context.Context, w io.Writer, db *sql.DB, name string) error {
	v, err := readStatusJSON(ctx, db, name)
	if err != nil {
		return err
	}
	return printJSON(w, v)
}

// readStatusJSON reads the named checkpoint's status (inventory.ReadStatus) as JSON.
func readStatusJSON(ctx context.Context, db *sql.DB, name string) (statusJSON, error) {
	st, err := inventory.ReadStatus(ctx, db, name)
	if err != nil {
		return statusJSON{}, err
	}
	cp := st.Checkpoint
	v := statusJSON{Checkpoint: name, Found: st.Found, ServerPosition: st.Server.String(), LagSeconds: st.Lag().Seconds(),
		Anomalies: st.Anomalies, Pairs: []pairJSON{},
		Webhooks: webhooksJSON{Pending: st.Webhooks["pending"], Delivered: st.Webhooks["delivered"], Dropped: st.Webhooks["dropped"]}}
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
	for _, p := range st.Pairs {
		pj := pairJSON{Template: p.Template, Channel: p.Channel, States: view.StatesOf(p.Counts)}
		if p.HasQuota {
			q, c := p.Quota, p.Claimable()
			pj.Quota, pj.Claimable = &q, &c
		}
		v.Pairs = append(v.Pairs, pj)
	}
	return v, nil
}
