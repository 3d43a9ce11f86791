package api

import "time"

// Findings: the lifecycle of what the cdc (anomalies) and the reconciler
// (differences left for a person) find. A finding is open, then
// acknowledged by a person (who, why, when), then closed; found again as
// it was, an acknowledged one stays acknowledged, and found changed (or
// again once closed) it is open again.

// The states of a finding.
const (
	FindingOpen         = "open"
	FindingAcknowledged = "acknowledged"
	FindingClosed       = "closed"
)

// The sources of findings.
const (
	FindingFromCDC       = "cdc"
	FindingFromReconcile = "reconcile"
)

// Finding is one finding and where it stands.
type Finding struct {
	Fingerprint string    `json:"fingerprint"` // its kind and the rows it names, hashed: stable across passes
	Source      string    `json:"source"`      // cdc or reconcile
	Kind        string    `json:"kind"`        // an anomaly's kind; a reconcile difference's store/field
	Subject     string    `json:"subject"`     // the rows it names
	Summary     string    `json:"summary"`     // the latest occurrence's detail
	State       string    `json:"state"`       // open, acknowledged, closed
	FirstSeen   time.Time `json:"first_seen"`
	LastSeen    time.Time `json:"last_seen"`
	TimesSeen   int64     `json:"times_seen"`
	// the latest acknowledgement, kept when the finding opens again
	// (each *OnBehalfOf: who the *By, a token's name, acted for, as the
	// request named them; "" when the same or without a token)
	AcknowledgedBy         string     `json:"acknowledged_by,omitempty"`
	AcknowledgedOnBehalfOf string     `json:"acknowledged_on_behalf_of,omitempty"`
	AcknowledgedAt         *time.Time `json:"acknowledged_at,omitempty"`
	AcknowledgedReason     string     `json:"acknowledged_reason,omitempty"`
	ClosedBy               string     `json:"closed_by,omitempty"`
	ClosedOnBehalfOf       string     `json:"closed_on_behalf_of,omitempty"`
	ClosedAt               *time.Time `json:"closed_at,omitempty"`
	ClosedReason           string     `json:"closed_reason,omitempty"`
	// the latest reopening by a person (acknowledged or closed -> open)
	ReopenedBy         string     `json:"reopened_by,omitempty"`
	ReopenedOnBehalfOf string     `json:"reopened_on_behalf_of,omitempty"`
	ReopenedAt         *time.Time `json:"reopened_at,omitempty"`
	ReopenedReason     string     `json:"reopened_reason,omitempty"`
	// Where is what the finding names and where it was last seen, read
	// beside it (GET /v1/findings); nil where nothing is known.
	Where *FindingWhere `json:"where,omitempty"`
}

// FindingWhere is the rows a finding names and where it was seen: the
// template and coupon (links to its history), and for the cdc's the
// latest occurrence's binlog position and event time on its source.
type FindingWhere struct {
	Template  int64      `json:"template,omitempty"`
	Channel   string     `json:"channel,omitempty"`
	Coupon    int64      `json:"coupon,omitempty"`
	Order     string     `json:"order,omitempty"`
	Source    string     `json:"source,omitempty"`   // the cdc's checkpoint (a source's name with several), or the reconcile pass's source
	Position  string     `json:"position,omitempty"` // binlog file:pos (gtid) of the latest occurrence
	EventTime *time.Time `json:"event_time,omitempty"`
	Anomaly   int64      `json:"anomaly,omitempty"` // the latest cdc_anomaly row's id
}

// Findings is the answer of GET /v1/findings.
type Findings struct {
	Findings []Finding `json:"findings"`
}

// FindingRequest is the body of POST /v1/findings/{fingerprint}/ack and
// /close: who acts, and why.
type FindingRequest struct {
	Operator string `json:"operator"`
	Reason   string `json:"reason"`
}
