package canal

import (
	"fmt"
	"slices"
	"strings"
)

// A campaign as a shop stores it: a budget value that means no limit
// (template.unlimited, e.g. [0]), and a campaign taken off the shelf by a
// status code (template.status: {column, off_shelf}) or soft-deleted
// (template.deleted: {column, values}). Off the shelf, nothing is
// claimable, and a coupon claimed then is a claimed_off_shelf anomaly; a
// soft-deleted campaign keeps its rules (its budget, limit, end), as one
// taken off the shelf does, and undeleting it puts it back. An unlimited
// budget is no budget: no over_issue, and claimable shows unlimited.

// ShelfState names a campaign's status column and the stored codes that
// take it off the shelf, e.g. {column: status, off_shelf: [0, 2]}. A NULL
// status is on the shelf.
type ShelfState struct {
	Column   string  `yaml:"column"`
	OffShelf []int64 `yaml:"off_shelf"`
}

// Col is the status column ("" when the mapping names none: s is nil).
func (s *ShelfState) Col() string {
	if s == nil {
		return ""
	}
	return s.Column
}

// IsUnlimited says whether a stored budget means no limit.
func (t *TemplateTable) IsUnlimited(budget int64) bool { return slices.Contains(t.Unlimited, budget) }

// OffShelf says whether a campaign row is off the shelf: its status
// (status, null when NULL or unmapped) is an off_shelf code, or its
// soft-delete column (deleted) holds a deleted value.
func (t *TemplateTable) OffShelf(status int64, statusNull bool, deleted int64, deletedNull bool) bool {
	return (t.Status != nil && !statusNull && slices.Contains(t.Status.OffShelf, status)) ||
		(t.Deleted != nil && !deletedNull && slices.Contains(t.Deleted.Values, deleted))
}

// validateShelf checks template.status, template.deleted and
// template.unlimited.
func (m *Mapping) validateShelf() []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("mapping: "+format, args...)) }
	t := m.Template
	if s := t.Status; s != nil {
		switch {
		case s.Column == "" || !validIdent(s.Column):
			bad("template.status needs a column: e.g. status: {column: status, off_shelf: [0, 2]}")
		case len(s.OffShelf) == 0:
			bad("template.status lists no off_shelf code: the stored codes that take a campaign off the shelf, e.g. off_shelf: [0, 2]")
		}
	}
	if d := t.Deleted; d != nil && (d.Column == "" || !validIdent(d.Column) || len(d.Values) == 0) {
		bad("template.deleted needs a column and its values: e.g. deleted: {column: deleted, values: [1]}")
	}
	if len(t.Unlimited) > 0 && m.reference {
		bad("template.unlimited is for a legacy template table")
	}
	return errs
}

// decodeShelf reads a template image's shelf state and whether its
// budget is unlimited (l.shelf, l.gone: -1 when unmapped).
func (d *decoder) decodeShelf(l *layout, row []any, tc *TemplateChange) error {
	t := &d.m.Template
	tc.Unlimited = tc.Known && t.IsUnlimited(tc.Quota)
	if tc.Unlimited {
		tc.Known = false
	}
	st, stNull, del, delNull := int64(0), true, int64(0), true
	var err error
	if l.shelf >= 0 {
		if st, stNull, err = asInt(row[l.shelf]); err != nil {
			return fmt.Errorf("decode %s (status column): %w", l.name, err)
		}
	}
	if l.gone >= 0 {
		if del, delNull, err = asInt(row[l.gone]); err != nil {
			return fmt.Errorf("decode %s (deleted column): %w", l.name, err)
		}
	}
	tc.OffShelf = t.OffShelf(st, stNull, del, delNull)
	return nil
}

// shelfCheck is the claimed_off_shelf check as mapping check lists it.
func (m *Mapping) shelfCheck() CheckState {
	t := m.Template
	var why []string
	if t.Status != nil {
		why = append(why, fmt.Sprintf("%s in %v", m.col(t.Table, t.Status.Column), t.Status.OffShelf))
	}
	if t.Deleted != nil {
		why = append(why, fmt.Sprintf("soft-deleted (%s in %v)", m.col(t.Table, t.Deleted.Column), t.Deleted.Values))
	}
	if len(why) == 0 {
		return CheckState{Name: "claimed_off_shelf", Detail: "no template.status, no template.deleted"}
	}
	return CheckState{Name: "claimed_off_shelf", On: true, Detail: "a coupon claimed while its campaign is off the shelf: " + strings.Join(why, " or ")}
}

// unlimitedText says which budgets mean no limit ("" for none).
func (m *Mapping) unlimitedText() string {
	if len(m.Template.Unlimited) == 0 {
		return ""
	}
	return fmt.Sprintf("; a budget in %v is unlimited, never over-issued", m.Template.Unlimited)
}
