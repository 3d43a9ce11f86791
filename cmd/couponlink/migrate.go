package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/couponlink/couponlink/internal/settings"
	"github.com/couponlink/couponlink/internal/words"
	"github.com/couponlink/couponlink/migrations"
)

func migrateFlags(stderr io.Writer) (*settings.Flags, *dbMapping) {
	return dbMappingFlags("migrate", "Creates the database named in the DSN when it is missing and applies every schema migration not yet applied (golang-migrate, versions in schema_migrations). "+
		"With a -mapping naming several sources, does so on every source's server, in the database of the source's DSN (or on -source's only), one line per source.",
		"YAML mapping of a legacy schema; when it names sources, migrate each source's server instead of -dsn's",
		"with a mapping of several sources: migrate this source's server only (default: every source)", stderr)
}

func runMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, o := migrateFlags(stderr)
	if err := f.Parse(args); err != nil {
		return err
	}
	m, err := readMapping(*o.mapping.File)
	if err != nil {
		return err
	}
	if m == nil || !m.HasSources() {
		if *o.mapping.Source != "" {
			return errors.New("-source needs a -mapping that names sources")
		}
		return migrateOne(stdout, "", *o.db.DSN)
	}
	names := m.SourceNames()
	if *o.mapping.Source != "" {
		names = []string{*o.mapping.Source}
	}
	var failed []string
	for _, name := range names {
		_, sourceDSN, err := m.OneSource(name)
		if err == nil {
			err = migrateOne(stdout, "source "+name+": ", sourceDSN)
		}
		if err != nil {
			fmt.Fprintf(stdout, "source %s: %v\n", name, err)
			failed = append(failed, name)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%s not migrated: %s (see above)", words.Count(len(failed), "source"), strings.Join(failed, ", "))
	}
	return nil
}

// migrateOne migrates the database of dsn and prints what it did, each
// line starting with prefix.
func migrateOne(stdout io.Writer, prefix, dsn string) error {
	if err := settings.NeedDSN(dsn); err != nil {
		return err
	}
	res, err := migrations.Up(dsn)
	if err != nil {
		return err
	}
	if res.Created {
		fmt.Fprintf(stdout, "%screated database %s\n", prefix, res.Database)
	}
	if res.From == res.To {
		fmt.Fprintf(stdout, "%sdatabase %s is at schema version %d, nothing to apply\n", prefix, res.Database, res.To)
	} else {
		fmt.Fprintf(stdout, "%sdatabase %s migrated from schema version %d to %d\n", prefix, res.Database, res.From, res.To)
	}
	return nil
}
