package settings

import (
	"errors"
	"io"
	"log/slog"
	"strings"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/internal/redact"
	"github.com/couponlink/couponlink/internal/redisconn"
	"github.com/couponlink/couponlink/internal/tlsconf"
)

// ErrNoDSN is the error of a command run without a database.
var ErrNoDSN = errors.New("no MySQL database: set COUPONLINK_MYSQL_DSN (or -dsn), e.g. " +
	"'couponlink:PASSWORD@tcp(db:3306)/couponlink'; `make run` and deploy/local/servers.sh env set it for the local servers")

// NeedDSN is ErrNoDSN when dsn is empty: -dsn has no default, so that a
// production binary never reaches a development database by accident.
func NeedDSN(dsn string) error {
	if strings.TrimSpace(dsn) == "" {
		return ErrNoDSN
	}
	return nil
}

// Database is -dsn, couponlink's database [COUPONLINK_MYSQL_DSN], and
// the TLS of every connection to MySQL (-mysql-tls..., see tls.go).
type Database struct {
	DSN *string
}

// Register adds -dsn to f; -h shows its default (the environment's DSN)
// with the password hidden.
func (d *Database) Register(f *Flags) {
	d.DSN = f.EnvRedacted("dsn", "COUPONLINK_MYSQL_DSN", "", "MySQL DSN of couponlink's database, go-sql-driver form (required; no default)")
	registerMySQLTLS(f)
}

// Redis is the Redis of the stock keys: -redis [COUPONLINK_REDIS_ADDR],
// -redis-cluster, -redis-username, -redis-password, -redis-mode and
// -key-prefix.
type Redis struct {
	Addr     *string // empty: no Redis
	Cluster  *bool
	Username *string       // empty: the default user
	Password func() string // a secret; empty: none
	Mode     *string       // inventory.ParseRedisMode's
	Prefix   *string
	// TLS is the connections' TLS (-redis-tls..., see tls.go), read by
	// Parse: nil is none.
	TLS *tlsconf.Config
	// AddrUse and ModeUse are the help of -redis and -redis-mode: what the
	// command does with Redis.
	AddrUse, ModeUse string
}

// Register adds the Redis flags to f.
func (r *Redis) Register(f *Flags) {
	r.Addr = f.EnvRedacted("redis", "COUPONLINK_REDIS_ADDR", "", r.AddrUse)
	r.Cluster = f.EnvBool("redis-cluster", "COUPONLINK_REDIS_CLUSTER", false, "-redis names a Redis Cluster even when it is one address (two or more always are)")
	r.Username = f.EnvString("redis-username", "COUPONLINK_REDIS_USERNAME", "", "ACL user couponlink authenticates to Redis as, with -redis-password (empty: the default user)")
	r.Password = f.EnvSecret("redis-password", "COUPONLINK_REDIS_PASSWORD", "password couponlink authenticates to Redis with (requirepass, or the ACL user's; empty: none); a redis:// URL's user:password in -redis wins")
	r.Mode = f.EnvString("redis-mode", "COUPONLINK_REDIS_MODE", "", r.ModeUse)
	r.Prefix = f.EnvString("key-prefix", "COUPONLINK_KEY_PREFIX", "couponlink:", "prefix of couponlink's Redis keys")
	r.registerTLS(f)
}

// Options are the connection's settings the flags give (the address
// list, cluster, credentials and TLS); the caller adds its timeouts.
func (r *Redis) Options() redisconn.Options {
	return redisconn.Options{Addr: *r.Addr, Cluster: *r.Cluster, Username: *r.Username, Password: r.Password(), TLS: r.TLS}
}

// Mapping is a legacy schema's mapping file, -mapping
// [COUPONLINK_MAPPING], and with a mapping that names several servers,
// -source [COUPONLINK_SOURCE].
type Mapping struct {
	File   *string // empty: the reference schema
	Source *string
	// FileUse and SourceUse are the help of -mapping and -source: what the
	// command does with them.
	FileUse, SourceUse string
}

// Register adds -mapping and -source to f.
func (m *Mapping) Register(f *Flags) {
	m.File = f.EnvString("mapping", "COUPONLINK_MAPPING", "", m.FileUse)
	m.Source = f.EnvString("source", "COUPONLINK_SOURCE", "", m.SourceUse)
}

// Checkpoint is -name [COUPONLINK_CDC_NAME], the cdc's checkpoint name.
type Checkpoint struct {
	Name *string
	Use  string // the help of -name
}

// Register adds -name to f.
func (c *Checkpoint) Register(f *Flags) {
	c.Name = f.EnvString("name", "COUPONLINK_CDC_NAME", "default", c.Use)
}

// Metrics is -metrics-addr, where a daemon serves /metrics, /healthz and
// /status.
type Metrics struct {
	Addr *string // empty: none
	// Daemon is "cdc" or "reconcile": each has its own variable
	// (COUPONLINK_CDC_METRICS_ADDR, COUPONLINK_RECONCILE_METRICS_ADDR) and
	// port, so that both run on one host.
	Daemon string
	Use    string // the help of -metrics-addr
}

// metricsAddrs are the daemons' variables and default addresses of
// -metrics-addr.
var metricsAddrs = map[string]struct{ env, addr string }{
	"cdc":       {"COUPONLINK_CDC_METRICS_ADDR", "127.0.0.1:9464"},
	"reconcile": {"COUPONLINK_RECONCILE_METRICS_ADDR", "127.0.0.1:9465"},
}

// Register adds -metrics-addr to f.
func (m *Metrics) Register(f *Flags) {
	d, ok := metricsAddrs[m.Daemon]
	if !ok {
		panic("settings: no metrics address for daemon " + m.Daemon)
	}
	m.Addr = f.EnvString("metrics-addr", d.env, d.addr, m.Use)
}

// Logging is -log-level [COUPONLINK_LOG_LEVEL]; a level slog does not know
// is a usage error, in the flag or in the environment, never silently
// info.
type Logging struct {
	Level *slog.Level
}

// Register adds -log-level to f.
func (l *Logging) Register(f *Flags) {
	l.Level = new(slog.Level)
	f.EnvVar(levelValue{l.Level}, "log-level", "COUPONLINK_LOG_LEVEL", "`level` of the logs: debug, info, warn or error")
}

// Logger is a text logger on w at the level of the flags, through
// redact.Handler (no secret of a setting reaches a line, whatever error
// quotes it); go-redis's own notes, process-wide, go to it too.
func (l *Logging) Logger(w io.Writer) *slog.Logger {
	log := slog.New(redact.Handler(slog.NewTextHandler(w, &slog.HandlerOptions{Level: *l.Level})))
	redisconn.SetLogger(log)
	return log
}

// levelValue is a slog.Level as a flag.Value.
type levelValue struct{ l *slog.Level }

func (v levelValue) String() string {
	if v.l == nil { // the flag package's zero value, for -h
		return ""
	}
	return strings.ToLower(v.l.String())
}

func (v levelValue) Set(s string) error {
	if err := v.l.UnmarshalText([]byte(s)); err != nil {
		return errors.New("not a log level (debug, info, warn, error)")
	}
	return nil
}

// Snapshot is -snapshot-position [COUPONLINK_SNAPSHOT_POSITION]: how the
// cdc's bootstrap and the reconciler's truth take a consistent snapshot's
// binlog position (the command gives it to inventory.SetSnapshotMethod).
type Snapshot struct {
	Method *canal.SnapshotMethod
}

// Register adds -snapshot-position to f.
func (s *Snapshot) Register(f *Flags) {
	s.Method = new(canal.SnapshotMethod)
	*s.Method = canal.SnapshotAuto
	f.EnvVar(snapshotValue{s.Method}, "snapshot-position", "COUPONLINK_SNAPSHOT_POSITION",
		"`method` of taking a consistent snapshot's binlog position (the cdc's bootstrap and -rebuild, the reconciler's truth): "+
			"auto, status (MariaDB/Percona binlog_snapshot_%), lock (FLUSH TABLES WITH READ LOCK, else LOCK TABLES on the "+
			"mapped tables) or tables (LOCK TABLES only)")
}

// snapshotValue is a canal.SnapshotMethod as a flag.Value.
type snapshotValue struct{ m *canal.SnapshotMethod }

func (v snapshotValue) String() string {
	if v.m == nil { // the flag package's zero value, for -h
		return ""
	}
	return string(*v.m)
}

func (v snapshotValue) Set(s string) error {
	m, err := canal.ParseSnapshotMethod(s)
	if err != nil {
		return errors.New("not a snapshot position method (auto, status, lock or tables)")
	}
	*v.m = m
	return nil
}
