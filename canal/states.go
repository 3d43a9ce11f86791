package canal

import (
	"fmt"
	"slices"
)

// The states of a shop's rows that end them without a DELETE: an order
// the shop closed, cancelled or refunded (orders.status and
// orders.closed), and a soft-deleted row (deleted). Both are followed
// from the binlog and left out of a snapshot alike:
//
//   - an order moving into a closed code counts as removed, back out of
//     it as added; a first start counts only open orders. A NULL status is
//     open.
//   - a row moving into a soft-delete value counts as deleted, out of it
//     as inserted; a row inserted soft-deleted is not seen. A NULL is not
//     deleted.

// SoftDelete names a table's soft-delete column and the stored values
// that mean deleted, e.g. {column: deleted, values: [1]}.
type SoftDelete struct {
	Column string  `yaml:"column"`
	Values []int64 `yaml:"values"`
}

// Col is the soft-delete column ("" when the table has none: d is nil).
func (d *SoftDelete) Col() string {
	if d == nil {
		return ""
	}
	return d.Column
}

// Codes are the values that mean deleted (none when d is nil).
func (d *SoftDelete) Codes() []int64 {
	if d == nil {
		return nil
	}
	return slices.Clone(d.Values)
}

// orderSpec is the order table's spec: subscribed with evidence
// order_table; with coupon_order only looked up (which orders are open).
func (m *Mapping) orderSpec(o *OrderTable) tableSpec {
	if m.RedemptionEvidence() == EvidenceCouponOrder {
		return tableSpec{key: "orders", kind: kindOrder, table: o.Table, cols: []colRef{
			{"id", o.ID, true}, {"order", o.Order, true}, {"status", o.Status, true}, {"deleted", o.Deleted.Col(), false}}}
	}
	return tableSpec{key: "orders", kind: kindOrder, table: o.Table, source: true, cols: []colRef{
		{"id", o.ID, true}, {"template", o.Template, true}, {"user", o.User, true}, {"order", o.Order, false},
		{"status", o.Status, false}, {"deleted", o.Deleted.Col(), false}}}
}

// validateStates checks the order states and the soft-delete columns.
func (m *Mapping) validateStates() []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("mapping: "+format, args...)) }
	soft := func(key string, d *SoftDelete) {
		switch {
		case d == nil:
		case d.Column == "" || !validIdent(d.Column):
			bad("%s.deleted needs a column: e.g. deleted: {column: deleted, values: [1]}", key)
		case len(d.Values) == 0:
			bad("%s.deleted lists no value: the stored values that mean deleted, e.g. values: [1]", key)
		}
	}
	soft("user_coupon", m.UserCoupon.Deleted)
	o := m.Orders
	if o == nil {
		return errs
	}
	soft("orders", o.Deleted)
	if (o.Status == "") != (len(o.Closed) == 0) {
		bad("orders.status and orders.closed go together: the order's state column and its codes that mean closed, e.g. status: status, closed: [4, 5]")
	}
	if m.RedemptionEvidence() == EvidenceCouponOrder && (o.Order == "" || o.Status == "") {
		bad("with redemption_evidence coupon_order, orders says which orders are open: it needs order (the number the coupon row keeps), status and closed")
	}
	return errs
}

// OrderClosed says whether an order's stored state code is one of the
// mapping's closed codes; a NULL (null) is open.
func (o *OrderTable) OrderClosed(code int64, null bool) bool {
	return !null && slices.Contains(o.Closed, code)
}

// gone says whether row is soft-deleted: its column (index i, -1 when the
// table has none) holds one of d's values.
func gone(d *SoftDelete, row []any, i int) bool {
	if i < 0 || d == nil {
		return false
	}
	v, null, err := asInt(row[i])
	return err == nil && !null && slices.Contains(d.Values, v)
}
