package main

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"regexp"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	gocanal "github.com/go-mysql-org/go-mysql/canal"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/couponlink/couponlink/canal"
)

// noopReader is the ceiling: go-mysql's canal with the connection settings
// of couponlink's tailer (same tables, ParseTime, no read timeout, no
// retry) and a handler that only counts row changes (an UPDATE's
// before/after pair counts once, as the tailer counts it). With stamp set,
// it records when each inserted user_coupon id's transaction ended.
type noopReader struct {
	gocanal.DummyEventHandler
	target  canal.Position // stop at the first commit at or after it (zero: never)
	ucTable string         // schema.user_coupon
	stamp   func(ids []int64, at time.Time)

	rows    atomic.Int64
	first   time.Time
	endAt   time.Time
	pending []int64
	done    chan struct{}
	once    sync.Once
	exited  chan struct{} // the canal stopped, with runErr
	runErr  error
}

func (h *noopReader) String() string { return "bench-noop" }

func (h *noopReader) OnRow(e *gocanal.RowsEvent) error {
	if h.first.IsZero() {
		h.first = time.Now()
	}
	n := len(e.Rows)
	if e.Action == gocanal.UpdateAction {
		n /= 2
	}
	h.rows.Add(int64(n))
	if h.stamp != nil && e.Action == gocanal.InsertAction && e.Table.Schema+"."+e.Table.Name == h.ucTable {
		for _, r := range e.Rows {
			h.pending = append(h.pending, asInt64(r[0]))
		}
	}
	return nil
}

func (h *noopReader) OnPosSynced(hd *replication.EventHeader, p mysql.Position, _ mysql.GTIDSet, _ bool) error {
	if hd == nil || hd.EventType == replication.ROTATE_EVENT {
		return nil
	}
	if h.stamp != nil && len(h.pending) > 0 {
		h.stamp(h.pending, time.Now())
		h.pending = h.pending[:0]
	}
	if !h.target.IsZero() && (canal.Position{File: p.Name, Pos: p.Pos}).Compare(h.target) >= 0 {
		h.once.Do(func() {
			h.endAt = time.Now()
			close(h.done)
		})
	}
	return nil
}

func asInt64(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case uint64:
		return int64(x)
	case int32:
		return int64(x)
	case uint32:
		return int64(x)
	}
	return 0
}

// readerRun is what one timed read of a binlog range gave.
type readerRun struct {
	rows    int64
	rate    float64       // rows/s from the first row to the end
	wall    time.Duration // from start (connect) to the end
	cpu     time.Duration // process CPU time over wall
	perRow  time.Duration // cpu / rows
	skipped int64         // rows left out of the rate (the tailer's first batch)
	// MariaDB's CPU per row (binlog dump thread; for the pipeline also its
	// counter transactions)
	dbPerRow time.Duration
	// pipeline only: batches with rows, sink.ApplyBatch time per batch, and
	// the share of the run spent inside ApplyBatch
	batches                       int
	apply, applyMySQL, applyRedis latStats
	applyBusy                     float64
	perBatch                      string // server statements per batch (SHOW GLOBAL STATUS growth over the run)
	sqlTimes                      string // the sink's statements, timed by kind
}

// costs sets the run's CPU time, and per row that of this process and of
// MariaDB.
func (r *readerRun) costs(cpu, dbCPU time.Duration) {
	r.cpu, r.perRow, r.dbPerRow = cpu, perRow(cpu, r.rows), perRow(dbCPU, r.rows)
}

// noopConfig is go-mysql's configuration as canal.Tailer builds it,
// reading the tables that include matches.
func noopConfig(addr string, include []string) *gocanal.Config {
	return &gocanal.Config{
		Addr: addr, User: "root", Charset: "utf8mb4", ServerID: 1<<20 + rand.Uint32N(1<<30), Flavor: mysql.MariaDBFlavor,
		IncludeTableRegex: include,
		ParseTime:         true, TimestampStringLocation: time.UTC,
		Dialer:           (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		DisableRetrySync: true,
		Logger:           slog.New(slog.DiscardHandler), // a failure comes back as the canal's error; Close logs a spurious one
		Dump:             gocanal.DumpConfig{ExecutionPath: ""},
	}
}

// sourceRegex matches the reference mapping's subscribed tables.
func sourceRegex() string {
	m := canal.DefaultMapping()
	m.Schema = "couponlink"
	var q []string
	for _, t := range m.SourceTables() {
		q = append(q, regexp.QuoteMeta(t))
	}
	return `^(?:` + strings.Join(q, "|") + `)$`
}

// startNoop starts a no-op reader of the tables include matches on e's
// server at from (by GTID when from.GTID is set). h.exited is closed when
// the canal stops, with h.runErr; stop closes it and waits (errors after a
// Close are expected and dropped).
func startNoop(e *env, include []string, h *noopReader, from canal.Position) (stop func(), err error) {
	h.done = make(chan struct{})
	h.exited = make(chan struct{})
	c, err := gocanal.NewCanal(noopConfig(fmt.Sprintf("127.0.0.1:%d", e.mysqlPort), include))
	if err != nil {
		return nil, fmt.Errorf("no-op canal: %w", err)
	}
	c.SetEventHandler(h)
	go pprof.Do(context.Background(), pprof.Labels("part", "noop"), func(context.Context) {
		defer close(h.exited)
		if from.GTID != "" {
			set, err := mysql.ParseGTIDSet(mysql.MariaDBFlavor, from.GTID)
			if err != nil {
				h.runErr = err
				return
			}
			h.runErr = c.StartFromGTID(set)
		} else {
			h.runErr = c.RunFrom(mysql.Position{Name: from.File, Pos: from.Pos})
		}
	})
	return sync.OnceFunc(func() {
		c.Close()
		<-h.exited
	}), nil
}

// timeNoop reads [from, to] of e's server with a no-op reader of the
// tables include matches.
func timeNoop(ctx context.Context, e *env, include []string, from, to canal.Position) (readerRun, error) {
	h := &noopReader{target: to}
	mark, t0 := e.cpuMark(), time.Now()
	stop, err := startNoop(e, include, h, from)
	if err != nil {
		return readerRun{}, err
	}
	var early error
	select {
	case <-h.done:
	case <-h.exited:
		early = fmt.Errorf("no-op canal stopped before %s: %v", to, h.runErr)
	case <-ctx.Done():
	case <-time.After(10 * time.Minute):
	}
	cpu, dbCPU := mark.since()
	stop()
	if early != nil {
		return readerRun{}, early
	}
	if ctx.Err() != nil {
		return readerRun{}, ctx.Err()
	}
	if h.endAt.IsZero() {
		return readerRun{}, fmt.Errorf("no-op canal did not reach %s in 10 minutes", to)
	}
	r := readerRun{rows: h.rows.Load(), wall: h.endAt.Sub(t0)}
	r.rate = float64(r.rows) / h.endAt.Sub(h.first).Seconds()
	r.costs(cpu, dbCPU)
	return r, nil
}
