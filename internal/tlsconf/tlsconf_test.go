package tlsconf_test

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/internal/tlsconf"
)

// server is a TLS listener on loopback with a certificate of ca for
// hosts, asking for a client certificate of ca when clientCA; each
// connection finishes its handshake and is closed.
func server(t *testing.T, ca *testenv.CA, clientCA bool, hosts ...string) string {
	t.Helper()
	certFile, keyFile := ca.Issue("server", hosts...)
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	require.NoError(t, err)
	cfg := &tls.Config{Certificates: []tls.Certificate{pair}}
	if clientCA {
		pem, _ := os.ReadFile(ca.File)
		cfg.ClientCAs = x509.NewCertPool()
		cfg.ClientCAs.AppendCertsFromPEM(pem)
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	require.NoError(t, err)
	testenv.AcceptEach(t, ln, func(c net.Conn) {
		_ = c.(*tls.Conn).Handshake()
		_ = c.Close()
	})
	return ln.Addr().String()
}

// dial connects to addr as host with s, and returns the handshake's error.
func dial(t *testing.T, s tlsconf.Settings, addr, host string) error {
	t.Helper()
	c, err := s.Load()
	require.NoError(t, err)
	conn, err := tls.Dial("tcp", addr, c.For(host))
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Handshake()
}

func TestModes(t *testing.T) {
	ca, other := testenv.NewCA(t, "test"), testenv.NewCA(t, "other")
	byIP := server(t, ca, false, "127.0.0.1")
	byName := server(t, ca, false, "db.example")

	assert.NoError(t, dial(t, tlsconf.Settings{Mode: tlsconf.Verify, CA: ca.File}, byIP, "127.0.0.1"))
	assert.NoError(t, dial(t, tlsconf.Settings{Mode: tlsconf.Verify, CA: ca.File}, byName, "db.example"))

	err := dial(t, tlsconf.Settings{Mode: tlsconf.Verify, CA: other.File}, byIP, "127.0.0.1")
	require.Error(t, err, "a certificate of another CA")
	assert.Contains(t, err.Error(), "the server's TLS certificate is refused (TLS mode verify, checked against the CA file "+other.File+")")
	assert.Contains(t, err.Error(), "certificate signed by unknown authority")

	err = dial(t, tlsconf.Settings{Mode: tlsconf.Verify}, byIP, "127.0.0.1")
	require.Error(t, err, "a private CA is not among the system's")
	assert.Contains(t, err.Error(), "checked against the system's CA certificates")

	err = dial(t, tlsconf.Settings{Mode: tlsconf.Verify, CA: ca.File}, byName, "127.0.0.1")
	require.Error(t, err, "the certificate does not name the host dialled")
	assert.Contains(t, err.Error(), "cannot validate certificate for 127.0.0.1")
	assert.NoError(t, dial(t, tlsconf.Settings{Mode: tlsconf.VerifyCA, CA: ca.File}, byName, "127.0.0.1"), "verify-ca checks the CA only")
	assert.Error(t, dial(t, tlsconf.Settings{Mode: tlsconf.VerifyCA, CA: other.File}, byName, "127.0.0.1"), "verify-ca still checks the CA")

	assert.NoError(t, dial(t, tlsconf.Settings{Mode: tlsconf.SkipVerify}, byName, "127.0.0.1"), "skip-verify checks nothing")
}

func TestClientCertificate(t *testing.T) {
	ca := testenv.NewCA(t, "test")
	addr := server(t, ca, true, "127.0.0.1")
	cert, key := ca.Issue("client")
	assert.NoError(t, dial(t, tlsconf.Settings{Mode: tlsconf.Verify, CA: ca.File, Cert: cert, Key: key}, addr, "127.0.0.1"))
	err := dial(t, tlsconf.Settings{Mode: tlsconf.Verify, CA: ca.File}, addr, "127.0.0.1")
	if err == nil { // TLS 1.3: the server's refusal arrives with the first read
		var conn *tls.Conn
		c, _ := tlsconf.Settings{Mode: tlsconf.Verify, CA: ca.File}.Load()
		conn, err = tls.Dial("tcp", addr, c.For("127.0.0.1"))
		if err == nil {
			_, err = conn.Read(make([]byte, 1))
			_ = conn.Close()
		}
	}
	assert.ErrorContains(t, err, "certificate required", "a server that asks for a client certificate refuses a client without")
}

func TestLoadRefusals(t *testing.T) {
	ca := testenv.NewCA(t, "test")
	cert, key := ca.Issue("client")
	for _, c := range []struct {
		s    tlsconf.Settings
		want string
	}{
		{tlsconf.Settings{Mode: "on"}, `TLS mode "on": want off, verify, verify-ca or skip-verify`},
		{tlsconf.Settings{Mode: "insecure"}, `TLS mode "insecure"`},
		{tlsconf.Settings{CA: ca.File}, "the TLS mode is off: set the mode (verify)"},
		{tlsconf.Settings{Mode: tlsconf.Verify, Cert: cert}, "needs its key"},
		{tlsconf.Settings{Mode: tlsconf.Verify, Key: key}, "needs its key"},
		{tlsconf.Settings{Mode: tlsconf.Verify, Cert: key, Key: cert}, "TLS client certificate " + key},
		{tlsconf.Settings{Mode: tlsconf.Verify, CA: "/nonexistent/ca.pem"}, "TLS CA file: open /nonexistent/ca.pem"},
		{tlsconf.Settings{Mode: tlsconf.Verify, CA: key}, "holds no PEM certificate"},
	} {
		_, err := c.s.Load()
		assert.ErrorContains(t, err, c.want, "%+v", c.s)
	}
	c, err := tlsconf.Settings{Mode: "OFF"}.Load()
	assert.NoError(t, err)
	assert.Nil(t, c, "off is no TLS config")
	assert.Nil(t, c.For("h"))
	assert.Equal(t, tlsconf.Off, c.Mode())
}
