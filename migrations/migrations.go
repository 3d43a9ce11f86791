// Package migrations holds couponlink's versioned, forward-only SQL and
// applies it with golang-migrate (github.com/golang-migrate/migrate/v4).
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"

	"github.com/go-sql-driver/mysql"
	"github.com/golang-migrate/migrate/v4"
	migratemysql "github.com/golang-migrate/migrate/v4/database/mysql"
	"github.com/golang-migrate/migrate/v4/source/iofs"

	"github.com/couponlink/couponlink/internal/mysqlconn"
)

//go:embed *.sql
var files embed.FS

// Result says what Up did.
type Result struct {
	Database string
	Created  bool // the database did not exist and was created
	From, To uint // schema version before and after
}

// Up creates the database named in dsn when it is missing and applies every
// migration not yet applied. It is safe to run concurrently: golang-migrate
// holds a MySQL advisory lock while it works.
func Up(dsn string) (Result, error) {
	cfg, err := mysqlconn.Config(dsn) // its errors never show the password
	if err != nil {
		return Result{}, err
	}
	if cfg.DBName == "" {
		return Result{}, errors.New("the MySQL DSN names no database (want e.g. root@tcp(127.0.0.1:3307)/couponlink)")
	}
	res := Result{Database: cfg.DBName}
	if res.Created, err = createDatabase(*cfg); err != nil {
		return res, err
	}

	cfg.MultiStatements = true
	cfg.ParseTime = true
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return res, fmt.Errorf("open MySQL: %w", err)
	}
	defer db.Close()
	driver, err := migratemysql.WithInstance(db, &migratemysql.Config{})
	if err != nil {
		return res, fmt.Errorf("prepare migrations on %s: %w", cfg.DBName, err)
	}
	src, err := iofs.New(files, ".")
	if err != nil {
		return res, fmt.Errorf("read embedded migrations: %w", err)
	}
	m, err := migrate.NewWithInstance("iofs", src, cfg.DBName, driver)
	if err != nil {
		return res, fmt.Errorf("prepare migrations on %s: %w", cfg.DBName, err)
	}
	from, dirty, err := m.Version()
	if err != nil && !errors.Is(err, migrate.ErrNilVersion) {
		return res, fmt.Errorf("read schema version: %w", err)
	}
	if dirty {
		return res, fmt.Errorf("schema of %s is dirty at version %d: a migration failed half-way; fix it by hand, then run `migrate force`", cfg.DBName, from)
	}
	res.From = from
	if err := m.Up(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return res, fmt.Errorf("apply migrations to %s: %w", cfg.DBName, err)
	}
	res.To, _, _ = m.Version()
	return res, nil
}

func createDatabase(cfg mysql.Config) (bool, error) {
	name := cfg.DBName
	cfg.DBName = ""
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return false, fmt.Errorf("open MySQL: %w", err)
	}
	defer db.Close()
	var found string
	err = db.QueryRow("SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", name).Scan(&found)
	if err == nil {
		return false, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return false, fmt.Errorf("look for database %s: %w", name, err)
	}
	if _, err := db.Exec("CREATE DATABASE IF NOT EXISTS `" + name + "` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"); err != nil {
		return false, fmt.Errorf("create database %s: %w", name, err)
	}
	return true, nil
}

// Latest is the version of the newest embedded migration: the version of a
// fully migrated database.
func Latest() (uint, error) {
	names, err := fs.Glob(files, "*.up.sql")
	if err != nil {
		return 0, err
	}
	var latest uint
	for _, n := range names {
		digits, _, _ := strings.Cut(n, "_")
		v, err := strconv.ParseUint(digits, 10, 32)
		if err != nil {
			return 0, fmt.Errorf("migration %s: the name does not start with a version", n)
		}
		latest = max(latest, uint(v))
	}
	return latest, nil
}

// Version reads the schema version of the database db is on, as Up left
// it (golang-migrate's schema_migrations): 0 when it was never migrated.
func Version(ctx context.Context, db *sql.DB) (version uint, dirty bool, err error) {
	var found string
	err = db.QueryRowContext(ctx, `SELECT TABLE_NAME FROM information_schema.TABLES
		WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'schema_migrations'`).Scan(&found)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("look for schema_migrations: %w", err)
	}
	err = db.QueryRowContext(ctx, "SELECT version, dirty FROM schema_migrations LIMIT 1").Scan(&version, &dirty)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("read schema_migrations: %w", err)
	}
	return version, dirty, nil
}
