package canal

import (
	"time"

	gocanal "github.com/go-mysql-org/go-mysql/canal"
)

// orders decodes the rows of a shop's order table (evidence order_table)
// into OrderRows: which (template, user) an order used a coupon of. An
// order without a template (NULL or 0) used no coupon and is skipped; an
// UPDATE matters only when it moves the order to another (template, user).
func (d *decoder) orders(l *layout, action string, rows [][]any, at time.Time, b *Batch) error {
	image := func(row []any) (OrderRow, error) {
		tpl, err := intCol(l, row, l.template, "template") // NULL is 0: no coupon
		return OrderRow{ID: strCol(row, l.id), Template: tpl, User: strCol(row, l.user), Order: strCol(row, l.order), At: at,
			After: len(b.Transitions)}, err
	}
	add := func(o OrderRow, deleted bool) {
		if o.Template != 0 {
			o.Deleted = deleted
			b.Orders = append(b.Orders, o)
		}
	}
	return images(action, rows, image, func(o OrderRow) {
		add(o, action == gocanal.DeleteAction)
	}, func(before, after OrderRow) {
		if before.Template != after.Template || before.User != after.User {
			add(before, true)
			add(after, false)
		}
	})
}
