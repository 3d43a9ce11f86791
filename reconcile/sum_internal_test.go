package reconcile

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The sources' copies of the template table must agree on a budget: a
// template whose copies disagree is reported and not judged; one a copy
// lacks is judged by the copies that have it.
func TestAgreedBudgets(t *testing.T) {
	parts := []partTruth{
		{name: "east", budgets: map[int64]int64{1: 100, 2: 10, 3: 5}},
		{name: "west", budgets: map[int64]int64{1: 100, 2: 12}},
		{name: "north", budgets: map[int64]int64{1: 100, 2: 10}},
	}
	budgets, diffs := agreedBudgets(parts)
	require.Equal(t, map[int64]int64{1: 100, 3: 5}, budgets)
	require.Len(t, diffs, 1)
	d := diffs[0]
	require.Equal(t, [4]string{"legacy", "2/budget", ActionNeedsReview, AllSources}, [4]string{d.Store, d.Target, d.Action, d.Source})
	require.Contains(t, d.Reason, "(10 on east, north; 12 on west)")
}
