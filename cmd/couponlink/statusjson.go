package main

import (
	"context"
	"database/sql"
	"io"

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

// cdcJSON is where one cdc stands (inventory.CDCStatus, which the API's
// GET /v1/cdc/status answers too).
type cdcJSON = inventory.CDCStatus

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
func cdcJSONOf(name string, st inventory.Status) cdcJSON { return inventory.CDCStatusOf(name, st) }

// pairJSONOf is a channel bucket as JSON.
func pairJSONOf(p inventory.PairStatus) pairJSON {
	pj := pairJSON{Template: p.Template, Channel: p.Channel, Label: p.Label, States: view.StatesOf(p.Counts), PastEnd: p.PastEnd}
	if p.HasQuota {
		q, c := p.Quota, p.Claimable()
		pj.Quota, pj.Claimable = &q, &c
	}
	return pj
}
