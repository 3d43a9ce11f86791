package mysqlconn_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/internal/mysqlconn"
	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/internal/tlsconf"
)

// setTLS makes s the process's TLS to MySQL until the test ends.
func setTLS(t *testing.T, s tlsconf.Settings) {
	t.Helper()
	c, err := s.Load()
	require.NoError(t, err)
	mysqlconn.SetTLS(c)
	t.Cleanup(func() { mysqlconn.SetTLS(nil) })
}

// cipher opens dsn as couponlink does and returns the session's TLS
// cipher ("" in clear), or the connection's error.
func cipher(t *testing.T, dsn string) (string, error) {
	t.Helper()
	db, err := mysqlconn.Open(dsn, 1)
	if err != nil {
		return "", err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var name, value string
	err = db.QueryRowContext(ctx, "SHOW SESSION STATUS LIKE 'Ssl_cipher'").Scan(&name, &value)
	return value, err
}

// TestTLS: a MariaDB with require_secure_transport=ON and a certificate of
// a CA made here: the SQL pool connects over TLS with the process's
// settings (client certificate included), and every way of connecting in
// clear or to the wrong CA is refused.
func TestTLS(t *testing.T) {
	ca, other := testenv.NewCA(t, "test"), testenv.NewCA(t, "other")
	m := testenv.OwnMariaDBTLS(t, ca)
	root, err := sql.Open("mysql", m.SocketDSN)
	require.NoError(t, err)
	defer root.Close()
	for _, q := range []string{
		"CREATE USER 'withcert'@'127.0.0.1' IDENTIFIED BY 'Pw-of-cert1' REQUIRE X509",
		"GRANT ALL ON *.* TO 'withcert'@'127.0.0.1'",
		"CREATE DATABASE couponlink",
	} {
		_, err := root.Exec(q)
		require.NoError(t, err, q)
	}

	t.Run("clear refused", func(t *testing.T) {
		_, err := cipher(t, m.ServerDSN)
		// MariaDB answers a connection in clear under
		// require_secure_transport "Access denied"; the same user over TLS
		// is let in (below)
		assert.ErrorContains(t, err, "Access denied for user 'root'@'127.0.0.1'", "require_secure_transport refuses a connection in clear")
	})
	t.Run("verify", func(t *testing.T) {
		setTLS(t, tlsconf.Settings{Mode: tlsconf.Verify, CA: ca.File})
		c, err := cipher(t, m.ServerDSN)
		require.NoError(t, err)
		assert.NotEmpty(t, c, "the session is encrypted")
		cfg, err := mysqlconn.Config(m.ServerDSN + "couponlink")
		require.NoError(t, err)
		assert.Equal(t, "couponlink-127.0.0.1", cfg.TLSConfig, "a formatted DSN keeps the TLS (by its registered name)")
		c, err = cipher(t, cfg.FormatDSN())
		require.NoError(t, err)
		assert.NotEmpty(t, c)
	})
	t.Run("DSN tls wins", func(t *testing.T) {
		setTLS(t, tlsconf.Settings{Mode: tlsconf.Verify, CA: ca.File})
		_, err := cipher(t, m.ServerDSN+"?tls=false")
		assert.ErrorContains(t, err, "Access denied", "the DSN's tls=false is in clear, and refused")
		c, err := cipher(t, m.ServerDSN+"?tls=skip-verify")
		require.NoError(t, err)
		assert.NotEmpty(t, c)
	})
	t.Run("wrong CA", func(t *testing.T) {
		setTLS(t, tlsconf.Settings{Mode: tlsconf.Verify, CA: other.File})
		_, err := cipher(t, "app:Secret-pw9@"+m.ServerDSN[len("root@"):])
		require.Error(t, err)
		assert.Contains(t, err.Error(), "the server's TLS certificate is refused (TLS mode verify, checked against the CA file "+other.File+")")
		assert.Contains(t, err.Error(), "certificate signed by unknown authority")
		assert.NotContains(t, err.Error(), "Secret-pw9")
	})
	t.Run("skip-verify", func(t *testing.T) {
		setTLS(t, tlsconf.Settings{Mode: tlsconf.SkipVerify})
		c, err := cipher(t, m.ServerDSN)
		require.NoError(t, err)
		assert.NotEmpty(t, c)
	})
	t.Run("client certificate", func(t *testing.T) {
		dsn := "withcert:Pw-of-cert1@tcp(" + m.Addr + ")/"
		setTLS(t, tlsconf.Settings{Mode: tlsconf.Verify, CA: ca.File})
		_, err := cipher(t, dsn)
		assert.ErrorContains(t, err, "Access denied", "a user that REQUIRE X509 without a client certificate")
		cert, key := ca.Issue("client")
		setTLS(t, tlsconf.Settings{Mode: tlsconf.Verify, CA: ca.File, Cert: cert, Key: key})
		c, err := cipher(t, dsn)
		require.NoError(t, err)
		assert.NotEmpty(t, c)
	})
}
