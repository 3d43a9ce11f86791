package canal

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// oneSourceYAML keeps the template table on east only.
var oneSourceYAML = strings.Replace(legacyYAML, "template: {table: t_coupon_tpl, id: id, total_quota: budget}",
	"template: {table: shard_0.t_coupon_tpl, id: id, total_quota: budget, source: east}", 1) + `sources:
  - {name: east, dsn: "root@tcp(127.0.0.1:3311)/couponlink"}
  - {name: west, dsn: "root@tcp(127.0.0.1:3312)/couponlink", user_coupon: "shard_{2..3}.t_user_coupon_{0..3}"}
`

// The template table on one source: that source follows it (subscribed,
// checked on its server); the others have no such table (neither
// subscribed nor checked there) and read it on east; east judges the sum.
func TestTemplateOnOneSource(t *testing.T) {
	require.Contains(t, oneSourceYAML, "source: east")
	m, err := LoadMapping([]byte(oneSourceYAML))
	require.NoError(t, err)
	require.Equal(t, "east", m.TemplateSource())

	east, _, err := m.ForSource("east")
	require.NoError(t, err)
	require.False(t, east.TemplateElsewhere())
	require.Equal(t, "east", east.Judge())
	require.Contains(t, east.SourceTables(), "shard_0.t_coupon_tpl", "east tails the template table")

	west, _, err := m.ForSource("west")
	require.NoError(t, err)
	require.True(t, west.TemplateElsewhere())
	require.Equal(t, "east", west.Judge())
	require.True(t, west.FollowsTemplates(), "west keeps the rules, learnt from east")
	require.NotContains(t, west.SourceTables(), "shard_0.t_coupon_tpl", "west has no template table to tail")
	for _, rt := range west.RoleTables() {
		require.NotEqual(t, "template", rt.Role, "nor to check on its server")
	}
	var checks []string
	for _, c := range west.Checks() {
		checks = append(checks, c.String())
	}
	require.Contains(t, checks, "over_issue: on — on the sum over the sources, by the cdc of source east (it follows the budget, shard_0.t_coupon_tpl.budget)")

	broadcast, err := LoadMapping([]byte(sourcesYAML))
	require.NoError(t, err)
	w, _, err := broadcast.ForSource("west")
	require.NoError(t, err)
	require.False(t, w.TemplateElsewhere(), "a copy on every source")
	require.Equal(t, "east", w.Judge(), "the first source judges the sum")
}

func TestTemplateSourceErrors(t *testing.T) {
	cases := []struct{ name, yaml, want string }{
		{"no sources", strings.Replace(legacyYAML, "total_quota: budget}", "total_quota: budget, source: east}", 1),
			`template.source "east": the mapping names no sources`},
		{"unknown source", strings.Replace(oneSourceYAML, "source: east}", "source: north}", 1),
			`template.source "north" is not one of the sources (east, west)`},
		{"a copy named elsewhere", strings.Replace(oneSourceYAML, `user_coupon: "shard_{2..3}.t_user_coupon_{0..3}"}`,
			`user_coupon: "shard_{2..3}.t_user_coupon_{0..3}", template: shard_2.t_coupon_tpl}`, 1),
			`source "west" names template "shard_2.t_coupon_tpl", but template.source says the template table is on source "east" only`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := LoadMapping([]byte(c.yaml))
			require.ErrorContains(t, err, c.want)
		})
	}
}
