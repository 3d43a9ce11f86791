package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// couponlink cdc refuses a -source it cannot follow before it connects
// anywhere, saying what to do: -source without a mapping, a mapping with
// sources and no -source, an unknown source, a source (its own or a peer's)
// whose dsn_env is unset, and Redis owner mode with sources.
func TestCDCSourceErrors(t *testing.T) {
	mapping := filepath.Join(t.TempDir(), "sources.yaml")
	require.NoError(t, os.WriteFile(mapping, []byte(`
user_coupon: {table: "s_{0..1}.uc", id: id, template: tpl, status: st}
status: {AVAILABLE: [0], USED: [1], EXPIRED: [2]}
redemption_evidence: none
template: {table: s_0.tpl, id: id, total_quota: budget}
sources:
  - {name: east, dsn: "root@tcp(127.0.0.1:1)/couponlink"}
  - {name: west, dsn_env: COUPONLINK_TEST_UNSET_WEST_DSN}
`), 0o600))
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"-source", "east"}, `-source "east" needs -mapping`},
		{[]string{"-mapping", mapping}, "the mapping names several sources (east, west): say which this process follows with -source (COUPONLINK_SOURCE)"},
		{[]string{"-mapping", mapping, "-source", "north"}, `source "north" is not in the mapping's sources (east, west)`},
		{[]string{"-mapping", mapping, "-source", "west"}, "the environment variable COUPONLINK_TEST_UNSET_WEST_DSN (its dsn_env) is not set"},
		{[]string{"-mapping", mapping, "-source", "east", "-redis-mode", "owner"}, "-redis-mode owner: with several sources no one cdc knows a template's whole stock"},
	}
	for i, c := range cases {
		if i == len(cases)-1 {
			t.Setenv("COUPONLINK_TEST_UNSET_WEST_DSN", "root@tcp(127.0.0.1:2)/couponlink") // a peer's DSN is needed too
		}
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"cdc", "-metrics-addr", ""}, c.args...), &stdout, &stderr)
		require.NotZero(t, code, "%v", c.args)
		require.Contains(t, stderr.String(), c.want, "%v", c.args)
	}
}
