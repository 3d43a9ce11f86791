package main

import (
	"context"
	"fmt"
	"io"

	"github.com/couponlink/couponlink/migrations"
)

func runMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newFlags("migrate", "Creates the database named in the DSN when it is missing and applies every schema migration not yet applied (golang-migrate, versions in schema_migrations).", stderr)
	dsn := f.dsn()
	if err := f.parse(args); err != nil {
		return err
	}
	res, err := migrations.Up(*dsn)
	if err != nil {
		return err
	}
	if res.Created {
		fmt.Fprintf(stdout, "created database %s\n", res.Database)
	}
	if res.From == res.To {
		fmt.Fprintf(stdout, "database %s is at schema version %d, nothing to apply\n", res.Database, res.To)
	} else {
		fmt.Fprintf(stdout, "database %s migrated from schema version %d to %d\n", res.Database, res.From, res.To)
	}
	return nil
}
