package streams_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/internal/redisconn"
	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/internal/tlsconf"
	"github.com/couponlink/couponlink/streams"
	"github.com/couponlink/couponlink/webhook"
)

// send sends one event to the sink spec names and returns Send's error.
func send(t *testing.T, spec string, redisTLS *tlsconf.Config) error {
	t.Helper()
	sinks, err := streams.Open(spec, redisTLS)
	require.NoError(t, err, spec)
	defer sinks[0].Close()
	_, err = sinks[0].Send(context.Background(), []webhook.Message{{OutboxID: 1, ID: webhook.NewID(), Type: "quota.released", Body: []byte(`{}`)}})
	return err
}

// A rediss:// sink to a Redis serving TLS alone, asking for a client
// certificate and a password (an ACL user): with its own tls_ca, tls_cert
// and tls_key, or with the -redis-tls* settings, it appends; with the
// system's CAs, or in clear, it cannot.
func TestRedissSink(t *testing.T) {
	ca := testenv.NewCA(t, "test")
	srv := testenv.OwnRedisTLS(t, ca, "--requirepass", "Admin-pw-1")
	cert, key := ca.Issue("client")
	global, err := tlsconf.Settings{Mode: tlsconf.Verify, CA: ca.File, Cert: cert, Key: key}.Load()
	require.NoError(t, err)
	admin := "rediss://:Admin-pw-1@" + srv.Addr + "?stream=ev"
	require.NoError(t, send(t, admin, global), "the default user, the global TLS settings")

	own := "?stream=ev&tls_ca=" + ca.File + "&tls_cert=" + cert + "&tls_key=" + key
	rdb, err := redisconn.Open(redisconn.Options{Addr: srv.Addr, Password: "Admin-pw-1", TLS: global})
	require.NoError(t, err)
	defer rdb.Close()
	ctx := context.Background()
	require.NoError(t, rdb.Do(ctx, "ACL", "SETUSER", "couponlink", "on", ">App-pw-4", "~*", "&*", "+@all").Err())
	require.NoError(t, send(t, "rediss://couponlink:App-pw-4@"+srv.Addr+own, nil), "an ACL user, the sink's own TLS files")
	require.NoError(t, send(t, "rediss://:Admin-pw-1@"+srv.Addr+own+"&name=r2", global), "its own files win")

	err = send(t, "rediss://:Admin-pw-1@"+srv.Addr+"?stream=ev", nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the system's CA certificates")
	err = send(t, "redis://:Admin-pw-1@"+srv.Addr+"?stream=ev", global)
	require.Error(t, err, "redis:// is in clear")
	assert.NotContains(t, err.Error(), "Admin-pw-1")
	err = send(t, "rediss://:Wrong-pw-2@"+srv.Addr+own, nil)
	require.ErrorContains(t, err, "WRONGPASS")
	assert.NotContains(t, err.Error(), "Wrong-pw-2")
	assert.EqualValues(t, 3, rdb.XLen(ctx, "ev").Val(), "the three sends that worked")
}

// The TLS parameters of a sink URL that cannot be used are refused at
// Open, without the password.
func TestSinkTLSParameters(t *testing.T) {
	for spec, want := range map[string]string{
		"redis://:Pw-3@127.0.0.1:1?tls_ca=/x":                   "are for a rediss:// or kafkas:// URL",
		"rediss://:Pw-3@127.0.0.1:1?tls_ca=/nonexistent/ca.pem": "TLS (tls_ca, tls_cert, tls_key): TLS CA file",
		"rediss://:Pw-3@127.0.0.1:1?tls_cert=/x":                "needs its key",
		"rediss://:Pw-3@127.0.0.1:1?skip_verify=maybe":          "skip_verify is not true or false",
	} {
		_, err := streams.Open(spec, nil)
		require.Error(t, err, spec)
		assert.Contains(t, err.Error(), want, spec)
		assert.NotContains(t, err.Error(), "Pw-3", spec)
	}
}
