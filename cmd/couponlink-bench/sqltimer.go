package main

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/couponlink/couponlink/internal/mysqlconn"
)

// sqlTimer times every statement, BEGIN and COMMIT of a pool, by kind
// ("UPDATE cdc_checkpoint", "COMMIT"): where the sink's MySQL time goes.
type sqlTimer struct {
	mu    sync.Mutex
	times map[string][]time.Duration
}

func (t *sqlTimer) note(kind string, since time.Time) {
	d := time.Since(since)
	t.mu.Lock()
	if t.times == nil {
		t.times = map[string][]time.Duration{}
	}
	t.times[kind] = append(t.times[kind], d)
	t.mu.Unlock()
}

// take returns "kind n× p50/p99" for every kind seen since the last call,
// the slowest (by total) first.
func (t *sqlTimer) take() string {
	t.mu.Lock()
	times := t.times
	t.times = nil
	t.mu.Unlock()
	type kindSum struct {
		kind string
		sum  time.Duration
		s    latStats
	}
	var ks []kindSum
	for k, ds := range times {
		var sum time.Duration
		for _, d := range ds {
			sum += d
		}
		ks = append(ks, kindSum{k, sum, summarize(ds)})
	}
	slices.SortFunc(ks, func(a, b kindSum) int { return int(b.sum - a.sum) })
	var parts []string
	for _, k := range ks {
		parts = append(parts, fmt.Sprintf("%s %d× p50 %s p99 %s (total %s)", k.kind, k.s.N, msStr(k.s.P50), msStr(k.s.P99), sec(k.sum)))
	}
	return strings.Join(parts, "; ")
}

// openTimedMySQL is openMySQL whose statements t times.
func openTimedMySQL(dsn string, conns int, t *sqlTimer) (*sql.DB, error) {
	c, err := mysqlconn.Config(dsn)
	if err != nil {
		return nil, err
	}
	c.MultiStatements = true // as `couponlink cdc` opens its pool (mysqlconn.OpenCDC)
	inner, err := mysql.NewConnector(c)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(timedConnector{inner, t})
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	return db, nil
}

type timedConnector struct {
	driver.Connector
	t *sqlTimer
}

// conn is what go-sql-driver's connection implements.
type conn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ExecerContext
	driver.QueryerContext
	driver.ConnPrepareContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
	driver.NamedValueChecker
}

func (c timedConnector) Connect(ctx context.Context) (driver.Conn, error) {
	dc, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	mc, ok := dc.(conn)
	if !ok {
		return nil, fmt.Errorf("sql timer: driver connection %T lacks a needed interface", dc)
	}
	return timedConn{mc, c.t}, nil
}

type timedConn struct {
	conn
	t *sqlTimer
}

func (c timedConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	start := time.Now()
	tx, err := c.conn.BeginTx(ctx, opts)
	c.t.note("BEGIN", start)
	if err != nil {
		return nil, err
	}
	return timedTx{tx, c.t}, nil
}

func (c timedConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	start := time.Now()
	r, err := c.conn.ExecContext(ctx, q, args)
	c.t.note(stmtKind(q), start)
	return r, err
}

func (c timedConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	start := time.Now()
	r, err := c.conn.QueryContext(ctx, q, args)
	c.t.note(stmtKind(q), start) // until the first packet: enough for small results
	return r, err
}

type timedTx struct {
	driver.Tx
	t *sqlTimer
}

func (tx timedTx) Commit() error {
	start := time.Now()
	err := tx.Tx.Commit()
	tx.t.note("COMMIT", start)
	return err
}

// stmtKind is a statement's verb and table, e.g. "INSERT inventory_counter";
// several statements in one query (the sink's tail) are joined by " + ".
func stmtKind(q string) string {
	parts := strings.Split(q, ";\n")
	kinds := make([]string, len(parts))
	for i, p := range parts {
		kinds[i] = oneKind(p)
	}
	return strings.Join(kinds, " + ")
}

func oneKind(q string) string {
	f := strings.Fields(q[:min(len(q), 160)]) // the verb and table come first; a long VALUES list costs the timer nothing
	if len(f) == 0 {
		return "?"
	}
	verb := strings.ToUpper(f[0])
	for i, w := range f[:len(f)-1] {
		switch u := strings.ToUpper(w); {
		case u == "INTO" || u == "FROM" || (u == "UPDATE" && i == 0):
			return verb + " " + strings.Trim(f[i+1], "`(")
		}
	}
	return verb
}
