// Package testenv gives tests a fresh MySQL database (migrated) and a Redis
// client on the private servers that deploy/local/servers.sh starts. A
// missing server is a test failure, never a skip: run tests with `make test`.
package testenv

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/couponlink/couponlink/internal/mysqlconn"
	"github.com/couponlink/couponlink/migrations"
)

// ServerDSN is the DSN of the private MariaDB, with no database name.
func ServerDSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv("COUPONLINK_TEST_MYSQL_DSN")
	if dsn == "" {
		t.Fatal("COUPONLINK_TEST_MYSQL_DSN is not set: run the tests with `make test`, which starts the private MariaDB and Redis")
	}
	return dsn
}

var unsafeName = regexp.MustCompile(`[^a-z0-9_]+`)

// MySQL creates a new database named after the test, applies the
// migrations, and drops it when the test ends. It returns an open pool and
// the database's DSN.
func MySQL(t testing.TB) (*sql.DB, string) {
	t.Helper()
	cfg, err := mysqlconn.Config(ServerDSN(t)) // the settings cmd/couponlink forces
	if err != nil {
		t.Fatalf("COUPONLINK_TEST_MYSQL_DSN: %v", err)
	}
	name := strings.Trim(unsafeName.ReplaceAllString(strings.ToLower(t.Name()), "_"), "_")
	if len(name) > 40 {
		name = name[:40]
	}
	cfg.DBName = "t_" + name + "_" + randomSuffix()
	dsn := cfg.FormatDSN()
	if _, err := migrations.Up(dsn); err != nil {
		t.Fatalf("migrate test database: %v", err)
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatalf("open test database: %v", err)
	}
	db.SetMaxOpenConns(64)
	db.SetMaxIdleConns(64)
	t.Cleanup(func() {
		_, _ = db.Exec("DROP DATABASE IF EXISTS `" + cfg.DBName + "`")
		_ = db.Close()
	})
	return db, dsn
}

// RedisAddr is the address of the private Redis.
func RedisAddr(t testing.TB) string {
	t.Helper()
	addr := os.Getenv("COUPONLINK_TEST_REDIS_ADDR")
	if addr == "" {
		t.Fatal("COUPONLINK_TEST_REDIS_ADDR is not set: run the tests with `make test`")
	}
	return addr
}

// Redis returns a client on the private Redis that answers PING. Tests share
// that server, so each should use its own key prefix (see KeyPrefix).
func Redis(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: RedisAddr(t)})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("ping Redis at %s: %v", RedisAddr(t), err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// KeyPrefix is a Redis key prefix no other test uses.
func KeyPrefix(t testing.TB) string { return "t" + randomSuffix() + ":" }

func randomSuffix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// QuietLogger is the logger of the components a test runs: silent, or at debug
// level on stderr with COUPONLINK_TEST_VERBOSE set.
func QuietLogger() *slog.Logger {
	if os.Getenv("COUPONLINK_TEST_VERBOSE") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// CountsBy runs a query of two columns, a key and a count (`SELECT k,
// COUNT(*) … GROUP BY k`), and returns the counts by key.
func CountsBy[K comparable](t testing.TB, db *sql.DB, query string, args ...any) map[K]int {
	t.Helper()
	out := map[K]int{}
	eachRow(t, db, query, args, func(rows *sql.Rows) error {
		var k K
		var n int
		err := rows.Scan(&k, &n)
		out[k] = n
		return err
	})
	return out
}

// Column runs a query of one column and returns its values in row order.
func Column[T any](t testing.TB, db *sql.DB, query string, args ...any) []T {
	t.Helper()
	var out []T
	eachRow(t, db, query, args, func(rows *sql.Rows) error {
		var v T
		err := rows.Scan(&v)
		out = append(out, v)
		return err
	})
	return out
}

// eachRow runs query and scans each row with scan; any error fails the
// test, naming the query.
func eachRow(t testing.TB, db *sql.DB, query string, args []any, scan func(*sql.Rows) error) {
	t.Helper()
	rows, err := db.Query(query, args...)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}
