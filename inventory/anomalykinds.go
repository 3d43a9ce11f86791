package inventory

// The kinds of anomalies: what a correct coupon system does not do, as
// the cdc records them when it sees them in the binlog (cdc_anomaly.kind)
// and as the audit (package audit) names what a shop's tables already
// hold when couponlink comes.
const (
	AnomalyIllegalTransition     = "illegal_transition"
	AnomalyDeletedCoupon         = "deleted_coupon"
	AnomalyUsedWithoutRedemption = "used_without_redemption"
	AnomalyDuplicateRedemption   = "duplicate_redemption"
	AnomalyOverIssue             = "over_issue"
	// AnomalyUndecodableRow is a source row the mapping cannot decode (a
	// NULL or unmapped status code, a NULL id a record needs): counted
	// nowhere, like the snapshot that skips it (see canal.Undecodable).
	AnomalyUndecodableRow = "undecodable_row"
	// AnomalyDoubleSpend is one coupon spent on two orders: a USED coupon's
	// order changed while it stayed USED (evidence coupon_order), or more
	// orders of a (template, user) than USED coupons (order_table).
	AnomalyDoubleSpend = "double_spend"
	// AnomalyPerUserLimitExceeded is a coupon a user received beyond the
	// template's per-user limit in force at that point of the binlog.
	AnomalyPerUserLimitExceeded = "per_user_limit_exceeded"
	// AnomalyUsedAfterExpiry is a coupon used, or restored to AVAILABLE,
	// after its template's end time (mapping template.end_time) or its own
	// expiry (user_coupon.expires_at).
	AnomalyUsedAfterExpiry = "used_after_expiry"
	// AnomalyClaimedOffShelf is a coupon claimed while its campaign was
	// off the shelf (mapping template.status or template.deleted).
	AnomalyClaimedOffShelf = "claimed_off_shelf"
)

// AnomalyKinds lists every kind the cdc records, for metrics and reports.
var AnomalyKinds = []string{AnomalyIllegalTransition, AnomalyDeletedCoupon, AnomalyUsedWithoutRedemption,
	AnomalyDuplicateRedemption, AnomalyOverIssue, AnomalyUndecodableRow, AnomalyDoubleSpend,
	AnomalyPerUserLimitExceeded, AnomalyUsedAfterExpiry, AnomalyClaimedOffShelf}
