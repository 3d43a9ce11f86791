package inventory

import (
	"database/sql"

	"github.com/couponlink/couponlink/api"
)

// CDCStatus is where one cdc stands: its checkpoint, lag, anomalies,
// webhooks and shards, as `couponlink status -json` prints it (without
// the inventory; with sources, each source's) and GET /v1/cdc/status
// of the API answers it.
type CDCStatus = api.CDCState

// ShardsJSON is a sharded role and its tables.
type ShardsJSON = api.Shards

// AnomalyJSON is one of the latest anomalies.
type AnomalyJSON = api.Anomaly

// WebhooksJSON is the webhook outbox's events by status.
type WebhooksJSON = api.Outbox

// CDCStatusOf is where the named checkpoint stands, as st has it.
func CDCStatusOf(name string, st Status) CDCStatus {
	cp := st.Checkpoint
	v := CDCStatus{Checkpoint: name, Found: st.Found, ServerPosition: st.Server.String(), LagSeconds: st.Lag().Seconds(),
		Anomalies: st.Anomalies, Webhooks: WebhooksJSON{Pending: st.Webhooks["pending"], Delivered: st.Webhooks["delivered"], Dropped: st.Webhooks["dropped"], Failing: st.Webhooks["failing"]}}
	if st.Webhooks["pending"] > 0 {
		v.Webhooks.OldestPending = &st.OldestPending
	}
	v.Webhooks.LastError, v.EventSinks = st.WebhookError, st.EventSinks
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
