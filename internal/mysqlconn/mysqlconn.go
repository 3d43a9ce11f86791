// Package mysqlconn is how couponlink connects to MySQL: one place that
// parses a DSN, forces the driver settings the code relies on, and keeps a
// DSN's password out of every message.
package mysqlconn

import (
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Config parses dsn and forces the settings couponlink relies on, whatever
// the DSN says:
//   - parseTime, loc=UTC: times are UTC time.Time values;
//   - interpolateParams: one round trip per statement, not prepare+execute+close;
//   - clientFoundRows off: "rows affected" counts rows changed, not rows
//     matched, as every reader of rows affected in couponlink expects. (The
//     guards of coupon.Store hold either way; this keeps the rest honest.)
//   - TLS: the process's (SetTLS) when the DSN has no tls= of its own.
//
// A parse error names the DSN with its password redacted.
func Config(dsn string) (*mysql.Config, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		// the driver's message may quote a piece of the DSN (a network name,
		// a database name), which on a malformed DSN can be the password's
		return nil, fmt.Errorf("parse MySQL DSN %s: %s", Redact(dsn), scrub(err.Error(), dsn))
	}
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	cfg.InterpolateParams = true
	cfg.ClientFoundRows = false
	if err := applyTLS(cfg); err != nil {
		return nil, err
	}
	return cfg, nil
}

// Open opens a pool of at most maxConns connections with Config's settings.
func Open(dsn string, maxConns int) (*sql.DB, error) {
	cfg, err := Config(dsn)
	if err != nil {
		return nil, err
	}
	return openConfig(cfg, dsn, maxConns)
}

func openConfig(cfg *mysql.Config, dsn string, maxConns int) (*sql.DB, error) {
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("open MySQL %s: %w", Redact(dsn), err)
	}
	db := sql.OpenDB(c)
	db.SetMaxOpenConns(maxConns)
	db.SetMaxIdleConns(maxConns)
	db.SetConnMaxLifetime(time.Hour)
	return db, nil
}

// Redact returns dsn with its password replaced by "xxxxx", for messages
// and logs. It errs on the side of hiding too much, and works on malformed
// DSNs too (see secret).
func Redact(dsn string) string {
	from, to, ok := secret(dsn)
	if !ok {
		return dsn
	}
	return dsn[:from] + "xxxxx" + dsn[to:]
}

// secret locates the password of dsn, user:password@net(addr)/db?params,
// as dsn[from:to]. The password starts after the first ':' when that comes
// before the first '@' (a user name has neither). It ends at the last '@'
// that a network name and '(' or a '/' follow — a password may hold '@',
// '/' and '?' — or, failing that, at the last '@'. With no '@' at all, a
// ':' before any '(' may still start one (user:pass typed without the
// address): it is hidden up to the next '(' or '/'.
func secret(dsn string) (from, to int, ok bool) {
	colon := strings.IndexByte(dsn, ':')
	at := strings.IndexByte(dsn, '@')
	if colon < 0 || (at >= 0 && at < colon) {
		return 0, 0, false
	}
	from = colon + 1
	if at < 0 {
		if p := strings.IndexByte(dsn, '('); p >= 0 && p < colon {
			return 0, 0, false
		}
		to = len(dsn)
		if i := strings.IndexAny(dsn[from:], "(/"); i >= 0 {
			to = from + i
		}
		return from, to, true
	}
	to = strings.LastIndexByte(dsn, '@')
	for i := to; i > colon; i = strings.LastIndexByte(dsn[:i], '@') {
		rest := strings.TrimLeft(dsn[i+1:], "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")
		if strings.HasPrefix(rest, "(") || strings.HasPrefix(rest, "/") {
			to = i
			break
		}
	}
	return from, to, true
}

// scrub hides in msg the password of dsn and every piece of it that the
// driver could quote on its own (the DSN split at its separators).
func scrub(msg, dsn string) string {
	from, to, ok := secret(dsn)
	if !ok || from == to {
		return msg
	}
	pw := dsn[from:to]
	msg = strings.ReplaceAll(msg, pw, "xxxxx")
	for _, p := range strings.FieldsFunc(pw, func(r rune) bool { return strings.ContainsRune("/@()?&=:,", r) }) {
		if len(p) >= 3 {
			msg = strings.ReplaceAll(msg, p, "xxxxx")
		}
	}
	return msg
}

// OpenPrimary is Open for primary k (0-based) of a list of n: every
// connection of the pool sets auto_increment_increment = n and
// auto_increment_offset = k + 1, whatever the DSN says, so that every id
// MySQL gives a row inserted through it satisfies (id - 1) mod n == k (see
// coupon/primaries).
func OpenPrimary(dsn string, maxConns, n, k int) (*sql.DB, error) {
	if n < 1 || k < 0 || k >= n || n > 65535 {
		return nil, fmt.Errorf("primary %d of %d: want 0 <= k < n <= 65535", k, n)
	}
	cfg, err := Config(dsn)
	if err != nil {
		return nil, err
	}
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["auto_increment_increment"] = strconv.Itoa(n)
	cfg.Params["auto_increment_offset"] = strconv.Itoa(k + 1)
	return openConfig(cfg, dsn, maxConns)
}

// OpenIdleBounded is Open whose sessions set wait_timeout to idle (whole
// seconds, at least 1): the server drops a session it has not heard from
// for that long — with its locks and open transaction — as when its client
// is cut off by a network partition. The pool closes its own idle
// connections after idle/2, before the server would.
func OpenIdleBounded(dsn string, maxConns int, idle time.Duration) (*sql.DB, error) {
	cfg, err := Config(dsn)
	if err != nil {
		return nil, err
	}
	return openIdleBounded(cfg, dsn, maxConns, idle)
}

// OpenCDC is OpenIdleBounded whose sessions also take several statements
// in one query (multiStatements): a cdc batch sends its counters, template
// counts and checkpoint in one round trip (package sink). Every statement
// couponlink sends passes its values as arguments, which the driver
// escapes; none is built from input text.
func OpenCDC(dsn string, maxConns int, idle time.Duration) (*sql.DB, error) {
	cfg, err := Config(dsn)
	if err != nil {
		return nil, err
	}
	cfg.MultiStatements = true
	return openIdleBounded(cfg, dsn, maxConns, idle)
}

func openIdleBounded(cfg *mysql.Config, dsn string, maxConns int, idle time.Duration) (*sql.DB, error) {
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["wait_timeout"] = strconv.Itoa(max(int((idle+time.Second-1)/time.Second), 1))
	db, err := openConfig(cfg, dsn, maxConns)
	if err != nil {
		return nil, err
	}
	db.SetConnMaxIdleTime(max(idle/2, 500*time.Millisecond))
	return db, nil
}
