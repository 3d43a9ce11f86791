package settings

import (
	"fmt"

	"github.com/couponlink/couponlink/internal/mysqlconn"
	"github.com/couponlink/couponlink/internal/tlsconf"
)

// tlsFlags adds the four TLS settings of a kind of server to f: -<kind>-tls
// (the mode), -<kind>-tls-ca, -<kind>-tls-cert and -<kind>-tls-key, from
// COUPONLINK_<KIND>_TLS, _TLS_CA, _TLS_CERT and _TLS_KEY; use, once Parse
// has read them, gets their files read (nil: no TLS). An error names the
// variables.
func tlsFlags(f *Flags, kind, env, server string, use func(*tlsconf.Config)) {
	mode := f.EnvString(kind+"-tls", env, "off", "`mode` of TLS to "+server+": "+tlsconf.Modes+
		" (verify: the certificate must chain to -"+kind+"-tls-ca, else to the system's CAs, and name the host; verify-ca: the CA only; skip-verify: encrypted, the server not authenticated)")
	ca := f.EnvString(kind+"-tls-ca", env+"_CA", "", "`file` (PEM) of the CA certificates "+server+"'s certificate must chain to (empty: the system's)")
	cert := f.EnvString(kind+"-tls-cert", env+"_CERT", "", "`file` (PEM) of the client certificate to present to "+server+" (empty: none)")
	key := f.EnvString(kind+"-tls-key", env+"_KEY", "", "`file` (PEM) of the client certificate's private key")
	f.AfterParse(func() error {
		c, err := tlsconf.Settings{Mode: tlsconf.Mode(*mode), CA: *ca, Cert: *cert, Key: *key}.Load()
		if err != nil {
			return fmt.Errorf("%s TLS (-%s-tls* [%s*]): %w", server, kind, env, err)
		}
		use(c)
		return nil
	})
}

// registerMySQLTLS adds -mysql-tls... to f: every connection of the
// process to MySQL (the SQL pools, the binlog stream) uses them
// (mysqlconn.SetTLS), unless its DSN has a tls= parameter of its own.
func registerMySQLTLS(f *Flags) {
	tlsFlags(f, "mysql", "COUPONLINK_MYSQL_TLS", "MySQL", mysqlconn.SetTLS)
}

// registerTLS adds -redis-tls... to f: r.TLS.
func (r *Redis) registerTLS(f *Flags) {
	tlsFlags(f, "redis", "COUPONLINK_REDIS_TLS", "Redis", func(c *tlsconf.Config) { r.TLS = c })
}
