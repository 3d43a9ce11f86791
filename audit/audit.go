// Package audit finds what was already wrong in a shop's coupon tables
// when couponlink comes: a bootstrap counts from a snapshot and cannot see
// a transition made before it, so the cdc never reports the inconsistencies
// a shop attaches with. The audit reads the tables through the mapping at
// one consistent snapshot and reports them by kind, naming the coupons,
// orders and members, with the totals finance reconciles (coupons issued,
// used, with and without evidence). Every check streams its rows in order
// and keeps at most Config.Examples of each kind, so that memory stays
// bounded on any number of coupons while the counts are exact.
package audit

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/inventory"
)

// Kind is a kind of inconsistency the audit looks for: the cdc's anomaly
// kind of the same name (inventory.Anomaly*) is the same thing seen when
// it happens; RedemptionOnUnused is the audit's own.
type Kind string

// The kinds, in the order the report lists them.
const (
	// UsedWithoutRedemption: a USED coupon nothing proves used (no
	// write-off row; an empty or closed order; fewer open orders than
	// used coupons of a template and member).
	UsedWithoutRedemption Kind = inventory.AnomalyUsedWithoutRedemption
	// RedemptionOnUnused: evidence of a use on a coupon never used (a
	// write-off row of an AVAILABLE or EXPIRED coupon, or of no live
	// coupon).
	RedemptionOnUnused Kind = "redemption_on_unused"
	// DoubleSpend: one coupon behind two orders (write-off rows of
	// different orders; more open orders than used coupons).
	DoubleSpend Kind = inventory.AnomalyDoubleSpend
	// OverIssue: more coupons taken than the budget or channel quota.
	OverIssue Kind = inventory.AnomalyOverIssue
	// PerUserLimitExceeded: a member holding more coupons of a template
	// than its per-user limit.
	PerUserLimitExceeded Kind = inventory.AnomalyPerUserLimitExceeded
	// UsedAfterExpiry: a coupon redeemed after its own expiry.
	UsedAfterExpiry Kind = inventory.AnomalyUsedAfterExpiry
	// ClaimedOffShelf: a coupon claimed while its campaign was off the
	// shelf. A snapshot cannot tell when a coupon was claimed: never
	// checked, listed so that the report says so.
	ClaimedOffShelf Kind = inventory.AnomalyClaimedOffShelf
)

// Kinds lists every kind, in report order.
var Kinds = []Kind{UsedWithoutRedemption, RedemptionOnUnused, DoubleSpend, OverIssue, PerUserLimitExceeded, UsedAfterExpiry, ClaimedOffShelf}

// DefaultExamples is how many findings of each kind a report names when
// Config.Examples is 0.
const DefaultExamples = 20

// Config says how an audit runs.
type Config struct {
	// Examples is how many findings of each kind the report names (and
	// -record records); the counts are exact all the same. 0:
	// DefaultExamples.
	Examples int
	// Logger takes the progress lines (nil: none).
	Logger *slog.Logger
	// ProgressEvery is how many rows of one check pass between two
	// progress lines (0: a million).
	ProgressEvery int64
}

// Finding is one inconsistency: the rows it names and what is wrong.
type Finding struct {
	Coupon   string `json:"coupon,omitempty"`
	Template int64  `json:"template,omitempty"`
	Channel  string `json:"channel,omitempty"`
	User     string `json:"user,omitempty"`
	Orders   string `json:"orders,omitempty"`
	Detail   string `json:"detail"`
}

// Subject names the rows of the finding, as people read them and as its
// fingerprint is made of: "coupon 17", "template 3 user \"m9\"",
// "template 3 channel \"app\"", "template 3".
func (f Finding) Subject() string {
	switch {
	case f.Coupon != "":
		return "coupon " + f.Coupon
	case f.User != "":
		return fmt.Sprintf("template %d user %q", f.Template, f.User)
	case f.Channel != "":
		return fmt.Sprintf("template %d channel %q", f.Template, f.Channel)
	}
	return fmt.Sprintf("template %d", f.Template)
}

// KindReport is what the audit found of one kind.
type KindReport struct {
	Kind    Kind   `json:"kind"`
	Checked bool   `json:"checked"`
	Off     string `json:"off,omitempty"` // why it was not checked: the shop lacks the data
	Count   int64  `json:"count"`         // every finding of the kind, exact
	// Examples are the first findings, in the order of the check's query
	// (by coupon, or by template and member), at most Config.Examples.
	Examples []Finding `json:"examples"`
}

// Totals are the shop's own figures at the snapshot: its coupons by state
// (soft-deleted and undecodable rows left out, as the cdc counts) and the
// evidence of their uses. The evidence figures are nil where the mapping
// has no such evidence.
type Totals struct {
	Issued    int64 `json:"issued"`
	Available int64 `json:"available"`
	Used      int64 `json:"used"`
	Expired   int64 `json:"expired"`
	Returned  int64 `json:"returned"`
	Released  int64 `json:"released"`
	// WriteOffs are the write-off rows (evidence table) or the open orders
	// that used a coupon (order_table).
	WriteOffs           *int64 `json:"write_offs,omitempty"`
	UsedWithEvidence    *int64 `json:"used_with_evidence,omitempty"`
	UsedWithoutEvidence *int64 `json:"used_without_evidence,omitempty"`
	// IssuedMinusWriteOffs is the figure finance sees after a campaign:
	// coupons issued that no write-off accounts for.
	IssuedMinusWriteOffs *int64 `json:"issued_minus_write_offs,omitempty"`
}

// Report is an audit's result.
type Report struct {
	Mapping  string         `json:"mapping"` // the mapping file, or "the reference schema"
	Position string         `json:"position"`
	At       time.Time      `json:"at"`
	Evidence canal.Evidence `json:"evidence"`
	Totals   Totals         `json:"totals"`
	Kinds    []KindReport   `json:"kinds"`
	Found    int64          `json:"found"` // the findings of every kind
	Took     string         `json:"took"`
}

// Clean reports whether the audit found nothing.
func (r *Report) Clean() bool { return r.Found == 0 }

// Kind is the report of kind k (nil when the report has none).
func (r *Report) Kind(k Kind) *KindReport {
	for i := range r.Kinds {
		if r.Kinds[i].Kind == k {
			return &r.Kinds[i]
		}
	}
	return nil
}

// Run audits the shop's tables of m on db at one consistent snapshot of
// its own. name is the mapping's name for the report.
func Run(ctx context.Context, db *sql.DB, m *canal.Mapping, name string, cfg Config) (*Report, error) {
	var rep *Report
	_, err := inventory.NewQueries(m).WithSnapshot(ctx, db, func(tx *sql.Tx, pos canal.Position) error {
		var err error
		rep, err = RunIn(ctx, tx, pos, m, name, cfg)
		return err
	})
	return rep, err
}

// RunIn audits the shop's tables of m in tx, a consistent snapshot at
// pos that the caller opened and ends (a bootstrap's, to audit what it
// counts).
func RunIn(ctx context.Context, tx *sql.Tx, pos canal.Position, m *canal.Mapping, name string, cfg Config) (*Report, error) {
	q := inventory.NewQueries(m)
	if why := q.AuditRefusal(); why != "" {
		return nil, errors.New("audit: " + why)
	}
	if cfg.Examples <= 0 {
		cfg.Examples = DefaultExamples
	}
	if cfg.ProgressEvery <= 0 {
		cfg.ProgressEvery = 1_000_000
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	start := time.Now()
	a := &auditor{q: q, m: m, cfg: cfg, rep: &Report{Mapping: name, Position: pos.String(), At: start.UTC(), Evidence: m.RedemptionEvidence()}}
	for _, k := range Kinds {
		a.rep.Kinds = append(a.rep.Kinds, KindReport{Kind: k, Examples: []Finding{}})
	}
	cfg.Logger.Info("audit: reading the snapshot", "position", pos.String())
	if err := a.run(ctx, tx); err != nil {
		return nil, err
	}
	for _, k := range a.rep.Kinds {
		a.rep.Found += k.Count
	}
	a.rep.Took = time.Since(start).Round(time.Millisecond).String()
	return a.rep, nil
}

// auditor runs the checks of one audit in its snapshot.
type auditor struct {
	q   *inventory.Queries
	m   *canal.Mapping
	cfg Config
	rep *Report
	// the counts per pair, read once by totals
	snap inventory.Snapshot
}

// run runs every check, the totals first.
func (a *auditor) run(ctx context.Context, tx *sql.Tx) error {
	steps := []struct {
		name string
		fn   func(context.Context, *sql.Tx) error
	}{
		{"totals", a.totals},
		{string(UsedWithoutRedemption) + ", " + string(RedemptionOnUnused) + ", " + string(DoubleSpend), a.evidence},
		{string(OverIssue), a.overIssue},
		{string(PerUserLimitExceeded), a.perUser},
		{string(UsedAfterExpiry), a.usedAfterExpiry},
	}
	for _, s := range steps {
		start := time.Now()
		if err := s.fn(ctx, tx); err != nil {
			return err
		}
		a.cfg.Logger.Info("audit: checked", "check", s.name, "took", time.Since(start).Round(time.Millisecond).String())
	}
	a.off(ClaimedOffShelf, "a snapshot cannot tell whether a coupon was claimed while its campaign was off the shelf (the cdc judges each claim as it happens)")
	return nil
}

func (a *auditor) kind(k Kind) *KindReport { return a.rep.Kind(k) }

// add counts a finding of kind k and keeps it while there is room.
func (a *auditor) add(k Kind, f Finding) {
	kr := a.kind(k)
	kr.Count++
	if len(kr.Examples) < a.cfg.Examples {
		kr.Examples = append(kr.Examples, f)
	}
}

// checked marks the kinds checked.
func (a *auditor) checked(kinds ...Kind) {
	for _, k := range kinds {
		a.kind(k).Checked = true
	}
}

// off marks a kind not checked, and why.
func (a *auditor) off(k Kind, why string) { a.kind(k).Off = why }

// ticker counts the rows of a check and logs a progress line every
// ProgressEvery rows.
func (a *auditor) ticker(check string) func() {
	var n int64
	start := time.Now()
	return func() {
		if n++; n%a.cfg.ProgressEvery == 0 {
			a.cfg.Logger.Info("audit: progress", "check", check, "rows", n, "elapsed", time.Since(start).Round(time.Second).String())
		}
	}
}

// progress is fn of a check's rows, with its progress lines.
func (a *auditor) progress(check string, fn func(inventory.AuditRow) error) func(inventory.AuditRow) error {
	tick := a.ticker(check)
	return func(r inventory.AuditRow) error {
		tick()
		return fn(r)
	}
}

// totals counts the coupons per state (and reads the budgets and quotas
// for over_issue) and the write-offs.
func (a *auditor) totals(ctx context.Context, tx *sql.Tx) error {
	var err error
	if a.snap, err = a.q.Count(ctx, tx, canal.Position{}); err != nil {
		return err
	}
	t := &a.rep.Totals
	for _, c := range a.snap.Counts {
		t.Issued += c.Issued()
		t.Available += c.Held
		t.Used += c.Used
		t.Expired += c.Expired
		t.Returned += c.Returned
		t.Released += c.Released
	}
	n, ok, err := a.q.EvidenceRows(ctx, tx)
	if err != nil || !ok {
		return err
	}
	t.WriteOffs, t.IssuedMinusWriteOffs = &n, ptr(t.Issued-n)
	return nil
}

func ptr(n int64) *int64 { return &n }

// evidence checks the uses against their evidence: uses with none,
// evidence of no use, a coupon behind two orders.
func (a *auditor) evidence(ctx context.Context, tx *sql.Tx) error {
	ev := a.m.RedemptionEvidence()
	if ev == canal.EvidenceNone {
		for _, k := range []Kind{UsedWithoutRedemption, RedemptionOnUnused, DoubleSpend} {
			a.off(k, "redemption_evidence none: nothing but the USED status proves a use")
		}
		return nil
	}
	var without int64
	switch ev {
	case canal.EvidenceOrderTable:
		a.checked(UsedWithoutRedemption, DoubleSpend)
		a.off(RedemptionOnUnused, "with evidence order_table an order names a template and a member, not a coupon: more orders than uses is double_spend")
		err := a.q.OrderBalance(ctx, tx, a.progress("order balance", func(r inventory.AuditRow) error {
			f := Finding{Template: r.Template, User: r.User, Detail: fmt.Sprintf("%d used coupons, %d open orders", r.N, r.M)}
			if r.N > r.M {
				without += r.N - r.M
				a.add(UsedWithoutRedemption, f)
			} else {
				a.add(DoubleSpend, f)
			}
			return nil
		}))
		if err != nil {
			return err
		}
	default:
		a.checked(UsedWithoutRedemption, RedemptionOnUnused)
		err := a.q.UsedWithoutEvidence(ctx, tx, a.progress(string(UsedWithoutRedemption), func(r inventory.AuditRow) error {
			without++
			a.add(UsedWithoutRedemption, couponFinding(r, a.usedWithoutDetail(r)))
			return nil
		}))
		if err != nil {
			return err
		}
		err = a.q.EvidenceOnUnused(ctx, tx, a.progress(string(RedemptionOnUnused), func(r inventory.AuditRow) error {
			detail := "a write-off of a coupon that is not used"
			switch {
			case ev == canal.EvidenceCouponOrder:
				detail = "an unused coupon names order " + r.Orders
			case r.Template == 0:
				detail = "a write-off of no live coupon"
			}
			a.add(RedemptionOnUnused, couponFinding(r, detail))
			return nil
		}))
		if err != nil {
			return err
		}
		if err := a.doubleSpends(ctx, tx); err != nil {
			return err
		}
	}
	t := &a.rep.Totals
	t.UsedWithoutEvidence, t.UsedWithEvidence = ptr(without), ptr(t.Used-without)
	return nil
}

// usedWithoutDetail says why a used coupon has no evidence.
func (a *auditor) usedWithoutDetail(r inventory.AuditRow) string {
	switch {
	case a.m.RedemptionEvidence() == canal.EvidenceTable:
		return "used, and no write-off names it"
	case r.Orders == "":
		return "used, with no order"
	}
	return "used, and its order " + r.Orders + " is not an open order"
}

// doubleSpends checks the coupons behind two orders (evidence table).
func (a *auditor) doubleSpends(ctx context.Context, tx *sql.Tx) error {
	switch {
	case a.m.RedemptionEvidence() == canal.EvidenceCouponOrder:
		a.off(DoubleSpend, "the coupon row keeps one order: a snapshot cannot see a second (the cdc sees the order change)")
		return nil
	case a.m.RedemptionLog.Order == "":
		a.off(DoubleSpend, "redemption_log names no order column")
		return nil
	}
	a.checked(DoubleSpend)
	return a.q.DoubleSpends(ctx, tx, a.progress(string(DoubleSpend), func(r inventory.AuditRow) error {
		a.add(DoubleSpend, couponFinding(r, fmt.Sprintf("written off by %d orders", r.N)))
		return nil
	}))
}

func couponFinding(r inventory.AuditRow, detail string) Finding {
	return Finding{Coupon: r.Coupon, Template: r.Template, User: r.User, Orders: r.Orders, Detail: detail}
}

// overIssue compares the coupons taken (held, used and frozen) with each
// channel quota, or with a legacy template's budget.
func (a *auditor) overIssue(ctx context.Context, tx *sql.Tx) error {
	pairs := make([]inventory.Pair, 0, len(a.snap.Counts))
	for p := range a.snap.Counts {
		pairs = append(pairs, p)
	}
	slices.SortFunc(pairs, func(x, y inventory.Pair) int {
		if x.Less(y) {
			return -1
		}
		return 1
	})
	if a.m.ChannelQuota != nil {
		a.checked(OverIssue)
		for _, p := range pairs {
			q, ok := a.snap.Quotas[p]
			if taken := a.snap.Counts[p].Taken(); ok && taken > q.Quota {
				a.add(OverIssue, Finding{Template: p.Template, Channel: p.Channel, Detail: fmt.Sprintf("%d coupons taken, quota %d", taken, q.Quota)})
			}
		}
		return nil
	}
	if a.m.Reference() {
		a.off(OverIssue, "no channel quotas")
		return nil
	}
	templates, err := a.q.Templates(ctx, tx, nil)
	if err != nil {
		return err
	}
	a.checked(OverIssue)
	taken := map[int64]int64{}
	var ids []int64
	for _, p := range pairs {
		if _, seen := taken[p.Template]; !seen {
			ids = append(ids, p.Template)
		}
		taken[p.Template] += a.snap.Counts[p].Taken()
	}
	for _, id := range ids {
		t, ok := templates[id]
		if ok && t.HasBudget && taken[id] > t.Budget {
			a.add(OverIssue, Finding{Template: id, Detail: fmt.Sprintf("%d coupons taken, budget %d", taken[id], t.Budget)})
		}
	}
	return nil
}

// perUser counts each member's coupons of each template against the
// template's per-user limit (inventory.PerUserLimits: the mapped column,
// or the reference schema's coupon_template.per_user_limit, as the cdc
// and the reconciler read it).
func (a *auditor) perUser(ctx context.Context, tx *sql.Tx) error {
	if !a.m.HasPerUserLimits() {
		a.off(PerUserLimitExceeded, "the mapping names no template.per_user_limit")
		return nil
	}
	limits, err := a.q.PerUserLimits(ctx, tx, nil)
	if err != nil {
		return err
	}
	a.checked(PerUserLimitExceeded)
	tick := a.ticker(string(PerUserLimitExceeded))
	return a.q.UserClaims(ctx, tx, func(tpl int64, user string, coupons int64) error {
		tick()
		if limit := limits[tpl]; limit > 0 && coupons > limit {
			a.add(PerUserLimitExceeded, Finding{Template: tpl, User: user, Detail: fmt.Sprintf("%d coupons, limit %d", coupons, limit)})
		}
		return nil
	})
}

// usedAfterExpiry checks the uses after the coupon's expiry, where the
// shop keeps the time of a use (the reference schema).
func (a *auditor) usedAfterExpiry(ctx context.Context, tx *sql.Tx) error {
	if !a.m.Reference() {
		a.off(UsedAfterExpiry, "the mapping names no time of use: a snapshot cannot tell when a coupon was used (the cdc judges each use as it happens)")
		return nil
	}
	a.checked(UsedAfterExpiry)
	return a.q.UsedAfterExpiry(ctx, tx, a.progress(string(UsedAfterExpiry), func(r inventory.AuditRow) error {
		a.add(UsedAfterExpiry, couponFinding(r, "redeemed after its expiry"))
		return nil
	}))
}
