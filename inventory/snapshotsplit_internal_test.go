package inventory

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// The ranges of a split count hold every id once, whatever the bounds.
func TestIDRangesCoverEveryID(t *testing.T) {
	for _, c := range []struct {
		lo, hi int64
		n      int
	}{{1, 100, 32}, {5, 5, 8}, {1, 3, 8}, {-10, 10, 4}, {0, math.MaxInt64 - 1, 8}, {math.MinInt64 + 1, math.MaxInt64 - 1, 3}} {
		rs := idRanges(c.lo, c.hi, c.n)
		require.LessOrEqual(t, len(rs), c.n)
		require.True(t, rs[0].openLow)
		require.True(t, rs[len(rs)-1].openTop)
		for i := 1; i < len(rs); i++ {
			require.Equal(t, rs[i-1].to, rs[i].from, "%+v: contiguous", c)
			require.False(t, rs[i].openLow)
			require.False(t, rs[i-1].openTop)
		}
	}
	require.Len(t, idRanges(1, 100, 32), 25, "width 4")
	cond, args := idRange{from: 3, to: 7}.cond("`t`")
	require.Equal(t, "`t` >= ? AND `t` < ?", cond)
	require.Equal(t, []any{int64(3), int64(7)}, args)
	cond, _ = idRange{from: 3, to: 7, openLow: true, openTop: true}.cond("`t`")
	require.Equal(t, "", cond)
}
