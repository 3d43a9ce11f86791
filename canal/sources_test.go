package canal

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const sourcesYAML = legacyYAML + `sources:
  - {name: east, dsn: "root@tcp(127.0.0.1:3311)/couponlink", user_coupon: "shard_{0..1}.t_user_coupon_{0..3}", redemption_log: "shard_*.t_writeoff_*"}
  - {name: west, dsn_env: WEST_DSN, user_coupon: "shard_{2..3}.t_user_coupon_{0..3}", redemption_log: "shard_{2..3}.t_writeoff_{0..3}", template: shard_2.t_coupon_tpl}
`

func TestSources(t *testing.T) {
	m, err := LoadMapping([]byte(sourcesYAML))
	require.NoError(t, err)
	require.True(t, m.HasSources())
	require.Equal(t, []string{"east", "west"}, m.SourceNames())

	east, spec, err := m.ForSource("east")
	require.NoError(t, err)
	require.Equal(t, "east", east.Source())
	require.False(t, east.HasSources(), "a source's mapping is one server's")
	require.Equal(t, "shard_{0..1}.t_user_coupon_{0..3}", east.UserCoupon.Table)
	require.Equal(t, "t_coupon_tpl", east.Template.Table, "the top-level template table unless the source names its own")
	require.Equal(t, "root@tcp(127.0.0.1:3311)/couponlink", spec.DSN)
	require.Equal(t, "legacydb.t_user_coupon", m.qualified(m.UserCoupon.Table), "ForSource leaves the mapping itself alone")

	west, dsn, err := m.OneSource("west")
	require.Error(t, err, "WEST_DSN is not set")
	require.Contains(t, err.Error(), "WEST_DSN")
	t.Setenv("WEST_DSN", "root@tcp(127.0.0.1:3312)/couponlink")
	west, dsn, err = m.OneSource("west")
	require.NoError(t, err)
	require.Equal(t, "root@tcp(127.0.0.1:3312)/couponlink", dsn)
	require.Equal(t, "shard_2.t_coupon_tpl", west.Template.Table)

	_, _, err = m.OneSource("")
	require.ErrorContains(t, err, "say which this process follows with -source")
	_, _, err = m.OneSource("north")
	require.ErrorContains(t, err, `source "north" is not in the mapping's sources (east, west)`)

	one, err := LoadMapping([]byte(legacyYAML))
	require.NoError(t, err)
	same, dsn, err := one.OneSource("")
	require.NoError(t, err)
	require.Same(t, one, same)
	require.Empty(t, dsn, "one server: the process's own -dsn")
	_, _, err = one.OneSource("east")
	require.ErrorContains(t, err, "the mapping names no sources")
}

func TestSourcesErrors(t *testing.T) {
	src := func(lines ...string) string { return legacyYAML + "sources:\n" + strings.Join(lines, "\n") + "\n" }
	cases := []struct{ name, yaml, want string }{
		{"no name", src(`  - {dsn: "a"}`), `sources[0].name "": a source needs a name`},
		{"bad name", src(`  - {name: "a b", dsn: "a"}`), `sources[0].name "a b"`},
		{"twice", src(`  - {name: a, dsn: "x"}`, `  - {name: a, dsn: "y"}`), `sources[1].name "a" is used twice`},
		{"no dsn", src(`  - {name: a}`), `source "a" needs exactly one of dsn`},
		{"both dsns", src(`  - {name: a, dsn: x, dsn_env: Y}`), `source "a" needs exactly one of dsn`},
		{"same server", src(`  - {name: a, dsn: x}`, `  - {name: b, dsn: x}`), `source "b" and source "a" have the same dsn`},
		{"orders without table", src(`  - {name: a, dsn: x, orders: "o_{0..3}"}`), `source "a" names orders but the mapping has no orders table`},
		{"bad set", src(`  - {name: a, dsn: x, user_coupon: "t_{3..1}"}`), `source "a": mapping: user_coupon.table`},
		{"overlap in a source", src(`  - {name: a, dsn: x, user_coupon: "t_*", redemption_log: "t_{0..3}"}`), `source "a": mapping: user_coupon.table "t_*" and redemption_log.table`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := LoadMapping([]byte(c.yaml))
			require.Error(t, err)
			require.Contains(t, err.Error(), c.want)
		})
	}
}
