package canal

import (
	"fmt"

	gocanal "github.com/go-mysql-org/go-mysql/canal"
)

// template decodes the rows of a subscribed template table into budget
// changes. An UPDATE that changes neither the id nor the budget (a shop's
// remaining-stock column moving on each claim) is not emitted.
func (d *decoder) template(l *layout, action string, rows [][]any, b *Batch) error {
	image := func(row []any) (TemplateChange, error) {
		var t TemplateChange
		var err error
		if t.Template, err = intCol(l, row, l.id, "id"); err != nil {
			return t, err
		}
		q, null, err := asInt(row[l.quota])
		if err != nil {
			return t, fmt.Errorf("decode %s (total_quota column): %w", l.name, err)
		}
		t.Quota, t.Known = q, !null
		return t, nil
	}
	return images(action, rows, image, func(t TemplateChange) {
		if action == gocanal.DeleteAction {
			t.Deleted, t.PrevQuota, t.PrevKnown = true, t.Quota, t.Known
		} else {
			t.Inserted = true
		}
		b.Templates = append(b.Templates, t)
	}, func(before, after TemplateChange) {
		switch {
		case before.Template != after.Template:
			before.Deleted, before.PrevQuota, before.PrevKnown = true, before.Quota, before.Known
			after.Inserted = true
			b.Templates = append(b.Templates, before, after)
		case before.Quota != after.Quota || before.Known != after.Known:
			after.PrevQuota, after.PrevKnown = before.Quota, before.Known
			b.Templates = append(b.Templates, after)
		}
	})
}
