package canal

import (
	"fmt"

	gocanal "github.com/go-mysql-org/go-mysql/canal"
)

// FollowsTemplates reports whether the template table is subscribed, so
// that its budgets, per-user limits and end times are followed from the
// binlog (TemplateChange): a legacy mapping without channel quotas, or
// one that names the per-user limit or the end time.
func (m *Mapping) FollowsTemplates() bool { return m.followsTemplates() }

// template decodes the rows of a subscribed template table into template
// changes. An UPDATE that changes none of the id, the budget, the per-user
// limit, the end time, the shelf state and the window rule (a shop's remaining-stock column moving on each
// claim) is not emitted.
func (d *decoder) template(l *layout, action string, rows [][]any, b *Batch) error {
	image := func(row []any) (TemplateChange, error) {
		t := TemplateChange{After: len(b.Transitions)}
		var err error
		if t.Template, err = intCol(l, row, l.id, "id"); err != nil {
			return t, err
		}
		q, null, err := asInt(row[l.quota])
		if err != nil {
			return t, fmt.Errorf("decode %s (total_quota column): %w", l.name, err)
		}
		t.Quota, t.Known = q, !null
		if t.Limit, err = intCol(l, row, l.limit, "per_user_limit"); err != nil {
			return t, err
		}
		t.Limit = max(t.Limit, 0)
		if l.end >= 0 {
			if t.End, err = d.timeCol(row[l.end], l.endWall, d.m.Template.EndTime); err != nil {
				return t, fmt.Errorf("decode %s (end_time column): %w", l.name, err)
			}
		}
		if l.start >= 0 {
			if t.Start, err = d.timeCol(row[l.start], l.startWall, d.m.Template.StartTime); err != nil {
				return t, fmt.Errorf("decode %s (start_time column): %w", l.name, err)
			}
		}
		return t, d.decodeShelf(l, row, &t)
	}
	return images(action, rows, image, func(t TemplateChange) {
		if action == gocanal.DeleteAction {
			t.Deleted = true
			t.keepAsPrev()
		} else {
			t.Inserted = true
		}
		b.Templates = append(b.Templates, t)
	}, func(before, after TemplateChange) {
		switch {
		case before.Template != after.Template:
			before.Deleted = true
			before.keepAsPrev()
			after.Inserted = true
			b.Templates = append(b.Templates, before, after)
		case before.Quota != after.Quota || before.Known != after.Known || before.Limit != after.Limit || !before.End.Equal(after.End) ||
			before.Unlimited != after.Unlimited || before.OffShelf != after.OffShelf || before.Window != after.Window || !before.Start.Equal(after.Start):
			after.PrevQuota, after.PrevKnown, after.PrevLimit, after.PrevEnd = before.Quota, before.Known, before.Limit, before.End
			after.PrevStart = before.Start
			after.PrevUnlimited, after.PrevOffShelf, after.PrevWindow = before.Unlimited, before.OffShelf, before.Window
			b.Templates = append(b.Templates, after)
		}
	})
}

// keepAsPrev makes an image's values its Prev values too: a deleted row's
// before image is what the template held until then.
func (t *TemplateChange) keepAsPrev() {
	t.PrevQuota, t.PrevKnown, t.PrevLimit, t.PrevEnd = t.Quota, t.Known, t.Limit, t.End
	t.PrevUnlimited, t.PrevOffShelf, t.PrevWindow, t.PrevStart = t.Unlimited, t.OffShelf, t.Window, t.Start
}
