package httpapi_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/coupon/httpapi"
	"github.com/couponlink/couponlink/internal/mysqlconn"
	"github.com/couponlink/couponlink/internal/testenv"
)

// A Store takes any *sql.DB, and shops' shared DSNs often carry
// clientFoundRows=true, under which "rows affected" counts the rows an
// UPDATE matched rather than those it changed. The guards must hold either
// way; the pools couponlink opens itself force the option off.

// foundRowsPool is a way a Store's pool may be opened from a DSN that asks
// for clientFoundRows=true.
type foundRowsPool struct {
	name      string
	foundRows bool // whether the pool ends up counting found rows
	open      func(cfg mysql.Config) (*sql.DB, error)
}

var foundRowsPools = []foundRowsPool{
	{"raw pool", true, func(cfg mysql.Config) (*sql.DB, error) {
		cfg.ParseTime, cfg.Loc = true, time.UTC // what the Store needs; clientFoundRows stays on
		c, err := mysql.NewConnector(&cfg)
		if err != nil {
			return nil, err
		}
		return sql.OpenDB(c), nil
	}},
	{"mysqlconn.Open", false, func(cfg mysql.Config) (*sql.DB, error) {
		return mysqlconn.Open(cfg.FormatDSN(), 64) // as the commands, bench and testenv open theirs
	}},
}

// newEnvOnPool is newEnv with the API's store on a pool opened the way p
// opens one, from a DSN with clientFoundRows=true, on the same database;
// e.db stays the test's own pool.
func newEnvOnPool(t *testing.T, p foundRowsPool) *env {
	t.Helper()
	e := newEnv(t)
	cfg, err := mysql.ParseDSN(testenv.ServerDSN(t))
	require.NoError(t, err)
	require.NoError(t, e.db.QueryRow(`SELECT DATABASE()`).Scan(&cfg.DBName))
	cfg.ClientFoundRows = true
	db, err := p.open(*cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	require.Equal(t, p.foundRows, countsFoundRows(t, db), "clientFoundRows of the %s", p.name)

	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	e.store, err = coupon.New(coupon.Config{DB: db, Now: e.clock.Now, Logger: quiet})
	require.NoError(t, err)
	e.reg = prometheus.NewRegistry()
	srv := httptest.NewServer(httpapi.New(httpapi.Config{Store: e.store, Logger: quiet, Registerer: e.reg, Gatherer: e.reg}))
	t.Cleanup(srv.Close)
	e.url, e.api = srv.URL, newClient(srv.URL, "")
	t.Cleanup(e.api.hc.CloseIdleConnections)
	return e
}

// countsFoundRows reports whether db's connections count a matched but
// unchanged row as affected.
func countsFoundRows(t *testing.T, db *sql.DB) bool {
	t.Helper()
	ctx := context.Background()
	conn, err := db.Conn(ctx) // a temporary table lives on one connection
	require.NoError(t, err)
	defer conn.Close()
	for _, q := range []string{`CREATE TEMPORARY TABLE found_rows_probe (x INT PRIMARY KEY)`, `INSERT INTO found_rows_probe VALUES (1)`} {
		_, err := conn.ExecContext(ctx, q)
		require.NoError(t, err, q)
	}
	res, err := conn.ExecContext(ctx, `UPDATE found_rows_probe SET x = 1`)
	require.NoError(t, err)
	n, err := res.RowsAffected()
	require.NoError(t, err)
	_, err = conn.ExecContext(ctx, `DROP TEMPORARY TABLE found_rows_probe`)
	require.NoError(t, err)
	return n == 1
}

// The suites of the guards: the per-user limit, sold out, concurrent claims
// never over-issuing, the state machine's refusals, idempotent replays.
var guardSuites = []struct {
	name string
	run  func(*testing.T, *env)
}{
	{"per-user limit", perUserLimit},
	{"sold out and per-user limit", claimReservesASlot},
	{"concurrent claims never over-issue", claimsNeverOverIssue},
	{"every action on every reached state", everyActionOnEveryReachedState},
	{"claim replays", claimIdempotency},
	{"concurrent claim replays", concurrentClaimReplays},
	{"redemption replay", redemptionReplay},
	{"concurrent redemptions by one order", concurrentRedemptionsSameOrder},
	{"redemption after its refund", redeemAfterItsRefundIsRefused},
}

// Every guard suite on a store whose DSN says clientFoundRows=true: opened
// raw (the option on: the store holds anyway) and through mysqlconn.Open
// (the option forced off).
func TestGuardsWhateverClientFoundRows(t *testing.T) {
	for _, p := range foundRowsPools {
		for _, s := range guardSuites {
			t.Run(p.name+"/"+s.name, func(t *testing.T) { s.run(t, newEnvOnPool(t, p)) })
		}
	}
}

func TestPerUserLimit(t *testing.T) { perUserLimit(t, newEnv(t)) }

// perUserLimit: with a limit of 1, one of four claims by a user is a coupon
// and three are limit_reached writing nothing; with a limit of 3, twenty
// concurrent claims by one user make exactly three coupons.
func perUserLimit(t *testing.T, e *env) {
	one := e.template(t, nil)
	e.claim(t, one, "u1", "app")
	before := e.ledgers(t)
	for i := 0; i < 3; i++ {
		r := e.must(t, "POST", "/v1/claims", map[string]any{"template_id": one, "user_id": "u1", "channel": "sms", "request_id": uniq("claim")})
		expectError(t, r, 409, "limit_reached")
	}
	assert.Equal(t, before, e.ledgers(t), "refused claims write nothing")
	assert.Equal(t, 1, e.count(t, `SELECT claimed FROM user_claim WHERE template_id = ? AND user_id = 'u1'`, one))
	e.claim(t, one, "u3", "app") // a refusal leaves nothing behind on its connection

	three := e.template(t, map[string]any{"per_user_limit": 3})
	replies := parallel(t, 20, 20, func(i int) (reply, error) {
		return e.api.do("POST", "/v1/claims", map[string]any{"template_id": three, "user_id": "u2", "channel": "app",
			"request_id": fmt.Sprintf("u2-%d-%d", three, i)})
	})
	got := map[string]int{}
	for _, r := range replies {
		got[fmt.Sprint(r.Status, r.errCode())]++
	}
	assert.Equal(t, map[string]int{"201": 3, "409limit_reached": 17}, got)
	assert.Equal(t, 3, e.count(t, `SELECT COUNT(*) FROM user_coupon WHERE template_id = ? AND user_id = 'u2'`, three))
	assert.Equal(t, 3, e.count(t, `SELECT claimed FROM user_claim WHERE template_id = ? AND user_id = 'u2'`, three))
	assert.Equal(t, 3, e.count(t, `SELECT SUM(claimed) FROM channel_quota WHERE template_id = ?`, three))
}
