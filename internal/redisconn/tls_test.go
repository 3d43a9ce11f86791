package redisconn_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/internal/redisconn"
	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/internal/tlsconf"
)

// ping opens addr with s as couponlink does and returns PING's error.
func ping(t *testing.T, addr string, cluster bool, s tlsconf.Settings) error {
	t.Helper()
	c, err := s.Load()
	require.NoError(t, err)
	rdb, err := redisconn.Open(redisconn.Options{Addr: addr, Cluster: cluster, TLS: c, DialTimeout: 2 * time.Second})
	require.NoError(t, err)
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return rdb.Ping(ctx).Err()
}

// TestTLS: a Redis serving TLS alone, asking for a client certificate:
// the client with the CA and a certificate works; in clear, without a
// certificate, or with another CA it is refused, the latter naming the CA.
func TestTLS(t *testing.T) {
	ca, other := testenv.NewCA(t, "test"), testenv.NewCA(t, "other")
	srv := testenv.OwnRedisTLS(t, ca)
	cert, key := ca.Issue("client")

	good := tlsconf.Settings{Mode: tlsconf.Verify, CA: ca.File, Cert: cert, Key: key}
	require.NoError(t, ping(t, srv.Addr, false, good))
	c, _ := good.Load()
	rdb, err := redisconn.Open(redisconn.Options{Addr: srv.Addr, TLS: c})
	require.NoError(t, err)
	defer rdb.Close()
	ctx := context.Background()
	require.NoError(t, rdb.Set(ctx, "k", "v", 0).Err())
	assert.Equal(t, "v", rdb.Get(ctx, "k").Val())

	err = ping(t, srv.Addr, false, tlsconf.Settings{})
	assert.Error(t, err, "in clear: the server speaks TLS alone")

	err = ping(t, srv.Addr, false, tlsconf.Settings{Mode: tlsconf.Verify, CA: other.File, Cert: cert, Key: key})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "TLS to Redis "+srv.Addr+": the server's TLS certificate is refused (TLS mode verify, checked against the CA file "+other.File+")")

	err = ping(t, srv.Addr, false, tlsconf.Settings{Mode: tlsconf.Verify, CA: ca.File})
	require.Error(t, err, "tls-auth-clients yes: no client certificate")
	assert.Contains(t, err.Error(), "certificate required")

	assert.NoError(t, ping(t, srv.Addr, false, tlsconf.Settings{Mode: tlsconf.SkipVerify, Cert: cert, Key: key}))
}

// TestClusterTLS: a Redis Cluster whose nodes serve TLS alone: one seed
// address or all of them reach every master over TLS (each node's
// certificate checked for the node dialled); in clear, or with another CA,
// it is refused.
func TestClusterTLS(t *testing.T) {
	ca, other := testenv.NewCA(t, "test"), testenv.NewCA(t, "other")
	cluster := testenv.OwnRedisClusterTLS(t, ca)
	rdb := cluster.Client()
	ctx := context.Background()
	keys, err := redisconn.OnEachMaster(ctx, rdb, "p:epoch")
	require.NoError(t, err)
	require.Len(t, keys, 3)
	for _, k := range keys {
		require.NoError(t, rdb.Set(ctx, k, 1, 0).Err(), "a key on each master, over TLS")
	}
	var n atomic.Int32 // ForEachMaster calls fn on the masters at once
	require.NoError(t, redisconn.EachMaster(ctx, rdb, func(ctx context.Context, node *redis.Client) error {
		n.Add(1)
		return node.Ping(ctx).Err()
	}))
	assert.EqualValues(t, 3, n.Load())

	cert, key := ca.Issue("client")
	good := tlsconf.Settings{Mode: tlsconf.Verify, CA: ca.File, Cert: cert, Key: key}
	assert.NoError(t, ping(t, cluster.Addrs[1], true, good), "one seed node with -redis-cluster")
	assert.Error(t, ping(t, strings.Join(cluster.Addrs, ","), false, tlsconf.Settings{}), "in clear")
	err = ping(t, strings.Join(cluster.Addrs, ","), false, tlsconf.Settings{Mode: tlsconf.Verify, CA: other.File, Cert: cert, Key: key})
	assert.ErrorContains(t, err, "checked against the CA file "+other.File)
}
