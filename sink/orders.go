package sink

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/inventory"
)

// The order_table evidence: the shop's orders name the template and the
// user of a use, not the coupon, so uses are proven in number, per
// (template, user): USED coupons against orders. The state lives in
// cdc_order_key (migration 0006), written in the batch's transaction with
// the checkpoint, so that a replay after a crash neither loses nor repeats
// an anomaly: one row per key whose counts differ (the difference, what of
// it was reported, and when it is due). A batch's uses and orders move the
// differences in binlog order (canal.OrderRow.After). A key whose
// difference a batch changes is due a grace after that batch (the shop may write the order
// and the coupon in separate transactions, in either order); when due, each
// unit not reported yet is one anomaly: a USED coupon more than orders is
// used_without_redemption, an order more than USED coupons is double_spend.
// What was reported shrinks with the difference: an order that arrives
// late clears it without an anomaly, and a later difference is new. A
// bootstrap rewrites the keys from its snapshot. The memory holds the
// earliest deadline (orderKeys.next, never later than the true one), the
// number of keys with one, and the keys known to have no row (balanced,
// up to maxKnownKeys, forgotten at every start and when full): a shop's
// use and its order usually balance in one transaction, so a batch reads
// only the keys it does not know to be balanced. Only the leading cdc of
// a checkpoint writes its rows, and only a batch's write adds one.

// orderKeys is the order_table check.
type orderKeys struct {
	noCheck
	s        *Sink
	next     time.Time                 // the earliest deadline of a key (zero: none)
	pending  int                       // keys with a deadline
	balanced keyMemory[orderKey, bool] // keys with no row at the last committed batch
}

// setBalanced notes whether a key has no row.
func (c *orderKeys) setBalanced(k orderKey, v bool) {
	if _, ok := c.balanced.get(k); ok == v {
		return
	}
	if v {
		c.balanced.set(k, true)
	} else {
		c.balanced.del(k)
	}
}

// on says whether uses are proven by an order table.
func (c *orderKeys) on() bool {
	return c.s.cfg.Mapping.RedemptionEvidence() == canal.EvidenceOrderTable
}

func (c *orderKeys) seed(ctx context.Context, sd *seeding) ([]Anomaly, error) {
	c.balanced.forget() // the bootstrap rewrites the table
	return nil, c.seedOrderKeys(ctx, sd.stx, sd.tx)
}

// resume forgets the balanced keys (the table is the truth at a start)
// and reads the earliest deadline back.
func (c *orderKeys) resume(ctx context.Context, _ bool) error {
	c.balanced.forget()
	return c.loadOrderNext(ctx, c.s.db)
}

// judge marks a heartbeat that must commit: keys are due, decided in its
// transaction (write).
func (c *orderKeys) judge(_ context.Context, b *batch) ([]Anomaly, error) {
	if b.idle && c.due() {
		b.decide = true
	}
	return nil, nil
}

func (c *orderKeys) write(ctx context.Context, b *batch) ([]Anomaly, error) {
	return c.countOrderKeys(ctx, b.tx, b.Batch)
}

func (c *orderKeys) waiting() (int, bool) { return c.pending, c.due() }

// mark: the write reads the earliest deadline back in the transaction
// (countOrderKeys) and notes the keys it balanced or unbalanced; a run
// again after a deadlock starts from what was there before.
func (c *orderKeys) mark() func() {
	next, pending := c.next, c.pending
	back := c.balanced.mark()
	return func() {
		c.next, c.pending = next, pending
		back()
	}
}

// orderKey is a (template, user) of the order_table check.
type orderKey struct {
	template int64
	user     string
}

func (k orderKey) parts() (int64, string) { return k.template, k.user }

// orderKeyCols are cdc_order_key's key columns beside the name (and
// cdc_user_claim's).
var orderKeyCols = [2]string{"template_id", "user_id"}

// orderKeyRow is one cdc_order_key row.
type orderKeyRow struct {
	orderKey
	diff           int64 // USED coupons minus orders
	missing, extra int64 // units of a positive (negative) difference already reported
	deadline       sql.NullTime
	coupon         int64  // the last coupon of the key that became USED (0: unknown)
	order          string // the last order of the key
}

// unreported is how much of the difference no anomaly reported yet.
func (r *orderKeyRow) unreported() int64 {
	return max(r.diff, 0) - r.missing + max(-r.diff, 0) - r.extra
}

// add moves the difference by delta and shrinks what was reported to the
// difference there is now: an order that arrives late clears the use it
// answers, and a difference that grows again is new.
func (r *orderKeyRow) add(delta int64) {
	r.diff += delta
	r.missing = min(r.missing, max(r.diff, 0))
	r.extra = min(r.extra, max(-r.diff, 0))
}

// arm sets the deadline (at) when some of the difference is unreported.
func (r *orderKeyRow) arm(at time.Time) {
	r.deadline = sql.NullTime{}
	if r.unreported() > 0 {
		r.deadline = sql.NullTime{Time: at.UTC(), Valid: true}
	}
}

// cut is a user or order value as cdc_order_key keeps it.
func cut(v string) string { return v[:min(len(v), inventory.MaxOrderKey)] }

// orderStep is one change of a key's difference: a coupon into USED +1,
// out of it -1 (by its before image's template and user), an order
// inserted -1, deleted +1; with the coupon or the order that made it.
type orderStep struct {
	orderKey
	delta  int64
	coupon int64
	order  string
}

// orderSteps lists the batch's changes of the keys in binlog order (the
// orders placed among the uses by OrderRow.After).
func orderSteps(b *canal.Batch) []orderStep {
	var out []orderStep
	next := 0
	orders := func(upTo int) {
		for ; next < len(b.Orders) && b.Orders[next].After <= upTo; next++ {
			o := &b.Orders[next]
			st := orderStep{orderKey: orderKey{o.Template, cut(o.User)}, delta: -1, order: cut(o.Order)}
			if st.order == "" {
				st.order = cut(o.ID)
			}
			if o.Deleted {
				st.delta, st.order = 1, ""
			}
			out = append(out, st)
		}
	}
	for i := range b.Transitions {
		orders(i)
		t := &b.Transitions[i]
		from, to := orderKey{t.PrevTemplate, cut(t.PrevUser)}, orderKey{t.Template, cut(t.User)}
		if t.From == coupon.Used && (t.To != coupon.Used || from != to) {
			out = append(out, orderStep{orderKey: from, delta: -1})
		}
		if t.To == coupon.Used && (t.From != coupon.Used || from != to) {
			out = append(out, orderStep{orderKey: to, delta: 1, coupon: t.Coupon})
		}
	}
	orders(len(b.Transitions))
	return out
}

// countOrderKeys applies the batch's changes to cdc_order_key and decides
// the keys due, in tx; it returns their anomalies. A key whose difference
// (or what of it was reported) the batch changed is due a grace from now.
// With an empty batch it only decides.
func (c *orderKeys) countOrderKeys(ctx context.Context, tx *sql.Tx, b *canal.Batch) ([]Anomaly, error) {
	s := c.s
	now := s.cfg.Now()
	steps := orderSteps(b)
	if len(steps) > 0 {
		var keys []orderKey
		seen := map[orderKey]bool{}
		for _, st := range steps {
			if !seen[st.orderKey] {
				seen[st.orderKey] = true
				keys = append(keys, st.orderKey)
			}
		}
		c.balanced.bound()
		var ask []orderKey
		for _, k := range keys {
			if _, ok := c.balanced.get(k); !ok {
				ask = append(ask, k)
			}
		}
		rows, err := c.orderKeyRows(ctx, tx, ask)
		if err != nil {
			return nil, err
		}
		stored := make(map[orderKey]bool, len(rows))
		for k := range rows {
			stored[k] = true
		}
		was := map[orderKey]orderKeyRow{}
		for _, k := range keys {
			if rows[k] == nil {
				rows[k] = &orderKeyRow{orderKey: k}
			}
			was[k] = *rows[k]
		}
		for _, st := range steps {
			r := rows[st.orderKey]
			r.add(st.delta)
			if st.coupon != 0 {
				r.coupon = st.coupon
			}
			if st.order != "" {
				r.order = st.order
			}
		}
		if err := c.saveOrderKeys(ctx, tx, keys, rows, was, now.Add(s.cfg.RedemptionGrace)); err != nil {
			return nil, err
		}
		for _, k := range keys { // as saveOrderKeys left them
			r, w := rows[k], was[k]
			if r.diff == w.diff && r.missing == w.missing && r.extra == w.extra {
				c.setBalanced(k, !stored[k]) // untouched
			} else {
				c.setBalanced(k, r.diff == 0) // deleted, or written
			}
		}
	}
	due, decided, err := c.decideOrderKeys(ctx, tx, now)
	if err != nil || (len(steps) == 0 && !decided) {
		return due, err
	}
	return due, c.loadOrderNext(ctx, tx)
}

// saveOrderKeys writes the keys whose difference, or what of it was
// reported, moved from was (armed for deadline), and deletes those that
// balance again.
func (c *orderKeys) saveOrderKeys(ctx context.Context, tx *sql.Tx, keys []orderKey, rows map[orderKey]*orderKeyRow, was map[orderKey]orderKeyRow,
	deadline time.Time) error {
	var keep []*orderKeyRow
	var drop []orderKey
	for _, k := range keys {
		r, w := rows[k], was[k]
		switch {
		case r.diff == w.diff && r.missing == w.missing && r.extra == w.extra:
			continue // its deadline stands: nothing it judges changed
		case r.diff == 0:
			drop = append(drop, k)
		default:
			r.arm(deadline)
			keep = append(keep, r)
		}
	}
	if err := c.writeOrderKeys(ctx, tx, keep); err != nil {
		return err
	}
	return deleteKeys(ctx, tx, c.s.cfg.Name, "cdc_order_key", orderKeyCols, drop)
}

// orderKeyRows reads the stored rows of keys, locked.
func (c *orderKeys) orderKeyRows(ctx context.Context, tx *sql.Tx, keys []orderKey) (map[orderKey]*orderKeyRow, error) {
	out := map[orderKey]*orderKeyRow{}
	for start := 0; start < len(keys); start += 500 {
		where, args := keysWhere(orderKeyCols, keys[start:min(start+500, len(keys))])
		err := c.eachOrderKey(ctx, tx, where+" FOR UPDATE", args, func(r *orderKeyRow) { out[r.orderKey] = r })
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// eachOrderKey hands fn each of the checkpoint's cdc_order_key rows that
// where (with args) picks.
func (c *orderKeys) eachOrderKey(ctx context.Context, q inventory.Querier, where string, args []any, fn func(*orderKeyRow)) error {
	rows, err := q.QueryContext(ctx, `SELECT template_id, user_id, difference, reported_missing, reported_extra, deadline,
		COALESCE(last_coupon, 0), COALESCE(last_order, '') FROM cdc_order_key WHERE name = ? AND `+where, append([]any{c.s.cfg.Name}, args...)...)
	if err != nil {
		return fmt.Errorf("read order keys: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		r := &orderKeyRow{}
		var user, order []byte
		if err := rows.Scan(&r.template, &user, &r.diff, &r.missing, &r.extra, &r.deadline, &r.coupon, &order); err != nil {
			return fmt.Errorf("read order keys: %w", err)
		}
		r.user, r.order = string(user), string(order)
		fn(r)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read order keys: %w", err)
	}
	return nil
}

// writeOrderKeys stores the rows, in tx.
func (c *orderKeys) writeOrderKeys(ctx context.Context, tx *sql.Tx, rows []*orderKeyRow) error {
	ins := &rowInserter{tx: tx, what: "write order keys", cols: 9,
		head: `INSERT INTO cdc_order_key (name, template_id, user_id, difference, reported_missing, reported_extra, deadline,
			last_coupon, last_order) VALUES `,
		tail: ` ON DUPLICATE KEY UPDATE difference = VALUES(difference), reported_missing = VALUES(reported_missing),
			reported_extra = VALUES(reported_extra), deadline = VALUES(deadline), last_coupon = VALUES(last_coupon),
			last_order = VALUES(last_order)`}
	for _, r := range rows {
		if err := ins.add(ctx, c.s.cfg.Name, r.template, r.user, r.diff, r.missing, r.extra, r.deadline, nullInt(r.coupon), nullStr(r.order)); err != nil {
			return err
		}
	}
	return ins.flush(ctx)
}

// due says whether a key may be due now.
func (c *orderKeys) due() bool {
	return c.on() && !c.next.IsZero() && !c.s.cfg.Now().Before(c.next)
}

// decideOrderKeys reports the keys whose deadline passed, in tx: one
// anomaly per unit of their difference not reported yet. decided says
// whether it looked.
func (c *orderKeys) decideOrderKeys(ctx context.Context, tx *sql.Tx, now time.Time) (out []Anomaly, decided bool, err error) {
	s := c.s
	if c.next.IsZero() || now.Before(c.next) {
		return nil, false, nil
	}
	var due []*orderKeyRow
	if err := c.eachOrderKey(ctx, tx, "deadline <= ? FOR UPDATE", []any{now.UTC()}, func(r *orderKeyRow) { due = append(due, r) }); err != nil {
		return nil, true, err
	}
	for _, r := range due {
		if r.coupon == 0 && r.unreported() > 0 {
			// the key balanced in the batch of its last use, which stored no row
			if r.coupon, err = s.src.LastUsedCoupon(ctx, tx, r.template, r.user); err != nil {
				return nil, true, err
			}
		}
		out = append(out, s.orderAnomalies(r)...)
		r.missing, r.extra = max(r.diff, 0), max(-r.diff, 0)
		r.deadline = sql.NullTime{}
	}
	if err := c.writeOrderKeys(ctx, tx, due); err != nil {
		return nil, true, err
	}
	return out, true, s.placeChannels(ctx, tx, out)
}

// orderAnomalies are the anomalies of a due key's unreported difference.
func (s *Sink) orderAnomalies(r *orderKeyRow) []Anomaly {
	var out []Anomaly
	last := "unknown"
	if r.coupon != 0 {
		last = fmt.Sprint(r.coupon)
	}
	for range max(r.diff, 0) - r.missing {
		out = append(out, Anomaly{Kind: inventory.AnomalyUsedWithoutRedemption, Coupon: r.coupon, Template: r.template, To: coupon.Used,
			Detail: fmt.Sprintf("template %d, user %q: %d USED coupons more than orders for %s (the last coupon that became USED: %s)",
				r.template, r.user, r.diff, s.cfg.RedemptionGrace, last)})
	}
	for range max(-r.diff, 0) - r.extra {
		out = append(out, Anomaly{Kind: inventory.AnomalyDoubleSpend, Coupon: r.coupon, Template: r.template, Order: r.order,
			Detail: fmt.Sprintf("template %d, user %q: %d orders more than USED coupons for %s (the last order: %q; the last coupon that became USED: %s)",
				r.template, r.user, -r.diff, s.cfg.RedemptionGrace, r.order, last)})
	}
	return out
}

// placeChannels fills in the channel of the anomalies' coupons that still
// have a row (the template is the key's).
func (s *Sink) placeChannels(ctx context.Context, q inventory.Querier, as []Anomaly) error {
	var ask []int64
	for _, a := range as {
		if a.Coupon != 0 && !slices.Contains(ask, a.Coupon) {
			ask = append(ask, a.Coupon)
		}
	}
	if len(ask) == 0 {
		return nil
	}
	found, err := s.pairsOf(ctx, q, ask)
	if err != nil {
		return err
	}
	for i := range as {
		if p, ok := found[as[i].Coupon]; ok {
			as[i].Channel = p.Channel
		}
	}
	return nil
}

// loadOrderNext reads the earliest deadline and the number of keys with
// one (q: the batch's transaction, or the database at start).
func (c *orderKeys) loadOrderNext(ctx context.Context, q inventory.Querier) error {
	c.next, c.pending = time.Time{}, 0
	if !c.on() {
		return nil
	}
	rows, err := q.QueryContext(ctx, `SELECT COUNT(deadline), MIN(deadline) FROM cdc_order_key WHERE name = ?`, c.s.cfg.Name)
	if err != nil {
		return fmt.Errorf("read order key deadlines: %w", err)
	}
	defer rows.Close()
	var next sql.NullTime
	for rows.Next() {
		if err := rows.Scan(&c.pending, &next); err != nil {
			return fmt.Errorf("read order key deadlines: %w", err)
		}
	}
	c.next = next.Time
	return rows.Err()
}

// seedOrderKeys is a bootstrap's part: it rewrites the checkpoint's order
// keys in tx from the snapshot stx. A difference found there is due a grace
// from now (the snapshot may fall between a shop's two transactions); what
// the old keys reported of it is kept, so that a rebuild reports only what
// the binlog it skips changed.
func (c *orderKeys) seedOrderKeys(ctx context.Context, stx, tx *sql.Tx) error {
	s := c.s
	old := map[orderKey]*orderKeyRow{}
	if err := c.eachOrderKey(ctx, tx, "TRUE FOR UPDATE", nil, func(r *orderKeyRow) { old[r.orderKey] = r }); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, "DELETE FROM cdc_order_key WHERE name = ?", s.cfg.Name); err != nil {
		return fmt.Errorf("clear order keys: %w", err)
	}
	deadline := s.cfg.Now().Add(s.cfg.RedemptionGrace)
	var rows []*orderKeyRow
	err := s.src.OrderKeyDifferences(ctx, stx, func(tpl int64, user string, used, orders, last int64) error {
		r := &orderKeyRow{orderKey: orderKey{tpl, user}, diff: used - orders, coupon: last}
		if o := old[r.orderKey]; o != nil {
			r.missing, r.extra, r.order = o.missing, o.extra, o.order
		}
		r.add(0)
		r.arm(deadline)
		if rows = append(rows, r); len(rows) == 500 {
			err := c.writeOrderKeys(ctx, tx, rows)
			rows = rows[:0]
			return err
		}
		return nil
	})
	if err != nil {
		return err
	}
	return c.writeOrderKeys(ctx, tx, rows)
}
