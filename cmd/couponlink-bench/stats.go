package main

import (
	"cmp"
	"slices"
	"time"
)

// The bench's arithmetic: percentiles, medians, ratios and per-row costs.

// latStats summarises lags.
type latStats struct {
	N             int
	P50, P99, Max time.Duration
	Negative      int // seen before the client's COMMIT returned (clamped to 0)
}

// summarize clamps ds's negative values to 0 (counting them) and sorts it.
func summarize(ds []time.Duration) latStats {
	s := latStats{N: len(ds)}
	if len(ds) == 0 {
		return s
	}
	for i, d := range ds {
		if d < 0 {
			ds[i] = 0
			s.Negative++
		}
	}
	slices.Sort(ds)
	s.P50, s.P99, s.Max = pct(ds, 0.50), pct(ds, 0.99), ds[len(ds)-1]
	return s
}

// pct is the p-quantile of sorted ds (nearest rank).
func pct(ds []time.Duration, p float64) time.Duration {
	i := int(float64(len(ds))*p+0.5) - 1
	return ds[min(max(i, 0), len(ds)-1)]
}

// medianOf is the median of xs (of an even count: the mean of the middle
// two); 0 when empty.
func medianOf(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}

// medianBy is the element of median key (of an even count: the upper of
// the middle two); the zero value when empty.
func medianBy[T any, K cmp.Ordered](xs []T, key func(T) K) T {
	var zero T
	if len(xs) == 0 {
		return zero
	}
	s := slices.Clone(xs)
	slices.SortStableFunc(s, func(a, b T) int { return cmp.Compare(key(a), key(b)) })
	return s[len(s)/2]
}

// mapped is f of each of xs.
func mapped[T, U any](xs []T, f func(T) U) []U {
	out := make([]U, 0, len(xs))
	for _, x := range xs {
		out = append(out, f(x))
	}
	return out
}

// perRow is d shared over n rows; 0 when there are none.
func perRow[N int | int64](d time.Duration, n N) time.Duration {
	if n <= 0 {
		return 0
	}
	return d / time.Duration(n)
}

// ratioDur is a ÷ b; 0 when b is not positive.
func ratioDur(a, b time.Duration) float64 {
	if b <= 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// coresOver is the CPU time d as cores used over the wall time took.
func coresOver(d, took time.Duration) float64 { return d.Seconds() / took.Seconds() }
