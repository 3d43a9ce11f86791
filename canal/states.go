package canal

import (
	"fmt"

	gocanal "github.com/go-mysql-org/go-mysql/canal"
	"go.yaml.in/yaml/v3"
)

// The states of a shop's rows that end them without a DELETE: an order
// the shop closed, cancelled or refunded (orders.status and
// orders.closed), and a soft-deleted row (deleted). Each is an AnyOf
// (anyof.go): one column and its values, or several. Both are followed
// from the binlog and left out of a snapshot alike:
//
//   - an order moving into a closed state counts as removed, back out of
//     it as added; a first start counts only open orders. A NULL status is
//     open.
//   - a row moving into a soft-delete value counts as deleted, out of it
//     as inserted; a row inserted soft-deleted is not seen. A NULL is not
//     deleted.

// ClosedStates is orders.closed: the codes of orders.status that mean
// closed, cancelled or refunded (closed: [4, 5]), and, among them or
// alone, conditions on other columns of the order that close it too
// (closed: [4, {column: refund_status, values: [2]}]).
type ClosedStates struct {
	Codes []int64 // of orders.status
	When  AnyOf   // on other columns
	keys  []string
}

// UnmarshalYAML reads a sequence of codes and {column, values}
// conditions, or one condition.
func (c *ClosedStates) UnmarshalYAML(n *yaml.Node) error {
	*c = ClosedStates{}
	if n.Kind == yaml.MappingNode {
		var cond Condition
		if err := n.Decode(&cond); err != nil {
			return err
		}
		c.When, c.keys = AnyOf{cond}, []string{"closed"}
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		return fmt.Errorf("line %d: orders.closed is a list of the codes of orders.status that mean closed, and {column, values} conditions on other columns", n.Line)
	}
	for i, e := range n.Content {
		if e.Kind == yaml.MappingNode {
			var cond Condition
			if err := e.Decode(&cond); err != nil {
				return err
			}
			c.When, c.keys = append(c.When, cond), append(c.keys, fmt.Sprintf("closed[%d]", i))
			continue
		}
		var code int64
		if err := e.Decode(&code); err != nil {
			return err
		}
		c.Codes = append(c.Codes, code)
	}
	return nil
}

// key is the YAML key of condition i of When.
func (c ClosedStates) key(i int) string {
	if i < len(c.keys) {
		return c.keys[i]
	}
	return fmt.Sprintf("closed[%d]", i)
}

// ClosedWhen is the state of a closed order: its status among the closed
// codes, or any condition of closed on another column (none: the mapping
// names no closed state).
func (o *OrderTable) ClosedWhen() AnyOf {
	if o == nil {
		return nil
	}
	var a AnyOf
	if o.Status != "" && len(o.Closed.Codes) > 0 {
		a = append(a, Condition{Column: o.Status, Values: o.Closed.Codes})
	}
	return append(a, o.Closed.When...)
}

// closedRefs are the columns of the closed conditions on other columns.
func (o *OrderTable) closedRefs() []colRef {
	out := make([]colRef, len(o.Closed.When))
	for i, c := range o.Closed.When {
		out[i] = colRef{o.Closed.key(i), c.Column, false}
	}
	return out
}

// orderSpec is the order table's spec: subscribed with evidence
// order_table; with coupon_order only looked up (which orders are open).
func (m *Mapping) orderSpec(o *OrderTable) tableSpec {
	var cols []colRef
	if m.RedemptionEvidence() == EvidenceCouponOrder {
		cols = []colRef{{"id", o.ID, true}, {"order", o.Order, true}, {"status", o.Status, false}}
		cols = append(append(cols, o.closedRefs()...), o.Deleted.colRefs("deleted")...)
		return tableSpec{key: "orders", kind: kindOrder, table: o.Table, cols: cols}
	}
	cols = []colRef{{"id", o.ID, true}, {"template", o.Template, true}, {"user", o.User, true}, {"order", o.Order, false},
		{"status", o.Status, false}}
	cols = append(append(cols, o.closedRefs()...), o.Deleted.colRefs("deleted")...)
	return tableSpec{key: "orders", kind: kindOrder, table: o.Table, source: true, cols: cols}
}

// validateStates checks the order states and the soft-delete columns.
func (m *Mapping) validateStates() []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("mapping: "+format, args...)) }
	const softExample = "{column: deleted, values: [1]}"
	errs = append(errs, m.UserCoupon.Deleted.validate("user_coupon", "deleted", "value", softExample)...)
	o := m.Orders
	if o == nil {
		return errs
	}
	errs = append(errs, o.Deleted.validate("orders", "deleted", "value", softExample)...)
	if (o.Status == "") != (len(o.Closed.Codes) == 0) {
		bad("orders.status and orders.closed go together (the codes in closed): the order's state column and its codes that mean closed, e.g. status: status, closed: [4, 5]")
	}
	for i, c := range o.Closed.When {
		errs = append(errs, AnyOf{c}.validate("orders", o.Closed.key(i), "value", "{column: refund_status, values: [2]}")...)
	}
	if m.RedemptionEvidence() == EvidenceCouponOrder && (o.Order == "" || len(o.ClosedWhen()) == 0) {
		bad("with redemption_evidence coupon_order, orders says which orders are open: it needs order (the number the coupon row keeps), and status and closed (or closed conditions on other columns)")
	}
	return errs
}

// endedImages hands emit the images of a table whose rows may end without
// a DELETE (an order closed, a row soft-deleted): only those that count. An
// INSERT or a DELETE is emitted as such; an UPDATE that moves the row
// (moved) or takes it into or out of counting is the before image deleted
// and the after image inserted, other UPDATEs are not emitted.
func endedImages[T any](action string, rows [][]any, decode func([]any) (T, error), counts func(T) bool, moved func(before, after T) bool,
	emit func(img T, deleted bool)) error {
	add := func(img T, deleted bool) {
		if counts(img) {
			emit(img, deleted)
		}
	}
	return images(action, rows, decode, func(img T) {
		add(img, action == gocanal.DeleteAction)
	}, func(before, after T) {
		if counts(before) != counts(after) || moved(before, after) {
			add(before, true)
			add(after, false)
		}
	})
}

// gone says whether row is soft-deleted: a column of d (at idx) holds one
// of its values. A value that is no integer is not deleted.
func gone(d AnyOf, row []any, idx []int) bool {
	ok, err := d.matchRow(row, idx)
	return err == nil && ok
}
