package canal

import (
	"fmt"
	"strings"
)

// CheckState is one of couponlink's checks and whether a mapping lets it
// run: the data it needs is mapped (On, Detail says against what) or the
// shop lacks it (off, Detail says why).
type CheckState struct {
	Name       string // the anomaly kind, or the reconciler's difference
	On         bool
	Reconciler bool // the reconciler checks it, each pass; else the cdc, each batch
	Detail     string
}

// State is "on", "off", or "on (reconciler)".
func (c CheckState) State() string {
	switch {
	case !c.On:
		return "off"
	case c.Reconciler:
		return "on (reconciler)"
	}
	return "on"
}

func (c CheckState) String() string {
	state := c.State()
	if c.Detail == "" {
		return c.Name + ": " + state
	}
	return fmt.Sprintf("%s: %s — %s", c.Name, state, c.Detail)
}

// Checks lists the cdc's anomaly checks and the reconciler's checks of a
// legacy table, each on or off by what the mapping names. It needs no
// server.
func (m *Mapping) Checks() []CheckState {
	on := func(name, format string, args ...any) CheckState {
		return CheckState{Name: name, On: true, Detail: fmt.Sprintf(format, args...)}
	}
	off := func(name, format string, args ...any) CheckState {
		return CheckState{Name: name, Detail: fmt.Sprintf(format, args...)}
	}
	uc := m.UserCoupon
	cs := []CheckState{
		on("illegal_transition", "any status change not among the six legal ones, or a coupon moved to another template or channel"),
		on("deleted_coupon", "a %s row deleted%s", m.qualified(uc.Table), m.softDeleted(uc.Table, uc.Deleted)),
		on("undecodable_row", "a NULL or unmapped %s, a NULL %s: recorded, counted nowhere (-strict stops instead)", uc.Status, uc.Template),
	}
	cs = append(cs, m.evidenceChecks()...)
	if m.ChannelQuota != nil {
		cs = append(cs, on("over_issue", "against channel quotas (%s.%s)", m.qualified(m.ChannelQuota.Table), m.ChannelQuota.Quota))
	} else {
		cs = append(cs, on("over_issue", "against template budget (%s), followed from the binlog%s", m.col(m.Template.Table, m.Template.TotalQuota), m.unlimitedText()))
	}
	t := m.Template
	switch {
	case t.PerUserLimit == "":
		cs = append(cs, off("per_user_limit_exceeded", "no template.per_user_limit"))
	case uc.User == "":
		cs = append(cs, off("per_user_limit_exceeded", "no user_coupon.user"))
	default:
		cs = append(cs, on("per_user_limit_exceeded", "%s per %s", m.col(t.Table, t.PerUserLimit), m.col(uc.Table, uc.User)))
	}
	var ends []string
	integer := t.EndTime.Integer() || uc.ExpiresAt.Integer()
	// end names a time column; with an integer one among them, each says what it holds
	end := func(table string, c TimeColumn) string {
		switch {
		case !integer:
			return m.col(table, c.Column)
		case c.Integer():
			return fmt.Sprintf("%s (%s)", m.col(table, c.Column), c.Unit)
		}
		return fmt.Sprintf("%s (a DATETIME read in %s)", m.col(table, c.Column), m.ZoneText())
	}
	if t.EndTime.Column != "" {
		ends = append(ends, end(t.Table, t.EndTime))
	}
	if uc.ExpiresAt.Column != "" {
		own := end(uc.Table, uc.ExpiresAt)
		if len(t.FixedWindow) > 0 {
			own += fmt.Sprintf(" (not for a fixed-window campaign: %s)", t.FixedWindow.Text(func(c string) string { return m.col(t.Table, c) }))
		}
		ends = append(ends, own)
	}
	switch {
	case len(ends) == 0:
		cs = append(cs, off("used_after_expiry", "no template.end_time, no user_coupon.expires_at"))
	case integer:
		cs = append(cs, on("used_after_expiry", "a coupon used or restored after %s", strings.Join(ends, " or ")))
	default:
		cs = append(cs, on("used_after_expiry", "a coupon used or restored after %s (a DATETIME read in %s)", strings.Join(ends, " or "), m.ZoneText()))
	}
	cs = append(cs, m.shelfCheck())
	return m.sourceChecks(append(cs, m.reconcilerChecks()...)) // with sources: what the judge decides (onesource.go)
}

// reconcilerChecks are what the reconciler compares besides the counters.
func (m *Mapping) reconcilerChecks() []CheckState {
	t := m.Template
	var cs []CheckState
	add := func(name string, on bool, detail string) {
		cs = append(cs, CheckState{Name: name, On: on, Reconciler: on, Detail: detail})
	}
	if m.reference {
		add("stock_column_drift", false, "the reference schema has no remaining-stock column")
		add("template_cache", true, "coupon_template's cached counts against the coupons")
		add("redis_stock_keys", true, "couponlink's own stock keys (owner mode)")
		return cs
	}
	if t.Remaining == "" {
		add("stock_column_drift", false, "no template.remaining")
	} else {
		add("stock_column_drift", true, m.col(t.Table, t.Remaining)+" against budget − taken")
	}
	if t.Issued == "" && t.Used == "" {
		add("legacy_template_counts", false, "no template.issued or template.used")
	} else {
		add("legacy_template_counts", true, "the template's own issued/used counts against its coupons")
	}
	if m.Redis == nil || (m.Redis.TemplateStock == "" && m.Redis.ChannelStock == "") {
		add("redis_stock_keys", false, "no redis stock keys in the mapping")
	} else {
		add("redis_stock_keys", true, "the front end's stock keys, corrected when quiet (corrector mode)")
	}
	if m.Redis == nil || m.Redis.ClaimedUsers == "" {
		add("redis_claimed_users", false, "no redis.claimed_users in the mapping")
	} else {
		add("redis_claimed_users", true, "the front end's per-user claimed sets: missing users at the limit added, "+
			"members without the limit removed when quiet (corrector mode)")
	}
	return cs
}

// evidenceChecks are the checks of a coupon's use, by the mapping's
// redemption evidence.
func (m *Mapping) evidenceChecks() []CheckState {
	ev := m.RedemptionEvidence()
	uc := m.UserCoupon
	var missing, dup, double CheckState
	missing.Name, dup.Name, double.Name = "used_without_redemption", "duplicate_redemption", "double_spend"
	switch ev {
	case EvidenceTable:
		missing.On, missing.Detail = true, fmt.Sprintf("no write-off row of the coupon's order in %s within -redemption-grace",
			m.qualified(m.RedemptionLog.Table))
		dup.On, dup.Detail = true, fmt.Sprintf("two rows of one (coupon, order) in %s", m.qualified(m.RedemptionLog.Table))
		double.Detail = "redemption_evidence is table: duplicate_redemption instead"
		if live := m.liveEvidence(); live != "" {
			missing.Detail += live
			dup.Detail += live
			double.On, double.Detail = true, fmt.Sprintf("live rows of two orders in %s on one coupon%s", m.qualified(m.RedemptionLog.Table), live)
		}
	case EvidenceCouponOrder:
		missing.On, missing.Detail = true, fmt.Sprintf("a coupon becoming USED with a NULL %s, or with the order it kept when given back%s",
			m.col(uc.Table, uc.Order), m.openOrders())
		dup.Detail = "redemption_evidence is coupon_order: no write-off table"
		double.On, double.Detail = true, fmt.Sprintf("a USED coupon whose %s changes", m.col(uc.Table, uc.Order))
	case EvidenceOrderTable:
		orders := ""
		if m.Orders != nil {
			orders = m.qualified(m.Orders.Table)
		}
		orders += m.openOrders()
		missing.On, missing.Detail = true, fmt.Sprintf("fewer orders in %s than USED coupons per (template, user)", orders)
		dup.Detail = "redemption_evidence is order_table: no write-off table"
		double.On, double.Detail = true, fmt.Sprintf("more orders in %s than USED coupons per (template, user)", orders)
	default:
		reason := fmt.Sprintf("redemption_evidence is %s", ev)
		missing.Detail = reason + ": the USED transition itself is the evidence"
		dup.Detail, double.Detail = reason, reason
	}
	return []CheckState{missing, dup, double}
}

// softDeleted says which rows of a table are soft-deleted ("": none).
func (m *Mapping) softDeleted(table string, d AnyOf) string {
	if len(d) == 0 {
		return ""
	}
	return fmt.Sprintf(" or soft-deleted (%s)", d.Text(func(c string) string { return m.col(table, c) }))
}

// openOrders says which orders count (closed and soft-deleted ones do
// not); "" when the mapping names no order states.
func (m *Mapping) openOrders() string {
	o := m.Orders
	if o == nil || (len(o.ClosedWhen()) == 0 && len(o.Deleted) == 0) {
		return ""
	}
	col := func(c string) string { return m.col(o.Table, c) }
	var not []string
	if closed := o.ClosedWhen(); len(closed) > 0 {
		not = append(not, "closed: "+closed.Text(col))
	}
	if len(o.Deleted) > 0 {
		not = append(not, "soft-deleted: "+o.Deleted.Text(col))
	}
	if m.RedemptionEvidence() == EvidenceCouponOrder {
		return fmt.Sprintf(", unless that order is open in %s (not %s)", m.qualified(o.Table), strings.Join(not, ", "))
	}
	return fmt.Sprintf(" (open orders only; not %s)", strings.Join(not, ", "))
}

// liveEvidence says which write-off rows count (evidence states: closed
// and soft-deleted ones do not); "" when the table has no states.
func (m *Mapping) liveEvidence() string {
	ended := m.EvidenceEnded()
	if len(ended) == 0 {
		return ""
	}
	return fmt.Sprintf(" (live rows only; not %s)", ended.Text(func(c string) string { return m.col(m.RedemptionLog.Table, c) }))
}

// col is schema.table.column of a mapped column.
func (m *Mapping) col(table, column string) string { return m.qualified(table) + "." + column }
