package canal

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	gocanal "github.com/go-mysql-org/go-mysql/canal"
	"github.com/go-mysql-org/go-mysql/schema"

	"github.com/couponlink/couponlink/coupon"
)

// decoder turns go-mysql row events of the source tables into typed
// records. Column indexes are located by name once per table definition
// (go-mysql hands out a new *schema.Table after a DDL) and cached.
type decoder struct {
	m        *Mapping // schema resolved
	loc      *time.Location
	defChan  string
	sources  map[string]tableKind // schema.table → kind: every shard of a set
	patterns []TableName          // the * patterns of sets, to warn of a new table they match
	codes    [256]coupon.Status   // stored code 0..255 → state (None = unmapped)
	bigCodes map[int64]coupon.Status
	// watchUsed: the evidence judges a USED coupon's order or user column
	// changing while it stays USED, so such an UPDATE is emitted
	watchUsed bool
	// watchUsers: per-user limits are judged, so a coupon given to another
	// user is emitted whatever its state
	watchUsers bool

	layouts    map[*schema.Table]*layout
	lastTable  *schema.Table
	lastLayout *layout
}

// layout holds the column indexes of one table definition; -1 = unmapped.
type layout struct {
	table tableKind
	name  string // schema.table, for messages
	ncols int

	id, template, channel, status, order int
	user                                 int
	coupon, kind, seq, from, to          int
	quota, claimed                       int
	limit, end, start                    int
	gone, closed, shelf                  []int // the columns of a soft delete, an order's closed state, a campaign's off-shelf state (AnyOf)
	window                               []int // the columns of template.fixed_window
	expires                              int   // a coupon's expires_at
	endWall, expiresWall, startWall      bool  // the time column is a DATETIME: a wall clock in the mapping's zone
	statusCol, fromCol, toCol            string
}

func newDecoder(m *Mapping) *decoder {
	d := &decoder{m: m, loc: m.Location(), defChan: m.DefaultChannel, sources: map[string]tableKind{}, layouts: map[*schema.Table]*layout{}}
	ev := m.RedemptionEvidence()
	d.watchUsed = ev == EvidenceCouponOrder || ev == EvidenceOrderTable
	d.watchUsers = !m.reference && m.Template.PerUserLimit != "" && m.UserCoupon.User != ""
	for _, s := range m.specs() {
		if !s.source {
			continue
		}
		tables, err := m.tablesOf(s)
		if err != nil {
			continue // unresolved: the Tailer resolves the mapping before it decodes
		}
		for _, t := range tables {
			d.sources[t.String()] = s.kind
		}
		if ts, err := m.parseSet(s.table); err == nil && ts.hasStar() {
			d.patterns = append(d.patterns, ts.names()...)
		}
	}
	for name, codes := range m.Status {
		st, err := coupon.ParseStatus(name)
		if err != nil {
			continue // Validate reports it
		}
		for _, c := range codes {
			if c >= 0 && c < int64(len(d.codes)) {
				d.codes[c] = st
			} else {
				if d.bigCodes == nil {
					d.bigCodes = map[int64]coupon.Status{}
				}
				d.bigCodes[c] = st
			}
		}
	}
	return d
}

// isSource reports whether schema.table is a subscribed table.
func (d *decoder) isSource(sch, tbl string) bool {
	_, ok := d.sources[sch+"."+tbl]
	return ok
}

// inPattern reports whether a table that is not a source matches a set's
// pattern: created after the mapping was resolved, it is not followed.
func (d *decoder) inPattern(sch, tbl string) bool {
	if d.isSource(sch, tbl) {
		return false
	}
	return slices.ContainsFunc(d.patterns, func(p TableName) bool { return globMatch(p.Schema, sch) && globMatch(p.Name, tbl) })
}

// forget drops the cached column indexes of a table (after a DDL on it).
func (d *decoder) forget(sch, tbl string) {
	for t := range d.layouts {
		if t.Schema == sch && t.Name == tbl {
			delete(d.layouts, t)
		}
	}
	d.lastTable, d.lastLayout = nil, nil
}

func (d *decoder) layoutOf(t *schema.Table) (*layout, error) {
	if t == d.lastTable {
		return d.lastLayout, nil
	}
	l, ok := d.layouts[t]
	if !ok {
		var err error
		if l, err = d.buildLayout(t); err != nil {
			return nil, err
		}
		d.layouts[t] = l
	}
	d.lastTable, d.lastLayout = t, l
	return l, nil
}

func (d *decoder) buildLayout(t *schema.Table) (*layout, error) {
	name := t.Schema + "." + t.Name
	tbl := t // the definition, which the mapped template table shadows below
	kind, ok := d.sources[name]
	if !ok {
		return nil, fmt.Errorf("decode: rows of %s, which the mapping does not subscribe", name)
	}
	l := &layout{table: kind, name: name, ncols: len(t.Columns),
		id: -1, template: -1, channel: -1, status: -1, order: -1, user: -1,
		coupon: -1, kind: -1, seq: -1, from: -1, to: -1, quota: -1, claimed: -1, limit: -1, end: -1,
		expires: -1}
	var spec tableSpec
	for _, s := range d.m.specs() {
		if s.source && s.kind == kind {
			spec = s
		}
	}
	c := &columnFinder{t: t, spec: spec.key, table: name}
	find, findAll := c.find, c.findAll
	switch kind {
	case kindUserCoupon:
		u := d.m.UserCoupon
		l.id, l.template, l.channel = find("id", u.ID), find("template", u.Template), find("channel", u.Channel)
		l.status, l.order, l.statusCol = find("status", u.Status), find("order", u.Order), u.Status
		l.user, l.gone = find("user", u.User), findAll(u.Deleted.colRefs("deleted"))
		if !d.m.reference { // couponlink's own api refuses a use past expiry
			l.expires = find("expires_at", u.ExpiresAt.Column)
			l.expiresWall = isDatetime(t, l.expires)
		}
	case kindRedemption:
		r := d.m.RedemptionLog
		l.id, l.coupon, l.order = find("id", r.ID), find("coupon", r.Coupon), find("order", r.Order)
		l.template, l.channel = find("template", r.Template), find("channel", r.Channel)
		_, states := d.m.evidenceStates()
		l.closed = findAll(states)
	case kindQuota:
		q := d.m.ChannelQuota
		l.template, l.channel = find("template", q.Template), find("channel", q.Channel)
		l.quota, l.claimed = find("quota", q.Quota), find("claimed", q.Claimed)
	case kindFlow:
		f := d.m.InventoryFlow
		l.id, l.coupon, l.kind, l.seq = find("id", f.ID), find("coupon", f.Coupon), find("kind", f.Kind), find("seq", f.Seq)
		l.template, l.channel = find("template", f.Template), find("channel", f.Channel)
		l.from, l.to, l.fromCol, l.toCol = find("from", f.From), find("to", f.To), f.From, f.To
	case kindTemplate:
		t := d.m.Template
		l.id, l.quota = find("id", t.ID), find("total_quota", t.TotalQuota)
		l.limit, l.end = find("per_user_limit", t.PerUserLimit), find("end_time", t.EndTime.Column)
		l.shelf, l.endWall = findAll(append(t.Status.anyOf().colRefs("status"), t.Deleted.colRefs("deleted")...)), isDatetime(tbl, l.end)
		l.window = findAll(t.FixedWindow.colRefs("fixed_window"))
		l.start = find("start_time", t.StartTime.Column)
		l.startWall = isDatetime(tbl, l.start)
	case kindOrder:
		o := d.m.Orders
		l.id, l.template, l.user, l.order = find("id", o.ID), find("template", o.Template), find("user", o.User), find("order", o.Order)
		closed := o.closedRefs()
		if o.Status != "" && len(o.Closed.Codes) > 0 {
			closed = append([]colRef{{"status", o.Status, false}}, closed...)
		}
		l.closed, l.gone = findAll(closed), findAll(o.Deleted.colRefs("deleted"))
	}
	if len(c.errs) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(c.errs, "; "))
	}
	return l, nil
}

// columnFinder finds the mapped columns of a table's definition by name
// (as MySQL compares them: without case), noting each the definition no
// longer has (after a DDL).
type columnFinder struct {
	t           *schema.Table
	spec, table string // the mapping's key of the table, and its schema.name
	errs        []string
}

// find is the index of col (key: its role), -1 when col is "" or missing.
func (c *columnFinder) find(key, col string) int {
	if col == "" {
		return -1
	}
	for i := range c.t.Columns {
		if strings.EqualFold(c.t.Columns[i].Name, col) {
			return i
		}
	}
	c.errs = append(c.errs, fmt.Sprintf("mapping: %s.%s names column %q but %s has no such column now (after a DDL?)", c.spec, key, col, c.table))
	return -1
}

// findAll locates every column of a state (refs: its roles).
func (c *columnFinder) findAll(refs []colRef) []int {
	idx := make([]int, len(refs))
	for i, r := range refs {
		idx[i] = c.find(r.key, r.column)
	}
	return idx
}

// isDatetime says whether column i of t is a DATETIME (a wall clock,
// read in the mapping's zone); a TIMESTAMP is an instant.
func isDatetime(t *schema.Table, i int) bool {
	return i >= 0 && t.Columns[i].Type == schema.TYPE_DATETIME
}

// decode appends the records of one rows event to b and returns the number
// of row changes it held (an UPDATE's before/after pair counts once).
func (d *decoder) decode(e *gocanal.RowsEvent, b *Batch) (int, error) {
	if len(e.Rows) == 0 {
		return 0, nil
	}
	l, err := d.layoutOf(e.Table)
	if err != nil {
		return 0, err
	}
	for _, row := range e.Rows {
		if len(row) != l.ncols {
			return 0, fmt.Errorf("decode %s: a row event has %d columns but the table has %d now: %w (replay across an ALTER of a source table is refused; %s)",
				l.name, len(row), l.ncols, ErrSchemaChanged, errRebuildHint)
		}
	}
	var at time.Time
	if e.Header != nil {
		at = time.Unix(int64(e.Header.Timestamp), 0)
	}
	n := len(e.Rows)
	if e.Action == gocanal.UpdateAction {
		if n%2 != 0 {
			return 0, fmt.Errorf("decode %s: an update event has %d rows, not before/after pairs", l.name, n)
		}
		n /= 2
	} else if e.Action != gocanal.InsertAction && e.Action != gocanal.DeleteAction {
		return 0, fmt.Errorf("decode %s: unknown action %q", l.name, e.Action)
	}
	switch l.table {
	case kindUserCoupon:
		err = d.userCoupon(l, e.Action, e.Rows, at, b)
	case kindRedemption:
		err = d.redemption(l, e.Action, e.Rows, at, b)
	case kindQuota:
		err = d.quota(l, e.Action, e.Rows, b)
	case kindFlow:
		err = d.flow(l, e.Action, e.Rows, b)
	case kindTemplate:
		err = d.template(l, e.Action, e.Rows, b)
	case kindOrder:
		err = d.orders(l, e.Action, e.Rows, at, b)
	}
	if err != nil {
		return 0, err
	}
	b.Rows += n
	return n, nil
}

// undecodable records an image the mapping cannot decode in b (unless nil).
func (d *decoder) undecodable(l *layout, row []any, col, value string, b *Batch) {
	if b != nil {
		b.Undecodable = append(b.Undecodable, Undecodable{Table: l.name, Key: strCol(row, l.id), Column: col, Value: value})
	}
}

// redemption decodes the rows of the write-off table. A row is inserted or
// deleted; an UPDATE matters only with evidence states (evidencestates.go):
// a row moving into an ended state is deleted, back out of it inserted,
// and one moved to another coupon or order is the before image deleted and
// the after image inserted. A row inserted ended is not seen, nor one whose
// coupon is 0: an orders table that is the write-off table writes 0 in an
// order that used no coupon.
func (d *decoder) redemption(l *layout, action string, rows [][]any, at time.Time, b *Batch) error {
	ended := d.m.EvidenceEnded()
	if action == gocanal.UpdateAction && len(ended) == 0 {
		return nil // updates change nothing a stateless write-off table counts
	}
	type image struct {
		Redemption
		ok    bool // the coupon is not NULL
		ended bool
	}
	decode := func(row []any) (image, error) {
		id, err := intCol(l, row, l.id, "id")
		if err != nil {
			return image{}, err
		}
		cp, ok, err := requiredInt(l, row, l.coupon, "coupon")
		if err != nil {
			return image{}, err
		}
		if !ok {
			d.undecodable(l, row, d.m.RedemptionLog.Coupon, "NULL", b)
			return image{}, nil
		}
		if cp == 0 {
			return image{}, nil // no coupon: nothing to prove
		}
		tpl, err := intCol(l, row, l.template, "template")
		if err != nil {
			return image{}, err
		}
		img := image{Redemption: Redemption{ID: id, Coupon: cp, Template: tpl, Channel: d.channel(row, l.channel), Order: strCol(row, l.order), At: at,
			After: len(b.Transitions)}, ok: true}
		if img.ended, err = ended.matchRow(row, l.closed); err != nil {
			return image{}, fmt.Errorf("decode %s (evidence states): %w", l.name, err)
		}
		return img, nil
	}
	return endedImages(action, rows, decode, func(img image) bool { return img.ok && !img.ended },
		func(before, after image) bool { return before.Coupon != after.Coupon || before.Order != after.Order },
		func(img image, deleted bool) {
			img.Deleted = deleted
			b.Redemptions = append(b.Redemptions, img.Redemption)
		})
}

func (d *decoder) quota(l *layout, action string, rows [][]any, b *Batch) error {
	image := func(row []any) (QuotaChange, error) {
		var q QuotaChange
		var err error
		if q.Template, err = intCol(l, row, l.template, "template"); err != nil {
			return q, err
		}
		q.Channel = strCol(row, l.channel)
		if q.Quota, err = intCol(l, row, l.quota, "quota"); err != nil {
			return q, err
		}
		q.Claimed, err = intCol(l, row, l.claimed, "claimed")
		return q, err
	}
	return images(action, rows, image, func(q QuotaChange) {
		q.Inserted, q.Deleted = action == gocanal.InsertAction, action == gocanal.DeleteAction
		b.Quotas = append(b.Quotas, q)
	}, func(before, after QuotaChange) {
		switch {
		case before.Template != after.Template || before.Channel != after.Channel:
			before.Deleted = true
			b.Quotas = append(b.Quotas, before, after)
		case before.Quota != after.Quota || before.Claimed != after.Claimed:
			after.SoldOut = before.Claimed < before.Quota && after.Quota > 0 && after.Claimed >= after.Quota
			after.Updated, after.PrevQuota, after.PrevClaimed = true, before.Quota, before.Claimed
			b.Quotas = append(b.Quotas, after)
		}
	})
}

// images decodes every image of a rows event with image: one by one for an
// INSERT or a DELETE (one), in (before, after) pairs for an UPDATE (pair).
func images[T any](action string, rows [][]any, image func([]any) (T, error), one func(T), pair func(before, after T)) error {
	if action != gocanal.UpdateAction {
		for _, row := range rows {
			v, err := image(row)
			if err != nil {
				return err
			}
			one(v)
		}
		return nil
	}
	for i := 0; i+1 < len(rows); i += 2 {
		before, err := image(rows[i])
		if err != nil {
			return err
		}
		after, err := image(rows[i+1])
		if err != nil {
			return err
		}
		pair(before, after)
	}
	return nil
}

func (d *decoder) flow(l *layout, action string, rows [][]any, b *Batch) error {
	if action != gocanal.InsertAction {
		return nil // the ledger is append-only; only inserts are movements
	}
	for _, row := range rows {
		var f Flow
		var err error
		if f.ID, err = intCol(l, row, l.id, "id"); err != nil {
			return err
		}
		var ok bool
		if f.Coupon, ok, err = requiredInt(l, row, l.coupon, "coupon"); err != nil {
			return err
		}
		if !ok {
			d.undecodable(l, row, d.m.InventoryFlow.Coupon, "NULL", b)
			continue
		}
		f.Kind = strCol(row, l.kind)
		if f.Seq, err = intCol(l, row, l.seq, "seq"); err != nil {
			return err
		}
		if f.Template, err = intCol(l, row, l.template, "template"); err != nil {
			return err
		}
		f.Channel = strCol(row, l.channel)
		var badFrom, badTo string
		if f.From, badFrom, err = d.flowStatus(l, row, l.from, l.fromCol); err != nil {
			return err
		}
		if f.To, badTo, err = d.flowStatus(l, row, l.to, l.toCol); err != nil {
			return err
		}
		if badFrom != "" || badTo != "" {
			col, v := l.fromCol, badFrom
			if badFrom == "" {
				col, v = l.toCol, badTo
			}
			d.undecodable(l, row, col, v, b)
			continue
		}
		b.Flows = append(b.Flows, f)
	}
	return nil
}

// status maps the stored code in row[i] to its state. bad is the stored
// value ("NULL" or the code) when the mapping names no state for it.
func (d *decoder) status(l *layout, row []any, i int, col string) (st coupon.Status, bad string, err error) {
	code, null, err := asInt(row[i])
	if err != nil {
		return coupon.None, "", fmt.Errorf("decode %s.%s: %w", l.name, col, err)
	}
	if null {
		return coupon.None, "NULL", nil
	}
	if st, ok := d.lookup(code); ok {
		return st, "", nil
	}
	return coupon.None, strconv.FormatInt(code, 10), nil
}

// flowStatus is status, with an unmapped 0 or NULL meaning none.
func (d *decoder) flowStatus(l *layout, row []any, i int, col string) (coupon.Status, string, error) {
	st, bad, err := d.status(l, row, i, col)
	if bad == "NULL" || bad == "0" {
		return coupon.None, "", nil
	}
	return st, bad, err
}

func (d *decoder) lookup(code int64) (coupon.Status, bool) {
	if code >= 0 && code < int64(len(d.codes)) {
		st := d.codes[code]
		return st, st != coupon.None
	}
	st, ok := d.bigCodes[code]
	return st, ok
}

// channel is the channel column, or the default channel when the table has
// none or it is NULL.
func (d *decoder) channel(row []any, i int) string {
	if i < 0 || row[i] == nil {
		return d.defChan
	}
	return asString(row[i])
}
