package canal

import (
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// A campaign as a shop stores it: a budget value that means no limit
// (template.unlimited, e.g. [0]), and a campaign taken off the shelf by a
// status code (template.status: {column, off_shelf}) or soft-deleted
// (template.deleted: {column, values}); each may be a list of several
// columns, any of which does it (anyof.go). Off the shelf, nothing is
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

// ShelfStates is template.status: one ShelfState, or a sequence of them
// (any of which takes the campaign off the shelf).
type ShelfStates []ShelfState

// UnmarshalYAML reads one {column, off_shelf} or a sequence of them.
func (s *ShelfStates) UnmarshalYAML(n *yaml.Node) error {
	return decodeOneOrList(n, (*[]ShelfState)(s))
}

// anyOf is the status conditions as an AnyOf.
func (s ShelfStates) anyOf() AnyOf {
	var a AnyOf
	for _, st := range s {
		a = append(a, Condition{Column: st.Column, Values: st.OffShelf})
	}
	return a
}

// OffShelfWhen is the state of a campaign off the shelf: a status
// condition (template.status) or a soft-delete one (template.deleted)
// holds. None: the mapping names neither.
func (t *TemplateTable) OffShelfWhen() AnyOf {
	a := t.Status.anyOf()
	return append(a, t.Deleted...)
}

// IsUnlimited says whether a stored budget means no limit.
func (t *TemplateTable) IsUnlimited(budget int64) bool { return slices.Contains(t.Unlimited, budget) }

// validateShelf checks template.status, template.deleted and
// template.unlimited.
func (m *Mapping) validateShelf() []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("mapping: "+format, args...)) }
	t := m.Template
	errs = append(errs, t.Status.anyOf().validate("template", "status", "off_shelf code", "{column: status, off_shelf: [0, 2]}")...)
	errs = append(errs, t.Deleted.validate("template", "deleted", "value", "{column: deleted, values: [1]}")...)
	if len(t.Unlimited) > 0 && m.reference {
		bad("template.unlimited is for a legacy template table")
	}
	return errs
}

// decodeShelf reads a template image's shelf state and whether its
// budget is unlimited (l.shelf: the columns of OffShelfWhen).
func (d *decoder) decodeShelf(l *layout, row []any, tc *TemplateChange) error {
	t := &d.m.Template
	tc.Unlimited = tc.Known && t.IsUnlimited(tc.Quota)
	if tc.Unlimited {
		tc.Known = false
	}
	var err error
	if tc.OffShelf, err = t.OffShelfWhen().matchRow(row, l.shelf); err != nil {
		return fmt.Errorf("decode %s (status or deleted): %w", l.name, err)
	}
	if tc.Window, err = t.FixedWindow.matchRow(row, l.window); err != nil {
		return fmt.Errorf("decode %s (fixed_window): %w", l.name, err)
	}
	return nil
}

// shelfCheck is the claimed_off_shelf check as mapping check lists it.
func (m *Mapping) shelfCheck() CheckState {
	t := m.Template
	col := func(c string) string { return m.col(t.Table, c) }
	var why []string
	if len(t.Status) > 0 {
		why = append(why, t.Status.anyOf().Text(col))
	}
	if len(t.Deleted) > 0 {
		why = append(why, fmt.Sprintf("soft-deleted (%s)", t.Deleted.Text(col)))
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
