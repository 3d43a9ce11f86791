package redisconn_test

import (
	"context"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/internal/redisconn"
	"github.com/couponlink/couponlink/internal/testenv"
)

// Slot agrees with the server's CLUSTER KEYSLOT (hash tags, empty tags,
// unicode); OnEachMaster names one key on each master; a list of
// addresses and one address with Cluster both open a cluster client.
func TestClusterSlotsAndMasters(t *testing.T) {
	cluster := testenv.OwnRedisCluster(t)
	ctx := context.Background()
	rdb := cluster.Client()
	for _, k := range []string{"foo", "couponlink:stock:{42}:app", "couponlink:stock:{42}", "a{}b", "{}{x}", "x{y", "{ü}:1", ""} {
		require.EqualValues(t, rdb.ClusterKeySlot(ctx, k).Val(), redisconn.Slot(k), "slot of %q", k)
	}
	keys, err := redisconn.OnEachMaster(ctx, rdb, "p:epoch")
	require.NoError(t, err)
	require.Len(t, keys, 3)
	for _, k := range keys {
		require.NoError(t, rdb.Set(ctx, k, 1, 0).Err())
	}
	var mu sync.Mutex // ForEachMaster calls fn on the masters at once
	held := map[string]int64{}
	require.NoError(t, redisconn.EachMaster(ctx, rdb, func(ctx context.Context, node *redis.Client) error {
		n, err := node.DBSize(ctx).Result()
		mu.Lock()
		held[node.Options().Addr] = n
		mu.Unlock()
		return err
	}))
	require.Equal(t, map[string]int64{cluster.Addrs[0]: 1, cluster.Addrs[1]: 1, cluster.Addrs[2]: 1}, held, "one marker on each master")
	one, err := redisconn.Open(redisconn.Options{Addr: cluster.Addrs[0], Cluster: true})
	require.NoError(t, err)
	defer one.Close()
	require.IsType(t, &redis.ClusterClient{}, one)
	found, err := redisconn.ScanPrefix(ctx, one, "p:epoch")
	require.NoError(t, err)
	require.ElementsMatch(t, keys, found, "a scan visits every master")

	single, err := redisconn.OnEachMaster(ctx, redis.NewClient(&redis.Options{Addr: cluster.Addrs[0]}), "p:epoch")
	require.NoError(t, err)
	require.Equal(t, []string{"p:epoch"}, single, "a single Redis keeps the name")
}
