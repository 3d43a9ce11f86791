// Package tlsconf turns the TLS settings of a connection to MySQL or Redis
// — a mode, a CA file, a client certificate and its key — into a
// *tls.Config: one rule for both, so that the two read alike
// (docs/configuration.md#tls).
package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
)

// Mode is how much of the server's certificate is checked.
type Mode string

const (
	// Off: no TLS, the connection is in clear.
	Off Mode = "off"
	// Verify: TLS; the server's certificate must chain to the CA file (or,
	// without one, to the system's roots) and name the host connected to.
	// MySQL's ssl-mode VERIFY_IDENTITY, libpq's verify-full.
	Verify Mode = "verify"
	// VerifyCA: as Verify, without the host name check (a server reached
	// by an address its certificate does not name). MySQL's VERIFY_CA.
	VerifyCA Mode = "verify-ca"
	// SkipVerify: TLS, but the server is not authenticated: encrypted
	// against a passive listener, not against a man in the middle. Only
	// this explicit name turns the check off.
	SkipVerify Mode = "skip-verify"
)

// Modes are the modes a setting accepts, for help and messages.
const Modes = "off, verify, verify-ca or skip-verify"

// ParseMode reads a mode; "" is Off.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(strings.ToLower(strings.TrimSpace(s))); m {
	case "":
		return Off, nil
	case Off, Verify, VerifyCA, SkipVerify:
		return m, nil
	}
	return "", fmt.Errorf("TLS mode %q: want %s", s, Modes)
}

// Settings are the TLS settings of one kind of server (MySQL, Redis).
type Settings struct {
	Mode Mode
	CA   string // PEM file of the CA(s) the server's certificate must chain to; "": the system's roots
	Cert string // PEM file of the client certificate, for servers that ask for one ("": none)
	Key  string // PEM file of its private key
}

// Config is a connection's TLS settings with their files read: nil is
// no TLS. For makes the *tls.Config of one server.
type Config struct {
	base  *tls.Config
	roots *x509.CertPool // nil: the system's
	mode  Mode
	trust string // what the certificate is checked against, for messages
}

// Load reads s's files, once: nil when the mode is off. Its errors name
// the file that could not be used.
func (s Settings) Load() (*Config, error) {
	mode, err := ParseMode(string(s.Mode))
	if err != nil {
		return nil, err
	}
	if mode == Off {
		if s.CA != "" || s.Cert != "" || s.Key != "" {
			return nil, errors.New("a TLS CA, certificate or key file is set but the TLS mode is off: set the mode (verify)")
		}
		return nil, nil
	}
	c := &Config{base: &tls.Config{MinVersion: tls.VersionTLS12}, mode: mode, trust: "the system's CA certificates"}
	if (s.Cert == "") != (s.Key == "") {
		return nil, errors.New("a TLS client certificate needs its key, and a key its certificate: set both")
	}
	if s.Cert != "" {
		pair, err := tls.LoadX509KeyPair(s.Cert, s.Key)
		if err != nil {
			return nil, fmt.Errorf("TLS client certificate %s and key %s: %w", s.Cert, s.Key, err)
		}
		c.base.Certificates = []tls.Certificate{pair}
	}
	if s.CA != "" {
		pem, err := os.ReadFile(s.CA)
		if err != nil {
			return nil, fmt.Errorf("TLS CA file: %w", err)
		}
		c.roots = x509.NewCertPool()
		if !c.roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("TLS CA file %s holds no PEM certificate", s.CA)
		}
		c.trust = "the CA file " + s.CA
	}
	return c, nil
}

// Mode is c's mode (Off for nil).
func (c *Config) Mode() Mode {
	if c == nil {
		return Off
	}
	return c.mode
}

// For is the *tls.Config of a connection to host (the name or address
// dialled, without the port): nil for a nil c. Its certificate check is
// crypto/tls's, done by VerifyConnection instead so that a refusal names
// the CA it was checked against and the mode (InsecureSkipVerify only
// turns off crypto/tls's own copy of the check; skip-verify has none).
func (c *Config) For(host string) *tls.Config {
	if c == nil {
		return nil
	}
	cfg := c.base.Clone()
	cfg.ServerName = host
	cfg.InsecureSkipVerify = true
	if c.mode == SkipVerify {
		return cfg
	}
	cfg.RootCAs = c.roots
	cfg.VerifyConnection = func(cs tls.ConnectionState) error { return c.verify(cs, host) }
	return cfg
}

// verify checks the server's chain against c's roots and, in Verify mode,
// that the certificate names host.
func (c *Config) verify(cs tls.ConnectionState, host string) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("the server sent no TLS certificate")
	}
	opts := x509.VerifyOptions{Roots: c.roots, Intermediates: x509.NewCertPool()}
	for _, ic := range cs.PeerCertificates[1:] {
		opts.Intermediates.AddCert(ic)
	}
	if c.mode == Verify {
		if host == "" {
			return errors.New("TLS mode verify: no host name to check the server's certificate against (verify-ca checks the CA only)")
		}
		opts.DNSName = host
	}
	if _, err := cs.PeerCertificates[0].Verify(opts); err != nil {
		return fmt.Errorf("the server's TLS certificate is refused (TLS mode %s, checked against %s): %w", c.mode, c.trust, err)
	}
	return nil
}
