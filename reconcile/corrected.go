package reconcile

import (
	"fmt"

	"github.com/couponlink/couponlink/api"
	"github.com/couponlink/couponlink/inventory"
	"github.com/couponlink/couponlink/webhook"
)

// Every correction is seen: a value the reconciler corrected is a wrong
// value something wrote (a legacy front end, a manual UPDATE). Besides its
// correction_log row, each is counted (couponlink_reconcile_corrected_total,
// which CouponlinkReconcileCorrected fires on), recorded as a finding of
// kind "corrected/<store>/<field>" with the value found and the value set,
// and written to the outbox as a reconcile.corrected event (Events on).

// correctionKind starts the kind of the finding a correction is.
const correctionKind = "corrected/"

// correctionOf is the finding a correction is: the target it corrected,
// what it held before and the value set. The same correction (the same
// values) again is the same finding seen once more; other values open it
// again.
func correctionOf(passSource string, d Difference) inventory.Seen {
	kind := correctionKind + d.Store
	if d.Field != "" {
		kind += "/" + d.Field
	}
	subject := d.Target
	if passSource != "" {
		subject = passSource + ": " + subject
	}
	before := beforeOf(d)
	return inventory.Seen{Source: api.FindingFromReconcile, Kind: kind, Subject: subject,
		Content: fmt.Sprintf("%s %d", before, d.Expected),
		Summary: fmt.Sprintf("%s: was %s, corrected to %d (%s)", d.Target, before, d.Expected, d.Reason)}
}

// beforeOf is what a corrected target held before, as people read it.
func beforeOf(d Difference) string {
	switch {
	case d.FoundRaw != "":
		return d.FoundRaw
	case d.Found == nil:
		return "missing"
	}
	return fmt.Sprint(*d.Found)
}

// correctedSample is how many corrections a reconcile.corrected event
// lists (the task row and correction_log have them all).
const correctedSample = 100

// Correction is one value a pass corrected, as its reconcile.corrected
// event lists it.
type Correction struct {
	Store     string `json:"store"`
	Target    string `json:"target"`
	Template  int64  `json:"template"`
	Channel   string `json:"channel,omitempty"`
	Field     string `json:"field,omitempty"`
	Before    *int64 `json:"before"` // nil: missing, or not an integer (BeforeRaw)
	BeforeRaw string `json:"before_raw,omitempty"`
	After     int64  `json:"after"`
	// Fingerprint is the finding the correction is (GET /v1/findings).
	Fingerprint string `json:"fingerprint,omitempty"`
}

// correctedEvents is the reconcile.corrected event of a pass that
// corrected something, when Events is on; none otherwise.
func (r *Reconciler) correctedEvents(rep *Report) []webhook.Event {
	if !r.cfg.Events {
		return nil
	}
	var sample []Correction
	n := 0
	for _, d := range rep.Differences {
		if d.Action != ActionFixed {
			continue
		}
		n++
		if len(sample) < correctedSample {
			sample = append(sample, Correction{Store: d.Store, Target: d.Target, Template: d.Template, Channel: d.Channel, Field: d.Field,
				Before: d.Found, BeforeRaw: d.FoundRaw, After: d.Expected, Fingerprint: d.Fingerprint})
		}
	}
	if n == 0 {
		return nil
	}
	return []webhook.Event{{Type: webhook.ReconcileCorrected, Time: rep.Finished, Data: map[string]any{
		"task": rep.TaskID, "source": rep.Source, "corrections": n, "sample": sample,
		"binlog": rep.Position.String(), "checkpoint": rep.Checkpoint.String()}}}
}
