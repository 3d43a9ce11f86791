package settings

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/internal/mysqlconn"
	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/internal/tlsconf"
)

// The TLS settings: read by Parse into the process's MySQL TLS (every DSN
// without tls= of its own) and the Redis group's; a bad mode or a file
// that cannot be used is a usage error naming the settings.
func TestTLSSettings(t *testing.T) {
	ca := testenv.NewCA(t, "test")
	parse := func(args ...string) (*Redis, string, error) {
		var out bytes.Buffer
		f := New("couponlink t", "", &out)
		var db Database
		r := &Redis{}
		f.Add(&db, r)
		err := f.Parse(args)
		return r, out.String(), err
	}
	t.Cleanup(func() { mysqlconn.SetTLS(nil) })

	r, _, err := parse("-mysql-tls", "verify-ca", "-mysql-tls-ca", ca.File, "-redis-tls", "skip-verify")
	require.NoError(t, err)
	cfg, err := mysqlconn.Config("app:pw@tcp(db.example:3306)/couponlink")
	require.NoError(t, err)
	assert.Equal(t, "couponlink-db.example", cfg.TLSConfig, "every DSN gets the process's TLS")
	assert.Equal(t, "db.example", cfg.TLS.ServerName)
	assert.Equal(t, tlsconf.SkipVerify, r.TLS.Mode())

	t.Setenv("COUPONLINK_REDIS_TLS", "verify")
	t.Setenv("COUPONLINK_REDIS_TLS_CA", ca.File)
	r, _, err = parse()
	require.NoError(t, err)
	assert.Equal(t, tlsconf.Verify, r.TLS.Mode(), "from the environment")
	cfg, err = mysqlconn.Config("app:pw@tcp(db.example:3306)/couponlink")
	require.NoError(t, err)
	assert.Empty(t, cfg.TLSConfig, "off again: a command without TLS sets none")
	assert.Nil(t, cfg.TLS)

	for args, want := range map[string]string{
		"-mysql-tls=on":                     `MySQL TLS (-mysql-tls* [COUPONLINK_MYSQL_TLS*]): TLS mode "on": want off, verify, verify-ca or skip-verify`,
		"-mysql-tls-ca=" + ca.File:          "MySQL TLS (-mysql-tls* [COUPONLINK_MYSQL_TLS*]): a TLS CA, certificate or key file is set but the TLS mode is off",
		"-redis-tls-ca=/nonexistent/ca.pem": "Redis TLS (-redis-tls* [COUPONLINK_REDIS_TLS*]): TLS CA file: open /nonexistent/ca.pem",
		"-redis-tls-cert=" + ca.File:        "Redis TLS (-redis-tls* [COUPONLINK_REDIS_TLS*]): a TLS client certificate needs its key",
	} {
		_, out, err := parse(args)
		assert.ErrorIs(t, err, ErrUsage, args)
		assert.Contains(t, out, want, args)
	}
}
