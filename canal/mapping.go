package canal

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/couponlink/couponlink/coupon"
)

// Mapping names the tables, columns and status codes of a coupon schema:
// couponlink's reference schema (DefaultMapping) or a legacy one, loaded
// from YAML with LoadMapping. Table names may be written schema.table; an
// unqualified name lives in Schema (default: the database of the DSN).
type Mapping struct {
	Schema        string             `yaml:"schema"`
	UserCoupon    UserCouponTable    `yaml:"user_coupon"`
	Status        map[string][]int64 `yaml:"status"`         // AVAILABLE, USED, EXPIRED, optional RETURNED → stored codes
	RedemptionLog RedemptionLogTable `yaml:"redemption_log"` // the write-off table (evidence: table)
	// Evidence says what proves a coupon's use (see Evidence); empty means
	// table, the per-coupon write-off table of redemption_log.
	Evidence      Evidence            `yaml:"redemption_evidence"`
	Orders        *OrderTable         `yaml:"orders,omitempty"` // evidence order_table: the shop's order table
	Template      TemplateTable       `yaml:"template"`
	ChannelQuota  *ChannelQuotaTable  `yaml:"channel_quota,omitempty"`  // optional
	InventoryFlow *InventoryFlowTable `yaml:"inventory_flow,omitempty"` // optional
	Redis         *RedisKeys          `yaml:"redis,omitempty"`          // optional: a legacy front end's stock keys
	// DefaultChannel is the channel of every coupon when user_coupon has no
	// channel column (and of a NULL channel).
	DefaultChannel string `yaml:"default_channel"`
	// ChannelLabels names the stored channel values for people (status,
	// the API's views), e.g. {"0": "back office", "1": "self-service"}.
	ChannelLabels map[string]string `yaml:"channel_labels,omitempty"`
	// Sources are the servers of a shop sharded over several (sources.go);
	// none: the one server of the process's DSN.
	Sources []SourceSpec `yaml:"sources,omitempty"`
	// TimeZone is the zone the shop's DATETIME columns are written in
	// (timezone.go): an IANA name, SYSTEM (the server's), or "" for UTC.
	TimeZone string `yaml:"time_zone,omitempty"`

	reference bool   // made by DefaultMapping: couponlink's own tables
	source    string // made by ForSource: the source's name
	judge     string // made by ForSource: the source that judges the sum (onesource.go)
	// resolved: Resolve bound the mapping to a server; shards then holds
	// each source role's concrete tables (sets expanded, patterns matched)
	resolved bool
	shards   map[tableKind][]TableName
	loc      *time.Location // TimeZone loaded (Validate) or read from the server (Resolve)
}

// UserCouponTable maps the table of real coupons. Channel, Order, User and
// ExpiresAt are optional.
type UserCouponTable struct {
	Table     string     `yaml:"table"`
	ID        string     `yaml:"id"`
	Template  string     `yaml:"template"`
	Channel   string     `yaml:"channel"`
	Status    string     `yaml:"status"`
	Order     string     `yaml:"order"`
	User      string     `yaml:"user"`
	ExpiresAt TimeColumn `yaml:"expires_at"`
	// Deleted optionally names the shop's soft-delete column and values,
	// or several columns any of which deletes the row (states.go).
	Deleted AnyOf `yaml:"deleted,omitempty"`
}

// Evidence is what proves that a coupon moving into USED was really used.
type Evidence string

// The kinds of redemption evidence a shop may have.
const (
	// EvidenceTable: a write-off table keyed per coupon (redemption_log).
	// A USED coupon with no row of its order is used_without_redemption;
	// two rows of one (coupon, order) are a duplicate_redemption.
	EvidenceTable Evidence = "table"
	// EvidenceCouponOrder: the order columns on the coupon row
	// (user_coupon.order). A coupon that becomes USED with a NULL order is
	// used_without_redemption; a USED coupon whose order changes while it
	// stays USED was spent twice (double_spend).
	EvidenceCouponOrder Evidence = "coupon_order"
	// EvidenceOrderTable: an order table carrying the template and the user
	// (orders), not the coupon. Per (template, user), fewer orders than
	// USED coupons is used_without_redemption, more is double_spend.
	EvidenceOrderTable Evidence = "order_table"
	// EvidenceNone: the USED transition itself is the only evidence; the
	// missing write-off and double spend checks are off.
	EvidenceNone Evidence = "none"
)

// OrderTable maps a shop's order table. With evidence order_table it
// names the template a coupon of which it used, and the user, but not the
// coupon; Order (the order number, for messages) is optional. With
// evidence coupon_order it is optional and only says which orders are
// open: Order (the number the coupon row keeps), Status and Closed.
type OrderTable struct {
	Table    string `yaml:"table"`
	ID       string `yaml:"id"`
	Template string `yaml:"template"`
	User     string `yaml:"user"`
	Order    string `yaml:"order"`
	// Status optionally names the order's state column, and Closed its
	// codes that mean closed, cancelled or refunded, and conditions on
	// other columns that close the order too (states.go).
	Status string       `yaml:"status"`
	Closed ClosedStates `yaml:"closed,omitempty"`
	// Deleted optionally names the shop's soft-delete column and values,
	// or several columns any of which deletes the row (states.go).
	Deleted AnyOf `yaml:"deleted,omitempty"`
}

// RedemptionLogTable maps the redemption ledger. Order, Template and
// Channel are optional.
type RedemptionLogTable struct {
	Table    string `yaml:"table"`
	ID       string `yaml:"id"`
	Coupon   string `yaml:"coupon"`
	Order    string `yaml:"order"`
	Template string `yaml:"template"`
	Channel  string `yaml:"channel"`
	// Closed and Deleted optionally say when a row no longer proves a use
	// (an order cancelled or refunded, a soft delete), each one column and
	// its values or several (evidencestates.go).
	Closed  AnyOf `yaml:"closed,omitempty"`
	Deleted AnyOf `yaml:"deleted,omitempty"`
}

// TemplateTable maps the campaign table. A legacy mapping without channel
// quotas, or with a per-user limit or an end time, subscribes it
// (FollowsTemplates): the cdc reads its rows in a bootstrap's snapshot
// (inventory.Queries.Templates) and follows their budgets, limits and end
// times from the binlog (TemplateChange). The reference schema's
// template table is never subscribed: its quotas live in channel_quota,
// and couponlink writes cached counts into it, which would feed back.
type TemplateTable struct {
	Table      string `yaml:"table"`
	ID         string `yaml:"id"`
	TotalQuota string `yaml:"total_quota"`
	// Issued and Used optionally name a legacy template's own cached counts,
	// which the reconciler compares with the truth (and flags; it never
	// writes a legacy table).
	Issued string `yaml:"issued"`
	Used   string `yaml:"used"`
	// Name is the campaign's name, for people (status, the API's views).
	Name string `yaml:"name"`
	// Remaining is the shop's own remaining-stock column (its claim guard,
	// e.g. count = count - 1 WHERE count > 0), which must equal
	// total_quota minus the coupons taken: the reconciler reports a
	// difference as stock_column_drift.
	Remaining string `yaml:"remaining"`
	// PerUserLimit is how many coupons of the template one user may hold
	// (0 or NULL: no limit); with user_coupon.user, a coupon beyond it is
	// per_user_limit_exceeded.
	PerUserLimit string `yaml:"per_user_limit"`
	// EndTime is the campaign's end: its AVAILABLE coupons count as expired
	// after it, and a coupon used or restored after it is
	// used_after_expiry. For shops that never write an expired status.
	EndTime TimeColumn `yaml:"end_time"`
	// Unlimited lists the budget values that mean no limit (e.g. [0]);
	// Status and Deleted say when the campaign is off the shelf (shelf.go).
	Unlimited []int64     `yaml:"unlimited,omitempty"`
	Status    ShelfStates `yaml:"status,omitempty"`
	Deleted   AnyOf       `yaml:"deleted,omitempty"`
	// FixedWindow says which campaigns' coupons follow the campaign's
	// current window rather than their own expires_at (e.g. {column: type,
	// values: [1]}: fixed-window coupons), window.go.
	FixedWindow AnyOf `yaml:"fixed_window,omitempty"`
	// StartTime is the campaign's start: a fixed-window coupon used before
	// it is used_after_expiry too (outside its window).
	StartTime TimeColumn `yaml:"start_time"`
	// Source names the one source that holds the table, in a mapping with
	// sources (onesource.go); empty: every source holds a copy.
	Source string `yaml:"source"`
}

// RedisKeys names a legacy front end's Redis keys, which the reconciler
// corrects (corrector mode). {template} and {channel} in a pattern stand
// for the ids.
type RedisKeys struct {
	TemplateStock string `yaml:"template_stock"` // e.g. "coupon:stock:{template}"
	ChannelStock  string `yaml:"channel_stock"`  // e.g. "coupon:stock:{template}:{channel}"
	// ClaimedUsers is the front end's per-template set of the users who
	// hold the per-user limit (it SADDs a user before its order commits,
	// to refuse a second claim), e.g. "shop:coupon:{template}:users".
	ClaimedUsers string `yaml:"claimed_users"`
}

// ChannelQuotaTable maps the per-channel quota buckets.
type ChannelQuotaTable struct {
	Table    string `yaml:"table"`
	Template string `yaml:"template"`
	Channel  string `yaml:"channel"`
	Quota    string `yaml:"quota"`
	Claimed  string `yaml:"claimed"`
}

// InventoryFlowTable maps the ledger of reverse and corrective movements.
// Seq is optional. From and To hold status codes of the status mapping (0
// means none when it is not mapped).
type InventoryFlowTable struct {
	Table    string `yaml:"table"`
	ID       string `yaml:"id"`
	Coupon   string `yaml:"coupon"`
	Kind     string `yaml:"kind"`
	Seq      string `yaml:"seq"`
	Template string `yaml:"template"`
	Channel  string `yaml:"channel"`
	From     string `yaml:"from"`
	To       string `yaml:"to"`
}

// DefaultMapping is the reference schema of migrations/0001.
func DefaultMapping() *Mapping {
	return &Mapping{
		reference: true,
		UserCoupon: UserCouponTable{Table: "user_coupon", ID: "id", Template: "template_id", Channel: "channel",
			Status: "status", Order: "order_id", User: "user_id", ExpiresAt: TimeColumn{Column: "expires_at"}},
		Status: map[string][]int64{"AVAILABLE": {1}, "USED": {2}, "EXPIRED": {3}, "RETURNED": {4}},
		RedemptionLog: RedemptionLogTable{Table: "redemption_log", ID: "id", Coupon: "user_coupon_id",
			Order: "order_id", Template: "template_id", Channel: "channel"},
		Template:     TemplateTable{Table: "coupon_template", ID: "id", TotalQuota: "total_quota"},
		ChannelQuota: &ChannelQuotaTable{Table: "channel_quota", Template: "template_id", Channel: "channel", Quota: "quota", Claimed: "claimed"},
		InventoryFlow: &InventoryFlowTable{Table: "inventory_flow", ID: "id", Coupon: "user_coupon_id", Kind: "kind",
			Seq: "seq", Template: "template_id", Channel: "channel", From: "from_status", To: "to_status"},
	}
}

// Reference reports whether m is couponlink's reference schema
// (DefaultMapping), written by couponlink api; a mapping loaded from YAML
// names a legacy application's tables.
func (m *Mapping) Reference() bool { return m.reference }

// HasPerUserLimits says whether the templates have the per-user limit
// that inventory's PerUserLimits reads: the reference schema's
// coupon_template.per_user_limit, or a mapped template.per_user_limit
// (with user_coupon.user, which a limit per user needs).
func (m *Mapping) HasPerUserLimits() bool {
	return m.UserCoupon.User != "" && (m.reference || m.Template.PerUserLimit != "")
}

// LoadMapping parses a YAML mapping (unknown keys are errors) and validates it.
func LoadMapping(data []byte) (*Mapping, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var m Mapping
	if err := dec.Decode(&m); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("mapping: the document is empty")
		}
		return nil, fmt.Errorf("mapping: %w", err)
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return &m, nil
}

// ReadMappingFile loads the mapping in a YAML file.
func ReadMappingFile(path string) (*Mapping, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read mapping: %w", err)
	}
	m, err := LoadMapping(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// tableKind says which mapped table a row event belongs to.
type tableKind uint8

const (
	kindUserCoupon tableKind = iota + 1
	kindRedemption
	kindQuota
	kindFlow
	kindTemplate
	kindOrder
)

// colRef is one mapped column: the YAML key that names it and the name.
type colRef struct {
	key, column string
	required    bool
}

// tableSpec is one mapped table, flattened for validation and checks.
type tableSpec struct {
	key    string // YAML key: user_coupon, ...
	kind   tableKind
	table  string // as written
	cols   []colRef
	source bool // subscribed in the binlog
}

// specs lists the mapped tables, subscribed ones first.
func (m *Mapping) specs() []tableSpec {
	u := m.UserCoupon
	r := m.RedemptionLog
	s := []tableSpec{
		{key: "user_coupon", kind: kindUserCoupon, table: u.Table, source: true, cols: append([]colRef{
			{"id", u.ID, true}, {"template", u.Template, true}, {"channel", u.Channel, false},
			{"status", u.Status, true}, {"order", u.Order, false}, {"user", u.User, false},
			{"expires_at", u.ExpiresAt.Column, false}}, u.Deleted.colRefs("deleted")...)},
	}
	switch m.RedemptionEvidence() {
	case EvidenceTable:
		_, states := m.evidenceStates()
		s = append(s, tableSpec{key: "redemption_log", kind: kindRedemption, table: r.Table, source: true, cols: append([]colRef{
			{"id", r.ID, true}, {"coupon", r.Coupon, true}, {"order", r.Order, false},
			{"template", r.Template, false}, {"channel", r.Channel, false}}, states...)})
	case EvidenceOrderTable, EvidenceCouponOrder:
		if o := m.Orders; o != nil {
			s = append(s, m.orderSpec(o))
		}
	}
	if q := m.ChannelQuota; q != nil {
		s = append(s, tableSpec{key: "channel_quota", kind: kindQuota, table: q.Table, source: true, cols: []colRef{
			{"template", q.Template, true}, {"channel", q.Channel, true}, {"quota", q.Quota, true},
			{"claimed", q.Claimed, true}}})
	}
	if f := m.InventoryFlow; f != nil {
		s = append(s, tableSpec{key: "inventory_flow", kind: kindFlow, table: f.Table, source: true, cols: []colRef{
			{"id", f.ID, true}, {"coupon", f.Coupon, true}, {"kind", f.Kind, true}, {"seq", f.Seq, false},
			{"template", f.Template, true}, {"channel", f.Channel, true}, {"from", f.From, true},
			{"to", f.To, true}}})
	}
	t := m.Template
	if m.templateElsewhere() {
		return s // on another source: read there (onesource.go)
	}
	cols := []colRef{
		{"id", t.ID, true}, {"total_quota", t.TotalQuota, true}, {"issued", t.Issued, false}, {"used", t.Used, false},
		{"name", t.Name, false}, {"remaining", t.Remaining, false}, {"per_user_limit", t.PerUserLimit, false},
		{"end_time", t.EndTime.Column, false}, {"start_time", t.StartTime.Column, false}}
	cols = append(append(cols, t.Status.anyOf().colRefs("status")...), t.Deleted.colRefs("deleted")...)
	cols = append(cols, t.FixedWindow.colRefs("fixed_window")...)
	s = append(s, tableSpec{key: "template", kind: kindTemplate, table: t.Table, source: m.followsTemplates(), cols: cols})
	return s
}

// requiredStatuses are the states every mapping names codes for. RETURNED
// is optional: a shop without voids or refund-recycles (e.g. codes 0 unused,
// 1 used, 2 expired) leaves it out, and its returned counters stay 0. A
// stored code the mapping does not name is still an undecodable_row.
var requiredStatuses = []coupon.Status{coupon.Available, coupon.Used, coupon.Expired}

// Validate checks the mapping on its own, without a server: required
// tables and columns, status names, every code mapped at most once and the
// required states present. Check verifies it against a server.
func (m *Mapping) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("mapping: "+format, args...)) }
	if !validIdent(m.Schema) {
		bad("schema %q is not a valid name", m.Schema)
	}
	errs = append(errs, m.validateTables()...)
	if len(m.Status) == 0 {
		bad("status is required: the stored codes of AVAILABLE, USED and EXPIRED (and RETURNED if the shop has it)")
	}
	owner := map[int64]string{}
	names := make([]string, 0, len(m.Status))
	for name := range m.Status {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		st, err := coupon.ParseStatus(name)
		if err != nil || !st.Valid() {
			bad("status: unknown state %q (want AVAILABLE, USED, EXPIRED or RETURNED)", name)
			continue
		}
		if len(m.Status[name]) == 0 {
			bad("status.%s lists no code (leave an optional state out instead)", name)
		}
		for _, code := range m.Status[name] {
			if prev, ok := owner[code]; ok {
				bad("status code %d is mapped twice (%s and %s)", code, prev, name)
				continue
			}
			owner[code] = name
		}
	}
	errs = append(errs, m.validateEvidence()...)
	errs = append(errs, m.validateEvidenceStates()...)
	errs = append(errs, m.validateStates()...)
	errs = append(errs, m.validateShelf()...)
	errs = append(errs, m.validateWindow()...)
	errs = append(errs, m.validateTimeZone()...)
	for role, c := range map[string]TimeColumn{"user_coupon.expires_at": m.UserCoupon.ExpiresAt, "template.end_time": m.Template.EndTime,
		"template.start_time": m.Template.StartTime} {
		if p := c.validUnit(); p != "" {
			bad("%s: %s", role, p)
		}
	}
	errs = append(errs, m.validateSources()...)
	errs = append(errs, m.validateTemplateSource()...)
	if m.Template.PerUserLimit != "" && m.UserCoupon.User == "" {
		bad("template.per_user_limit needs user_coupon.user: the limit is per user")
	}
	if p := m.claimedUsersProblem(); p != "" {
		bad("redis.claimed_users: %s", p)
	}
	for _, st := range requiredStatuses {
		if _, ok := m.Status[st.String()]; !ok {
			bad("status.%s is missing: AVAILABLE, USED and EXPIRED each need their codes (only RETURNED is optional)", st)
		}
	}
	return errors.Join(errs...)
}

// claimedUsersProblem says what is wrong with redis.claimed_users ("":
// nothing, or not named). A member means "holds the per-user limit", so
// the set can only be compared with MySQL when the limit and the user are
// mapped; one set per template, so the pattern names the template only.
func (m *Mapping) claimedUsersProblem() string {
	if m.Redis == nil || m.Redis.ClaimedUsers == "" {
		return ""
	}
	p := m.Redis.ClaimedUsers
	switch {
	case !strings.Contains(p, "{template}"):
		return fmt.Sprintf("%q has no {template}: the set is per template", p)
	case strings.Contains(p, "{channel}"):
		return fmt.Sprintf("%q names {channel}: the set is per template, not per channel", p)
	case m.Template.PerUserLimit == "":
		return "needs template.per_user_limit: a member is a user who holds the template's per-user limit"
	case m.UserCoupon.User == "":
		return "needs user_coupon.user: the set's members are users"
	case m.HasSources():
		return "is not compared over sources yet (a user's coupons may be on several): leave it out of a mapping with sources"
	}
	return ""
}

// RedemptionEvidence is the mapping's evidence of a use: Evidence, or
// table when it names none.
func (m *Mapping) RedemptionEvidence() Evidence {
	if m.Evidence == "" {
		return EvidenceTable
	}
	return m.Evidence
}

// validateEvidence checks that the evidence named and the tables and
// columns given agree.
func (m *Mapping) validateEvidence() []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("mapping: "+format, args...)) }
	ev := m.RedemptionEvidence()
	rl := m.RedemptionLog
	hasLog := rl.Table != "" || rl.ID != "" || rl.Coupon != "" || rl.Order != "" || rl.Template != "" || rl.Channel != ""
	switch ev {
	case EvidenceTable: // orders: validateEvidenceStates
	case EvidenceCouponOrder, EvidenceOrderTable, EvidenceNone:
		if hasLog {
			bad("redemption_log is mapped but redemption_evidence is %s; leave redemption_log out, or set redemption_evidence: table", ev)
		}
		if ev == EvidenceCouponOrder && m.UserCoupon.Order == "" {
			bad("redemption_evidence coupon_order needs user_coupon.order: the coupon row's order column")
		}
		if ev == EvidenceOrderTable && m.Orders == nil {
			bad("redemption_evidence order_table needs orders: the order table with its template and user columns")
		}
		if ev == EvidenceOrderTable && m.UserCoupon.User == "" {
			bad("redemption_evidence order_table needs user_coupon.user: orders are matched to coupons by (template, user)")
		}
		if ev != EvidenceOrderTable && ev != EvidenceCouponOrder && m.Orders != nil {
			bad("orders is mapped but redemption_evidence is %s; set redemption_evidence: order_table to use it", ev)
		}
	default:
		bad("redemption_evidence %q is unknown (want table, coupon_order, order_table or none)", ev)
	}
	return errs
}

func validIdent(s string) bool {
	return len(s) <= 64 && !strings.ContainsAny(s, "`.\x00 \t\n")
}

// SchemaTable splits a mapped table name into its schema (Schema when the
// name has none; "" when neither names one) and the table.
func (m *Mapping) SchemaTable(table string) (schema, name string) { return m.split(table) }

// split returns the schema (Schema when the name has none) and the table;
// a dot inside a set's braces ({0..63}) splits nothing.
func (m *Mapping) split(table string) (schema, name string) {
	if sch, tbl, ok := splitName(table); ok {
		return sch, tbl
	}
	return m.Schema, table
}

// qualified is schema.table, or the bare table when no schema is known.
func (m *Mapping) qualified(table string) string {
	sch, tbl := m.split(table)
	if sch == "" {
		return tbl
	}
	return sch + "." + tbl
}

// followsBudgets reports whether over-issue is judged against the
// template's budget: only a legacy mapping without channel quotas does.
func (m *Mapping) followsBudgets() bool { return !m.reference && m.ChannelQuota == nil }

// followsTemplates reports whether the template table is subscribed: a
// legacy mapping that follows its budgets, per-user limits, end times or
// shelf states.
func (m *Mapping) followsTemplates() bool {
	t := m.Template
	return m.followsBudgets() || (!m.reference && (t.PerUserLimit != "" || t.EndTime.Column != "" || len(t.Status) > 0 || len(t.Deleted) > 0 ||
		len(t.FixedWindow) > 0))
}

// SourceTables lists the subscribed tables as schema.table: user_coupon,
// redemption_log, channel_quota and inventory_flow when mapped, and the
// template table of a legacy mapping without channel quotas; every table
// of a sharded role (a pattern not yet resolved stays as written).
func (m *Mapping) SourceTables() []string {
	var out []string
	for _, s := range m.specs() {
		if !s.source {
			continue
		}
		tables, err := m.tablesOf(s)
		if err != nil {
			out = append(out, m.qualified(s.table))
			continue
		}
		for _, t := range tables {
			out = append(out, t.String())
		}
	}
	return out
}

// Codes returns the stored codes of a state, e.g. for a GROUP BY over the
// coupon table.
func (m *Mapping) Codes(s coupon.Status) []int64 { return slices.Clone(m.Status[s.String()]) }

// withSchema returns m, or a copy whose Schema is def when m has none.
func (m *Mapping) withSchema(def string) *Mapping {
	if m.Schema != "" || def == "" {
		return m
	}
	c := *m
	c.Schema = def
	return &c
}
