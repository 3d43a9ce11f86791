package testenv

import (
	"bytes"
	"database/sql"
	"log/slog"
	"sync"
	"testing"

	"github.com/couponlink/couponlink/internal/mysqlconn"
)

// UnreachableMySQL returns a pool on an address where nothing listens (a
// port that was just closed), as when MySQL is down, and that address.
// The DSN carries the password "pw".
func UnreachableMySQL(t testing.TB) (*sql.DB, string) {
	t.Helper()
	addr := FreeAddr(t)
	db, err := mysqlconn.Open("couponlink:pw@tcp("+addr+")/couponlink?timeout=2s", 1)
	if err != nil {
		t.Fatalf("open a pool on %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db, addr
}

// Logger returns a text logger and a function that returns what it has
// written so far; safe to log from servers' goroutines while a test reads.
func Logger() (*slog.Logger, func() string) {
	var mu sync.Mutex
	var buf bytes.Buffer
	w := writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return buf.Write(p)
	})
	return slog.New(slog.NewTextHandler(w, nil)), func() string {
		mu.Lock()
		defer mu.Unlock()
		return buf.String()
	}
}

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
