package reconcile

import (
	"context"
	"fmt"

	"github.com/couponlink/couponlink/api"
	"github.com/couponlink/couponlink/inventory"
)

// resultAcknowledged is the status of a pass whose differences left for a
// person are all findings a person acknowledged as they are: nothing new
// needs one (-once exits 0, the needs_review gauge does not count it).
const resultAcknowledged = "acknowledged"

// forPerson says whether a difference is left for a person: a finding.
func forPerson(d Difference) bool {
	return d.Action == ActionNeedsReview || d.Action == ActionReported || d.Action == ActionAcknowledged
}

// findingOf is the finding a difference left for a person is: its kind
// is the store and field, the rows it names its target on the pass's
// source; what it found is the values, the sources and the reason.
func findingOf(passSource string, d Difference) inventory.Seen {
	kind := d.Store
	if d.Field != "" {
		kind += "/" + d.Field
	}
	subject := d.Target
	if passSource != "" {
		subject = passSource + ": " + subject
	}
	return inventory.Seen{Source: api.FindingFromReconcile, Kind: kind, Subject: subject,
		Content: fmt.Sprintf("%d %s %s %s %s %s", d.Expected, str(d.Found), d.FoundRaw, d.Source, d.Action, d.Reason),
		Summary: d.Target + ": " + d.Reason}
}

// recordFindings records the differences left for a person, and the
// corrections (corrected.go), as findings and marks each with its
// fingerprint and its state after the pass.
func (r *Reconciler) recordFindings(ctx context.Context, rep *Report) error {
	var seen []inventory.Seen
	var idx []int
	for i, d := range rep.Differences {
		switch {
		case forPerson(d):
			seen = append(seen, findingOf(rep.Source, d))
		case d.Action == ActionFixed:
			seen = append(seen, correctionOf(rep.Source, d))
		default:
			continue
		}
		idx = append(idx, i)
	}
	if len(seen) == 0 {
		return nil
	}
	if err := inventory.RecordFindings(ctx, r.db, r.cfg.Now(), seen); err != nil {
		return err
	}
	fps := make([]string, len(seen))
	for i, s := range seen {
		fps[i] = s.Fingerprint()
	}
	states, err := inventory.FindingStates(ctx, r.db, fps)
	if err != nil {
		return err
	}
	for i, at := range idx {
		d := &rep.Differences[at]
		d.Fingerprint, d.Finding = fps[i], states[fps[i]]
		if forPerson(*d) && d.Finding == api.FindingAcknowledged {
			d.Action = ActionAcknowledged
		}
	}
	return nil
}

// allAcknowledged says whether every difference left for a person is a
// finding a person acknowledged.
func allAcknowledged(rep *Report) bool {
	for _, d := range rep.Differences {
		if forPerson(d) && d.Action != ActionAcknowledged {
			return false
		}
	}
	return true
}

// FoundAtAttachKind starts the kind of a finding couponlink audit -record
// wrote: found_at_attach/<kind>, what was already wrong in the shop's
// tables when couponlink came (package audit). A person acknowledges or
// closes it as any finding; it never pages: the reconciler's metric counts
// it (couponlink_findings{kind=~"found_at_attach/.*"}) and
// CouponlinkReconcileNeedsReview leaves it out, as it does corrections.
const FoundAtAttachKind = "found_at_attach/"

// FoundAtAttach is the finding an audit's finding of kind is: subject
// names its rows (with kind, its fingerprint), content what was found of
// them (another content opens it again).
func FoundAtAttach(kind, subject, content string) inventory.Seen {
	return inventory.Seen{Source: api.FindingFromReconcile, Kind: FoundAtAttachKind + kind, Subject: subject,
		Content: content, Summary: subject + ": " + content}
}
