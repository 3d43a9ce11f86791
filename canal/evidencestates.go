package canal

import "fmt"

// The states of an evidence table (redemption_evidence: table) that end
// its evidence: a shop whose write-off record is its orders table keeps
// the row of a cancelled, timed-out or refunded order and gives the
// coupon back to unused, so the row no longer proves a use. They are
// redemption_log.closed and redemption_log.deleted (AnyOf each), and,
// when the orders role names the evidence table itself, the orders'
// status/closed and deleted. A row in one of them is ended: the decode
// treats an UPDATE into it as the row deleted and out of it as the row
// inserted, the truth queries leave it out, and a coupon with live rows
// of two different orders was spent twice (double_spend).

// EvidenceEnded is the state of an evidence row that proves nothing any
// more (none: the evidence table has no states, or the evidence is no
// table).
func (m *Mapping) EvidenceEnded() AnyOf {
	a, _ := m.evidenceStates()
	return a
}

// EvidenceStates says whether the evidence is a table with states.
func (m *Mapping) EvidenceStates() bool { return len(m.EvidenceEnded()) > 0 }

// ordersAreEvidence says whether the orders role names the evidence
// table itself (redemption_evidence: table).
func (m *Mapping) ordersAreEvidence() bool {
	return m.RedemptionEvidence() == EvidenceTable && m.Orders != nil &&
		m.qualified(m.Orders.Table) == m.qualified(m.RedemptionLog.Table)
}

// evidenceStates is EvidenceEnded and, condition by condition, the
// mapping's key that names its column (for mapping check and the decode).
func (m *Mapping) evidenceStates() (AnyOf, []colRef) {
	if m.RedemptionEvidence() != EvidenceTable {
		return nil, nil
	}
	r := m.RedemptionLog
	a := append(append(AnyOf{}, r.Closed...), r.Deleted...)
	refs := append(r.Closed.colRefs("closed"), r.Deleted.colRefs("deleted")...)
	if m.ordersAreEvidence() {
		o := m.Orders
		if o.Status != "" && len(o.Closed.Codes) > 0 {
			a = append(a, Condition{Column: o.Status, Values: o.Closed.Codes})
			refs = append(refs, colRef{"orders.status", o.Status, false})
		}
		a = append(append(a, o.Closed.When...), o.Deleted...)
		for _, c := range o.closedRefs() {
			refs = append(refs, colRef{"orders." + c.key, c.column, false})
		}
		for _, c := range o.Deleted.colRefs("deleted") {
			refs = append(refs, colRef{"orders." + c.key, c.column, false})
		}
	}
	return a, refs
}

// validateEvidenceStates checks redemption_log's states, and an orders
// role beside a table evidence: only the evidence table itself.
func (m *Mapping) validateEvidenceStates() []error {
	r := m.RedemptionLog
	const example = "{column: is_del, values: [1]}"
	errs := append(r.Closed.validate("redemption_log", "closed", "value", example), r.Deleted.validate("redemption_log", "deleted", "value", example)...)
	if m.RedemptionEvidence() != EvidenceTable {
		if len(r.Closed) > 0 || len(r.Deleted) > 0 {
			errs = append(errs, fmt.Errorf("mapping: redemption_log.closed and redemption_log.deleted are states of the evidence table; redemption_evidence is %s", m.RedemptionEvidence()))
		}
		return errs
	}
	if m.EvidenceStates() && r.Order == "" {
		errs = append(errs, fmt.Errorf("mapping: evidence states need redemption_log.order: a use is judged by the live rows of its coupon per order, and two live orders on one coupon are a double_spend"))
	}
	if m.Orders != nil && !m.ordersAreEvidence() {
		errs = append(errs, fmt.Errorf("mapping: orders is mapped but redemption_evidence is table; with table evidence orders may only name the evidence table itself (orders.table %q, redemption_log.table %q), to give its closed and deleted states; else set redemption_evidence: order_table",
			m.Orders.Table, m.RedemptionLog.Table))
	}
	return errs
}
