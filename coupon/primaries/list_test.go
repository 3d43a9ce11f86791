package primaries

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

func TestParse(t *testing.T) {
	ps, err := Parse([]byte(`
primaries:
  - {name: p0, dsn: "root@tcp(db0:3306)/couponlink"}
  - name: p1
    dsn_env: P1_DSN
`), env(map[string]string{"P1_DSN": "app:pw@tcp(db1:3306)/couponlink"}))
	require.NoError(t, err)
	assert.Equal(t, []Primary{{Name: "p0", DSN: "root@tcp(db0:3306)/couponlink"}, {Name: "p1", DSN: "app:pw@tcp(db1:3306)/couponlink"}}, ps)

	for file, says := range map[string]string{
		``:                      "the file is empty",
		`primaries: []`:         "no primaries listed",
		`primary: [{name: p0}]`: "field primary not found",
		`primaries: [{name: p0, dsn: "root@tcp(a:1)/c", weight: 2}]`:                          "field weight not found",
		`primaries: [{name: "p 0", dsn: "root@tcp(a:1)/c"}]`:                                  `name "p 0" must be`,
		`primaries: [{name: p0, dsn: "root@tcp(a:1)/c"}, {name: p0, dsn: "root@tcp(b:1)/c"}]`: "primaries[1] (p0): the name is already used by primaries[0]",
		`primaries: [{name: p0, dsn: "root@tcp(a:1)/c", dsn_env: X}]`:                         "give dsn or dsn_env, not both",
		`primaries: [{name: p0}]`:                                                                       "dsn or dsn_env is required",
		`primaries: [{name: p0, dsn_env: UNSET}]`:                                                       "dsn_env UNSET is not set",
		`primaries: [{name: p0, dsn: "root:s3cret@tcp(a:1)/"}]`:                                         "root:xxxxx@tcp(a:1)/ names no database",
		`primaries: [{name: p0, dsn: "root@tcp(a:1)/c"}, {name: p1, dsn: "app@tcp(a:1)/c?timeout=1s"}]`: "tcp(a:1)/c is already primary p0",
	} {
		_, err := Parse([]byte(file), env(nil))
		require.Error(t, err, file)
		assert.Contains(t, err.Error(), says, file)
		assert.NotContains(t, err.Error(), "s3cret")
	}
}

func TestOwner(t *testing.T) {
	for _, c := range []struct {
		id   int64
		n    int
		want int
	}{
		{1, 1, 0}, {7, 1, 0}, {1, 2, 0}, {2, 2, 1}, {3, 2, 0}, {4, 2, 1},
		{1, 3, 0}, {2, 3, 1}, {3, 3, 2}, {4, 3, 0}, {0, 2, -1}, {-3, 2, -1},
		{1<<63 - 1, 2, 0}, // (2^63 - 2) mod 2
	} {
		assert.Equal(t, c.want, Owner(c.id, c.n), "Owner(%d, %d)", c.id, c.n)
	}
}
