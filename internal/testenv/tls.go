package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority of the test's own (crypto/x509, ECDSA
// P-256): File is its certificate (PEM), what a client's TLS CA setting
// names; Issue makes certificates it signs.
type CA struct {
	t    testing.TB
	dir  string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	File string
}

// NewCA makes a CA named name in a temporary directory.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{SerialNumber: serial(t), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("CA certificate: %v", err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &CA{t: t, dir: t.TempDir(), cert: cert, key: key}
	ca.File = ca.write(name+"-ca.pem", "CERTIFICATE", der)
	return ca
}

// Issue makes a certificate named name signed by the CA, for hosts (IP
// addresses or DNS names; none: a client's certificate), and returns the
// PEM files of the certificate and of its key.
func (ca *CA) Issue(name string, hosts ...string) (certFile, keyFile string) {
	ca.t.Helper()
	key := newKey(ca.t)
	tmpl := &x509.Certificate{SerialNumber: serial(ca.t), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		ca.t.Fatalf("certificate %s: %v", name, err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		ca.t.Fatalf("key of %s: %v", name, err)
	}
	return ca.write(name+".pem", "CERTIFICATE", der), ca.write(name+"-key.pem", "PRIVATE KEY", kder)
}

func (ca *CA) write(name, kind string, der []byte) string {
	ca.t.Helper()
	p := filepath.Join(ca.dir, name)
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		ca.t.Fatal(err)
	}
	return p
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// OwnMariaDBTLS is OwnMariaDB serving TLS with a certificate of ca for
// 127.0.0.1 and localhost, and require_secure_transport=ON: the server
// refuses a TCP connection in clear (ServerDSN's, as is). SocketDSN, root's
// DSN on its unix socket (which the server accepts in clear), is for the
// test's own set-up.
func OwnMariaDBTLS(t testing.TB, ca *CA) *MariaDB {
	t.Helper()
	cert, key := ca.Issue("mariadb", "127.0.0.1", "localhost")
	return ownMariaDB(t, 1, "--ssl-ca="+ca.File, "--ssl-cert="+cert, "--ssl-key="+key, "--require-secure-transport=ON")
}

// OwnRedisTLS is OwnRedis serving TLS alone (no port in clear) with a
// certificate of ca for 127.0.0.1 and localhost; a client must present a
// certificate of ca too (tls-auth-clients yes). extra are more settings,
// as OwnRedis's (e.g. "--requirepass", "secret").
func OwnRedisTLS(t testing.TB, ca *CA, extra ...string) *Server {
	t.Helper()
	cert, key := ca.Issue("redis", "127.0.0.1", "localhost")
	bin := lookBin("redis-server", "/usr/bin/redis-server")
	p := ownProcess(t, "redis-server", func(dir, port string) []string {
		return append([]string{bin, "--bind", "127.0.0.1", "--port", "0", "--tls-port", port, "--save", "", "--appendonly", "no",
			"--dir", dir, "--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-cert-file", ca.File, "--tls-auth-clients", "yes"}, extra...)
	})
	return &Server{p: p, Addr: p.addr}
}
