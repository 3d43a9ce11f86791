package redisconn_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/internal/redisconn"
	"github.com/couponlink/couponlink/internal/testenv"
)

// TestPassword: a Redis with requirepass and an ACL user: the right
// password (the default user's, or the ACL user's with its name) works,
// in the options or in a redis:// URL, whose credentials win; a wrong one,
// or none, is refused by Open with the settings named and the value
// nowhere in the message.
func TestPassword(t *testing.T) {
	const right, wrong = "Right-pw-1", "Wrong-pw-2"
	srv := testenv.OwnRedis(t, "--requirepass", right)
	ctx := context.Background()
	admin, err := redisconn.Open(redisconn.Options{Addr: srv.Addr, Password: right})
	require.NoError(t, err)
	defer admin.Close()
	require.NoError(t, admin.Do(ctx, "ACL", "SETUSER", "couponlink", "on", ">app-pw-3", "~*", "&*", "+@all").Err())

	works := map[string]redisconn.Options{
		"password":             {Addr: srv.Addr, Password: right},
		"ACL user":             {Addr: srv.Addr, Username: "couponlink", Password: "app-pw-3"},
		"URL":                  {Addr: "redis://:" + right + "@" + srv.Addr},
		"URL with a user":      {Addr: "redis://couponlink:app-pw-3@" + srv.Addr + "/2"},
		"URL wins":             {Addr: "redis://couponlink:app-pw-3@" + srv.Addr, Password: wrong},
		"URL, escaped":         {Addr: "redis://:" + url.QueryEscape(right) + "@" + srv.Addr + "/0"},
		"URL and plain, alike": {Addr: "redis://:" + right + "@" + srv.Addr + "/0", Cluster: false},
	}
	for name, o := range works {
		rdb, err := redisconn.Open(o)
		require.NoError(t, err, name)
		assert.NoError(t, rdb.Set(ctx, "k", name, 0).Err(), name)
		_ = rdb.Close()
	}
	db2, err := redisconn.Open(redisconn.Options{Addr: "redis://:" + right + "@" + srv.Addr + "/2"})
	require.NoError(t, err)
	defer db2.Close()
	assert.Equal(t, "URL with a user", db2.Get(ctx, "k").Val(), "the URL's /2 is database 2")

	refused := map[string]redisconn.Options{
		"wrong password":   {Addr: srv.Addr, Password: wrong},
		"no password":      {Addr: srv.Addr},
		"wrong user":       {Addr: srv.Addr, Username: "nobody", Password: wrong},
		"URL's, wrong":     {Addr: "redis://:" + wrong + "@" + srv.Addr, Password: right},
		"URL's user wrong": {Addr: "redis://couponlink:" + wrong + "@" + srv.Addr},
	}
	for name, o := range refused {
		_, err := redisconn.Open(o)
		require.ErrorIs(t, err, redisconn.ErrAuth, name)
		assert.Contains(t, err.Error(), "-redis-password [COUPONLINK_REDIS_PASSWORD", name)
		assert.Regexp(t, "WRONGPASS|NOAUTH", err.Error(), name)
		assert.NotContains(t, err.Error(), wrong, name)
		assert.NotContains(t, err.Error(), right, name)
	}
}

// Open reads URLs: rediss:// is TLS (with no TLS settings, the system's
// CAs, which do not know a test CA); what it cannot read is refused
// without the password in the message.
func TestURLs(t *testing.T) {
	ca := testenv.NewCA(t, "test")
	srv := testenv.OwnRedisTLS(t, ca)
	rdb, err := redisconn.Open(redisconn.Options{Addr: "rediss://:pw-77@" + srv.Addr, DialTimeout: time.Second})
	require.NoError(t, err, "not reachable is no error of Open")
	err = rdb.Ping(context.Background()).Err()
	_ = rdb.Close()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the system's CA certificates", "TLS with the system's CAs")

	for addr, want := range map[string]string{
		"redis://:pw-77@127.0.0.1:1,rediss://:pw-77@127.0.0.1:2": "mixes redis:// and rediss://",
		"http://:pw-77@127.0.0.1:1":                              `scheme "http"`,
		"redis://:pw-77@127.0.0.1":                               "without host:port",
		"redis://:pw-77@127.0.0.1:1/x":                           `database "x"`,
		"redis://:pw-77@127.0.0.1:1?tls_ca=x":                    "takes no parameters",
		"redis://:pw-77@127.0.0.1:1/3,127.0.0.1:2":               "a Redis Cluster has database 0 alone",
		"redis://:pw-77@127.0.0.1:1,redis://:pw-78@127.0.0.1:2":  "differ from another URL's",
		"redis://:pw-77%zz@127.0.0.1:1":                          "not a URL",
	} {
		_, err := redisconn.Open(redisconn.Options{Addr: addr})
		require.Error(t, err, addr)
		assert.Contains(t, err.Error(), want, addr)
		assert.NotContains(t, err.Error(), "pw-7", addr)
	}
}

// TestClusterPassword: a Redis Cluster whose nodes want a password: Open
// with it (one seed with Cluster, or every node, or a URL) reaches every
// master; without it, it is refused.
func TestClusterPassword(t *testing.T) {
	const pw = "Cluster-pw-5"
	cluster := testenv.OwnRedisClusterAuth(t, pw)
	ctx := context.Background()
	for name, o := range map[string]redisconn.Options{
		"every node":  {Addr: strings.Join(cluster.Addrs, ","), Password: pw},
		"one seed":    {Addr: cluster.Addrs[0], Cluster: true, Password: pw},
		"URL of seed": {Addr: "redis://:" + pw + "@" + cluster.Addrs[1], Cluster: true},
	} {
		rdb, err := redisconn.Open(o)
		require.NoError(t, err, name)
		keys, err := redisconn.OnEachMaster(ctx, rdb, "p:epoch")
		require.NoError(t, err, name)
		require.Len(t, keys, 3, name)
		for _, k := range keys {
			require.NoError(t, rdb.Set(ctx, k, 1, 0).Err(), name)
		}
		_ = rdb.Close()
	}
	_, err := redisconn.Open(redisconn.Options{Addr: strings.Join(cluster.Addrs, ","), Password: "nope-9"})
	require.ErrorIs(t, err, redisconn.ErrAuth)
	assert.NotContains(t, err.Error(), "nope-9")
	_, err = redisconn.Open(redisconn.Options{Addr: cluster.Addrs[0], Cluster: true})
	require.ErrorIs(t, err, redisconn.ErrAuth, "no password")
}
