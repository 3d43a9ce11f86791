package sink

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/inventory"
)

// The claimed users' set takes a write only if its stamp is not older than
// the set's: an older state (a late batch, a cdc that lost the lead) never
// overwrites a newer one, by an addition, a removal or a rebuild's swap; an
// equal stamp (the chunks of one write) is taken; a reset swaps whatever
// the stamp.
func TestClaimedOlderStampRefused(t *testing.T) {
	ctx := context.Background()
	r := &stock{rdb: testenv.Redis(t), keys: inventory.Keys{Prefix: testenv.KeyPrefix(t)}}
	set := r.keys.Claimed(7)
	members := func() []string {
		m, err := r.rdb.SMembers(ctx, set).Result()
		require.NoError(t, err)
		return m
	}
	t.Cleanup(func() { r.rdb.Del(ctx, set, r.keys.Stamps(7), set+":rebuild") })

	require.NoError(t, r.writeClaimed(ctx, map[int64][]string{7: {"ann", "bob"}}, nil, 100))
	require.ElementsMatch(t, []string{"ann", "bob"}, members())

	require.NoError(t, r.writeClaimed(ctx, nil, map[int64][]string{7: {"ann"}}, 99))
	require.ElementsMatch(t, []string{"ann", "bob"}, members(), "an older removal was applied")
	require.NoError(t, r.writeClaimed(ctx, map[int64][]string{7: {"cid"}}, nil, 50))
	require.ElementsMatch(t, []string{"ann", "bob"}, members(), "an older addition was applied")
	require.NoError(t, r.replaceClaimed(ctx, map[int64][]string{7: {"dan"}}, 98, false))
	require.ElementsMatch(t, []string{"ann", "bob"}, members(), "an older rebuild was swapped in")
	require.Zero(t, r.rdb.Exists(ctx, set+":rebuild").Val(), "a refused rebuild leaves its copy behind")

	require.NoError(t, r.writeClaimed(ctx, map[int64][]string{7: {"cid"}}, map[int64][]string{7: {"ann"}}, 100))
	require.ElementsMatch(t, []string{"bob", "cid"}, members(), "a write of the same stamp was refused")
	require.NoError(t, r.replaceClaimed(ctx, map[int64][]string{7: {"dan"}}, 150, false))
	require.ElementsMatch(t, []string{"dan"}, members(), "a newer rebuild")
	require.NoError(t, r.replaceClaimed(ctx, map[int64][]string{7: nil}, 10, true))
	require.Empty(t, members(), "a reset rebuild of no member")
	require.Equal(t, "10", r.rdb.HGet(ctx, r.keys.Stamps(7), set).Val(), "a reset rebuild stamps its own position")
}
