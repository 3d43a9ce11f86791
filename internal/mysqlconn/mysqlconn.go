// Package mysqlconn is how couponlink connects to MySQL: one place that
// parses a DSN, forces the driver settings the code relies on, and keeps a
// DSN's password out of every message.
package mysqlconn

import (
	"database/sql"
	"fmt"
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
//
// A parse error names the DSN with its password redacted.
func Config(dsn string) (*mysql.Config, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse MySQL DSN %s: %w", Redact(dsn), err)
	}
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	cfg.InterpolateParams = true
	cfg.ClientFoundRows = false
	return cfg, nil
}

// Open opens a pool of at most maxConns connections with Config's settings.
func Open(dsn string, maxConns int) (*sql.DB, error) {
	cfg, err := Config(dsn)
	if err != nil {
		return nil, err
	}
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
// and logs. It works on malformed DSNs too: the user part is everything
// before the last '@' that precedes the last '/', as the driver reads it.
func Redact(dsn string) string {
	head, tail := dsn, ""
	if i := strings.LastIndex(dsn, "/"); i >= 0 {
		head, tail = dsn[:i], dsn[i:]
	}
	at := strings.LastIndex(head, "@")
	if at < 0 {
		return dsn
	}
	user := head[:at]
	name, _, hasPass := strings.Cut(user, ":")
	if !hasPass {
		return dsn
	}
	return name + ":xxxxx" + head[at:] + tail
}
