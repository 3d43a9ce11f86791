package main

import (
	"database/sql"
	"io"

	"github.com/couponlink/couponlink/internal/mysqlconn"
	"github.com/couponlink/couponlink/internal/settings"
	"github.com/couponlink/couponlink/inventory"
)

// errUsage means a usage message was already printed.
var errUsage = settings.ErrUsage

// newFlags is the flag set of `couponlink name`; the flags shared by
// several commands are the groups of internal/settings.
func newFlags(name, summary string, stderr io.Writer) *settings.Flags {
	return settings.New("couponlink "+name, summary, stderr)
}

// dbMapping are the flags of the commands that work on the database, or
// with a mapping of several sources on each source's: -dsn, -mapping and
// -source.
type dbMapping struct {
	db      settings.Database
	mapping settings.Mapping
}

// dbMappingFlags is the flag set of such a command; fileUse and
// sourceUse are the help of -mapping and -source.
func dbMappingFlags(name, summary, fileUse, sourceUse string, stderr io.Writer) (*settings.Flags, *dbMapping) {
	f := newFlags(name, summary, stderr)
	o := &dbMapping{mapping: settings.Mapping{FileUse: fileUse, SourceUse: sourceUse}}
	f.Add(&o.db, &o.mapping)
	return f, o
}

// daemonSettings are the flag groups of the cdc and the reconciler.
type daemonSettings struct {
	db       settings.Database
	mapping  settings.Mapping
	redis    settings.Redis
	cp       settings.Checkpoint
	metrics  settings.Metrics
	logging  settings.Logging
	snapshot settings.Snapshot
}

// daemonUses are what the shared flags of a daemon do, for their help.
type daemonUses struct {
	mapping, source, redis, redisMode, name, metrics string
}

// register adds the groups to f, for daemon ("cdc", "reconcile").
func (d *daemonSettings) register(f *settings.Flags, daemon string, u daemonUses) {
	d.mapping = settings.Mapping{FileUse: u.mapping, SourceUse: u.source}
	d.redis = settings.Redis{AddrUse: u.redis, ModeUse: u.redisMode}
	d.cp = settings.Checkpoint{Use: u.name}
	d.metrics = settings.Metrics{Daemon: daemon, Use: u.metrics}
	f.Add(&d.db, &d.mapping, &d.redis, &d.cp, &d.metrics, &d.logging, &d.snapshot)
}

// reconcileConns is the reconciler's pool on a server: the pass's lock,
// the snapshot's readers (inventory.SetSnapshotReaders), the metrics.
const reconcileConns = 2 + inventory.DefaultSnapshotReaders

// openMySQL opens a pool with the settings couponlink relies on
// (mysqlconn.Config); errors never show the DSN's password.
func openMySQL(dsn string, maxConns int) (*sql.DB, error) {
	if err := settings.NeedDSN(dsn); err != nil {
		return nil, err
	}
	return mysqlconn.Open(dsn, maxConns)
}

// withMySQL runs do with a pool of dsn (openMySQL), closed when do returns.
func withMySQL(dsn string, maxConns int, do func(db *sql.DB) error) error {
	db, err := openMySQL(dsn, maxConns)
	if err != nil {
		return err
	}
	defer db.Close()
	return do(db)
}
