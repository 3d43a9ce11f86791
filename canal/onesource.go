package canal

import (
	"fmt"
	"slices"
	"strings"
)

// A table on one source. Sharding middlewares keep a table that is not
// split either as a copy on every data source (a broadcast table) or on
// one of them only (a single table). With sources, the template table may
// be either: template.source names the source that holds it. The other
// sources' cdcs neither subscribe nor check it on their servers: they read
// its rows on that source (read only, each look-up bounded, like the
// redemption look-ups on the peers) and follow its budgets, limits and end
// times through that source's cdc, which tails it in its own binlog
// (sink/templatesource.go).
//
// One source judges what only the sum over the sources shows (an
// over-issue of a budget, one (coupon, order) written off on two servers):
// the source that holds the template table, else the first source. Its cdc
// follows the budget in its own binlog, so it judges by the budget in
// force at each of its batches (sink/sourcesjudge.go).

// TemplateSource is the source that holds the template table when
// template.source names one ("": a copy on every source, or one server).
func (m *Mapping) TemplateSource() string { return m.Template.Source }

// TemplateElsewhere reports whether this source's mapping (ForSource)
// reads the template table on another source: TemplateSource.
func (m *Mapping) TemplateElsewhere() bool { return m.templateElsewhere() }

func (m *Mapping) templateElsewhere() bool {
	return m.source != "" && m.Template.Source != "" && m.Template.Source != m.source
}

// Judge is the source that judges the sum over the sources (a source's
// mapping, made by ForSource; "" for one server).
func (m *Mapping) Judge() string { return m.judge }

// judgeSource is the source that holds the template table, else the first.
func (m *Mapping) judgeSource() string {
	if m.Template.Source != "" {
		return m.Template.Source
	}
	if len(m.Sources) > 0 {
		return m.Sources[0].Name
	}
	return ""
}

// validateTemplateSource checks template.source against the sources.
func (m *Mapping) validateTemplateSource() []error {
	ts := m.Template.Source
	if ts == "" || m.source != "" {
		return nil // a source's mapping (ForSource) was checked with the whole
	}
	if !m.HasSources() {
		return []error{fmt.Errorf("mapping: template.source %q: the mapping names no sources; leave it out (the template table is on the server of the DSN)", ts)}
	}
	if !slices.Contains(m.SourceNames(), ts) {
		return []error{fmt.Errorf("mapping: template.source %q is not one of the sources (%s)", ts, strings.Join(m.SourceNames(), ", "))}
	}
	var errs []error
	for _, s := range m.Sources {
		if s.Template != "" && s.Name != ts {
			errs = append(errs, fmt.Errorf("mapping: source %q names template %q, but template.source says the template table is on source %q only; "+
				"name it there, or leave template.source out (a copy on every source)", s.Name, s.Template, ts))
		}
	}
	return errs
}

// sourceChecks says, on a source's mapping, which checks one source's cdc
// decides on the sum over the sources.
func (m *Mapping) sourceChecks(cs []CheckState) []CheckState {
	if m.source == "" {
		return cs
	}
	for i, c := range cs {
		switch {
		case c.Name == "over_issue" && m.ChannelQuota == nil:
			cs[i].Detail = fmt.Sprintf("on the sum over the sources, by the cdc of source %s (it follows the budget, %s)", m.judge,
				m.col(m.Template.Table, m.Template.TotalQuota))
		case c.Name == "duplicate_redemption" && c.On:
			cs[i].Detail += fmt.Sprintf("; a (coupon, order) written off on two servers by the cdc of source %s", m.judge)
		}
	}
	return cs
}
