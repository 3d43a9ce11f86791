package canal

import (
	"fmt"
	"time"
)

// orders decodes the rows of a shop's order table (evidence order_table)
// into OrderRows: which (template, user) an order used a coupon of. An
// order without a template (NULL or 0) used no coupon and is skipped; so is
// an image that is closed (orders.status and orders.closed) or soft-deleted (states.go). An
// UPDATE matters only when it moves the order to another (template, user),
// or into or out of a closed or soft-deleted state: then the image that
// counted is removed and the one that counts added.
func (d *decoder) orders(l *layout, action string, rows [][]any, at time.Time, b *Batch) error {
	o := d.m.Orders
	type image struct {
		OrderRow
		ended bool // closed or soft-deleted: counted nowhere
	}
	decode := func(row []any) (image, error) {
		tpl, err := intCol(l, row, l.template, "template") // NULL is 0: no coupon
		if err != nil {
			return image{}, err
		}
		img := image{OrderRow: OrderRow{ID: strCol(row, l.id), Template: tpl, User: strCol(row, l.user), Order: strCol(row, l.order),
			At: at, After: len(b.Transitions)}}
		if img.ended, err = o.ClosedWhen().matchRow(row, l.closed); err != nil {
			return image{}, fmt.Errorf("decode %s (closed): %w", l.name, err)
		}
		img.ended = img.ended || gone(o.Deleted, row, l.gone)
		return img, nil
	}
	return endedImages(action, rows, decode, func(img image) bool { return img.Template != 0 && !img.ended },
		func(before, after image) bool { return before.Template != after.Template || before.User != after.User },
		func(img image, deleted bool) {
			img.Deleted = deleted
			b.Orders = append(b.Orders, img.OrderRow)
		})
}
