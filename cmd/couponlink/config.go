package main

import (
	"database/sql"
	"io"

	"github.com/couponlink/couponlink/internal/mysqlconn"
	"github.com/couponlink/couponlink/internal/settings"
)

// errUsage means a usage message was already printed.
var errUsage = settings.ErrUsage

// newFlags is the flag set of `couponlink name`; the flags shared by
// several commands are the groups of internal/settings.
func newFlags(name, summary string, stderr io.Writer) *settings.Flags {
	return settings.New("couponlink "+name, summary, stderr)
}

// openMySQL opens a pool with the settings couponlink relies on
// (mysqlconn.Config); errors never show the DSN's password.
func openMySQL(dsn string, maxConns int) (*sql.DB, error) {
	return mysqlconn.Open(dsn, maxConns)
}
