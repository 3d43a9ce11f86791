package mysqlconn

import (
	"fmt"
	"net"
	"strings"
	"sync/atomic"

	"github.com/go-sql-driver/mysql"

	"github.com/couponlink/couponlink/internal/tlsconf"
)

// tlsConfig is the process's TLS to MySQL (SetTLS); nil: none.
var tlsConfig atomic.Pointer[tlsconf.Config]

// SetTLS makes c the TLS of every connection to MySQL that Config
// configures from now on — the SQL pools and the binlog stream
// (canal.ConfigFromDSN) alike — unless the DSN has a tls= parameter of its
// own, which wins. nil: none. A command sets it once, from -mysql-tls and
// its files (internal/settings' Database).
//
// A DSN on a unix socket is left in clear: the socket is local, and
// MySQL's require_secure_transport accepts it.
func SetTLS(c *tlsconf.Config) { tlsConfig.Store(c) }

// applyTLS gives cfg the process's TLS when it has none of its own: the
// driver's config, registered under a name of its host ("couponlink-" +
// host), so that a DSN formatted from cfg (cfg.FormatDSN, as migrations
// does) keeps it.
func applyTLS(cfg *mysql.Config) error {
	c := tlsConfig.Load()
	if c == nil || cfg.TLSConfig != "" || !strings.HasPrefix(cfg.Net, "tcp") { // tcp, tcp4, tcp6; not unix
		return nil
	}
	host, _, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		host = cfg.Addr
	}
	name := "couponlink-" + host
	tc := c.For(host)
	if err := mysql.RegisterTLSConfig(name, tc); err != nil {
		return fmt.Errorf("MySQL TLS for %s: %w", host, err)
	}
	cfg.TLSConfig, cfg.TLS = name, tc
	return nil
}
