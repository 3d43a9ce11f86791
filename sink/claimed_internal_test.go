package sink

import (
	"context"
	"fmt"
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

// A claimed users' set stamped past the checkpoint (a rebuild stamps its
// snapshot's position) is no sign of a failover: only the stock keys'
// stamps say the keys are ahead of the position the cdc resumes from.
func TestClaimedStampNotAhead(t *testing.T) {
	ctx := context.Background()
	r := &stock{rdb: testenv.Redis(t), keys: inventory.Keys{Prefix: testenv.KeyPrefix(t)}}
	t.Cleanup(func() { r.rdb.Del(ctx, r.keys.Stamps(7)) })
	require.NoError(t, r.rdb.HSet(ctx, r.keys.Stamps(7), r.keys.Claimed(7), 1000, r.keys.Stock(7, "app"), 10).Err())
	ahead, err := r.stampsAhead(ctx, []int64{7}, 10)
	require.NoError(t, err)
	require.False(t, ahead, "the set's stamp counted as a stock key's")
	require.NoError(t, r.rdb.HSet(ctx, r.keys.Stamps(7), r.keys.Stock(7, "app"), 11).Err())
	ahead, err = r.stampsAhead(ctx, []int64{7}, 10)
	require.NoError(t, err)
	require.True(t, ahead, "a stock key's stamp ahead")
}

// A rebuild writes its members claimedChunk at a time: a set of more than
// a chunk is whole after the swap, a template given with no member is
// emptied, and a copy a rebuild cut short left behind is not merged in.
func TestClaimedRebuildInChunks(t *testing.T) {
	ctx := context.Background()
	r := &stock{rdb: testenv.Redis(t), keys: inventory.Keys{Prefix: testenv.KeyPrefix(t)}}
	big, empty := r.keys.Claimed(8), r.keys.Claimed(9)
	t.Cleanup(func() { r.rdb.Del(ctx, big, empty, r.keys.Stamps(8), r.keys.Stamps(9), big+":rebuild") })
	require.NoError(t, r.rdb.SAdd(ctx, big+":rebuild", "left-behind").Err())
	require.NoError(t, r.rdb.SAdd(ctx, empty, "stale").Err())

	users := make([]string, 2*claimedChunk+500)
	for i := range users {
		users[i] = fmt.Sprintf("user-%d", i)
	}
	fill := r.fillClaimed()
	for _, u := range users {
		require.NoError(t, fill.add(ctx, 8, u))
	}
	require.LessOrEqual(t, len(fill.pending[8]), claimedChunk, "a rebuild held more than a chunk of a set")
	require.NoError(t, fill.swap(ctx, []int64{9}, 100, false))

	got, err := r.rdb.SMembers(ctx, big).Result()
	require.NoError(t, err)
	require.ElementsMatch(t, users, got)
	require.Zero(t, r.rdb.Exists(ctx, empty, big+":rebuild").Val(), "the template without members kept its set, or the copy stayed")
	require.Equal(t, "100", r.rdb.HGet(ctx, r.keys.Stamps(9), empty).Val())
}
