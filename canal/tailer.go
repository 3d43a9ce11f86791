// Package canal tails the MySQL/MariaDB binlog of the coupon tables named
// by a Mapping and hands their row changes, decoded into Transitions,
// Redemptions, Flows and QuotaChanges, to a Handler in batches that always
// end at a transaction end, with the position to resume from.
//
// DDL: a DDL on a source table makes the tailer re-read the table's current
// definition and locate the mapped columns again (a mapped column that is
// gone is an error). Because go-mysql only knows the current definition
// (docs/binlog.md #7), a row event whose column count differs from it (replay
// of binlog written before an ALTER) is refused with ErrSchemaChanged.
//
// GTID: the tailer keeps the GTID position itself (go-mysql reports one only
// after a GTID start, docs/binlog.md #3): each GTID event's domain-server-seq is
// folded into the set when its transaction commits, so a batch's End carries
// both the file/offset after the commit and the GTID position including it.
// Started from a file/offset on MariaDB, the set is seeded with
// BINLOG_GTID_POS(file, offset). A start from a GTID ignores the fake
// rotate's (file, 4) (docs/binlog.md #4): End keeps the start position until
// the first commit.
package canal

import (
	"context"
	"crypto/tls"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	gocanal "github.com/go-mysql-org/go-mysql/canal"
	"github.com/go-mysql-org/go-mysql/mysql"
	drv "github.com/go-sql-driver/mysql"

	"github.com/couponlink/couponlink/internal/mysqlconn"
)

// Handler receives the batches, synchronously from the tailer: the next
// batch is not delivered before ApplyBatch returns, and the binlog read
// waits once the following batch is full. An error stops Run with it.
type Handler interface {
	ApplyBatch(ctx context.Context, b *Batch) error
}

// Config configures a Tailer. Zero values take the defaults noted.
type Config struct {
	Addr     string // host:port, or a unix socket path
	User     string
	Password string
	// TLS encrypts the binlog stream and the tailer's queries (nil: in
	// clear); ConfigFromDSN sets the DSN's, as the SQL pool's
	// (mysqlconn.SetTLS).
	TLS    *tls.Config
	Flavor string // "mariadb" or "mysql"; default: detected from the server version
	// ServerID identifies the tailer as a replica; it must be unique among
	// the server's replicas. Default: random in [1<<20, 1<<31).
	ServerID uint32
	// Schema is the database of unqualified table names when the mapping
	// has no schema (ConfigFromDSN sets it from the DSN).
	Schema  string
	Mapping *Mapping // default DefaultMapping()
	// A batch goes to the Handler as soon as the Handler is free and the
	// batch holds a whole transaction: at low rates every transaction is
	// applied at once (lowest lag); while the Handler is busy, transactions
	// gather into the next batch (group commit), up to BatchRows rows.
	BatchRows int // the most rows a batch gathers before the read waits; default 5000
	// BatchWait, when positive, makes a batch also wait up to this long
	// after its first row for more (fewer, larger batches at the cost of
	// lag). Default 0: no wait.
	BatchWait       time.Duration
	HeartbeatPeriod time.Duration // heartbeat batch after this long without one; default 1s
	Logger          *slog.Logger  // default slog.Default()
}

// ConfigFromDSN makes a Config from a go-sql-driver DSN such as
// "user:pass@tcp(127.0.0.1:3306)/couponlink": address, credentials, and its
// database as the Schema of the DefaultMapping, and its TLS. Its errors
// never show the password (mysqlconn.Config).
func ConfigFromDSN(dsn string) (Config, error) {
	d, err := mysqlconn.Config(dsn)
	if err != nil {
		return Config{}, err
	}
	if d.Net != "tcp" && d.Net != "unix" {
		return Config{}, fmt.Errorf("DSN network %q: want tcp or unix", d.Net)
	}
	return Config{Addr: d.Addr, User: d.User, Password: d.Passwd, TLS: d.TLS, Schema: d.DBName, Mapping: DefaultMapping()}, nil
}

// Tailer follows the binlog. Make it with New; Run it once at a time.
type Tailer struct {
	cfg     Config
	log     *slog.Logger
	m       *Mapping // cfg.Mapping resolved by Run on the server
	stats   stats
	running atomic.Bool
	backoff time.Duration // first wait before resuming a broken stream
}

// Stats are cheap counters of a Tailer.
type Stats struct {
	Events    uint64    // binlog events handled (rows, GTID, commit, rotate)
	Rows      uint64    // committed row changes of the source tables
	Batches   uint64    // batches delivered, heartbeats included
	LastEvent time.Time // timestamp of the last commit seen
}

// New checks cfg and applies the defaults. It does not connect.
func New(cfg Config) (*Tailer, error) {
	if cfg.Addr == "" {
		return nil, errors.New("canal: Config.Addr is empty")
	}
	switch cfg.Flavor {
	case "", mysql.MariaDBFlavor, mysql.MySQLFlavor:
	default:
		return nil, fmt.Errorf("canal: Config.Flavor %q: want mariadb or mysql", cfg.Flavor)
	}
	if cfg.Mapping == nil {
		cfg.Mapping = DefaultMapping()
	}
	cfg.Mapping = cfg.Mapping.withSchema(cfg.Schema)
	if err := cfg.Mapping.Validate(); err != nil {
		return nil, err
	}
	for _, s := range cfg.Mapping.specs() {
		if sch, _ := cfg.Mapping.split(s.table); sch == "" {
			return nil, fmt.Errorf("canal: %s.table %q has no schema: set schema: in the mapping, write schema.table, or set Config.Schema", s.key, s.table)
		}
	}
	if cfg.ServerID == 0 {
		cfg.ServerID = 1<<20 + rand.Uint32N(1<<31-1<<20)
	}
	if cfg.BatchRows <= 0 {
		cfg.BatchRows = 5000
	}
	if cfg.BatchWait < 0 {
		cfg.BatchWait = 0
	}
	if cfg.HeartbeatPeriod <= 0 {
		cfg.HeartbeatPeriod = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Tailer{cfg: cfg, log: cfg.Logger.With("component", "canal"), backoff: time.Second}, nil
}

// Stats returns the counters so far.
func (t *Tailer) Stats() Stats {
	s := Stats{Events: t.stats.events.Load(), Rows: t.stats.rows.Load(), Batches: t.stats.batches.Load()}
	if ts := t.stats.lastTS.Load(); ts != 0 {
		s.LastEvent = time.Unix(int64(ts), 0)
	}
	return s
}

// Run checks the server and the mapping, then follows the binlog from
// `from` (by GTID when from.GTID is set, else by file and offset) and hands
// batches to h until ctx ends. It returns nil when ctx ends, once the batch
// in flight is applied; the Handler's error if it fails; an error wrapping
// ErrBinlogPurged when the server no longer has `from`; ErrSchemaChanged
// on replay across an ALTER. A broken connection is resumed from the last
// committed position.
func (t *Tailer) Run(ctx context.Context, from Position, h Handler) error {
	if h == nil {
		return errors.New("canal: Run needs a Handler")
	}
	if from.IsZero() {
		return errors.New("canal: Run needs a start position (a saved checkpoint, or CurrentPosition); it never replays the whole binlog")
	}
	if !t.running.CompareAndSwap(false, true) {
		return errors.New("canal: this Tailer is already running")
	}
	defer t.running.Store(false)

	flavor, gt, err := t.prepare(ctx, from)
	if err != nil {
		return err
	}

	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	b := newBatcher(t.cfg, from, gt, &t.stats)
	var wg sync.WaitGroup
	var deliverErr error
	wg.Go(func() {
		if err := b.run(runCtx, h); err != nil {
			deliverErr = err
			cancel(err)
		}
	})
	err = t.stream(runCtx, b, flavor, gt, from)
	cancel(nil)
	wg.Wait()
	switch {
	case deliverErr != nil:
		return deliverErr
	case ctx.Err() != nil:
		return nil
	}
	return err
}

// prepare checks the mapping and the server, settles the flavor, and makes
// the GTID tracker (on MariaDB started from file/offset, seeded from
// BINLOG_GTID_POS so that every End carries a complete GTID position).
func (t *Tailer) prepare(ctx context.Context, from Position) (string, gtidTracker, error) {
	dc := drv.NewConfig()
	dc.User, dc.Passwd, dc.Addr, dc.DBName = t.cfg.User, t.cfg.Password, t.cfg.Addr, t.cfg.Schema
	dc.Net, dc.Timeout, dc.TLS = "tcp", 10*time.Second, t.cfg.TLS
	if strings.Contains(t.cfg.Addr, "/") {
		dc.Net = "unix"
	}
	conn, err := drv.NewConnector(dc)
	if err != nil {
		return "", nil, fmt.Errorf("canal: open %s: %w", t.cfg.Addr, err)
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	// a mapping resolved by the caller keeps its tables: the sink counted
	// those in its snapshot
	m := t.cfg.Mapping
	if !m.Resolved() {
		if m, err = m.Resolve(ctx, db); err != nil {
			return "", nil, fmt.Errorf("canal: %w", err)
		}
	}
	if err := m.Check(ctx, db); err != nil {
		return "", nil, fmt.Errorf("canal: %w", err)
	}
	if warnings, err := ServerWarnings(ctx, db); err == nil {
		for _, w := range warnings {
			t.log.Warn(w)
		}
	}
	t.m = m
	flavor := t.cfg.Flavor
	if flavor == "" {
		srv, err := ReadServer(ctx, db)
		if err != nil {
			return "", nil, fmt.Errorf("canal: %w", err)
		}
		flavor = srv.Flavor()
	}
	gtid := from.GTID
	if gtid == "" {
		if flavor != mysql.MariaDBFlavor {
			return flavor, nil, nil // MySQL from file/offset: End carries no GTID
		}
		if gtid, err = binlogGTIDPos(ctx, db, from.File, from.Pos); err != nil {
			return "", nil, fmt.Errorf("canal: start at %s: %w; %s", from, err, errRebuildHint)
		}
	}
	gt, err := newGTIDTracker(flavor, gtid)
	if err != nil {
		return "", nil, fmt.Errorf("canal: start position %s: %w", from, err)
	}
	return flavor, gt, nil
}

// stream runs go-mysql's canal, resuming from the last committed position
// after a broken connection (go-mysql's own retry is off: in file/offset
// mode it resumes mid-transaction).
func (t *Tailer) stream(ctx context.Context, b *batcher, flavor string, gt gtidTracker, from Position) error {
	start := from
	backoff := t.backoff
	for {
		r := &reader{ctx: ctx, log: t.log, dec: newDecoder(t.m), b: b, gtid: gt, st: &t.stats, file: start.File}
		if gt != nil {
			gt.discard()
		}
		err := t.runCanal(ctx, r, flavor, start)
		switch {
		case ctx.Err() != nil:
			return nil
		case r.fatal != nil:
			return fmt.Errorf("canal: %w", r.fatal)
		case err == nil:
			err = errors.New("binlog stream ended")
		}
		if p := wrapPurged(err, start); errors.Is(p, ErrBinlogPurged) {
			return fmt.Errorf("canal: %w", p)
		}
		if isFatalServerError(err) {
			return fmt.Errorf("canal: binlog stream from %s: %w", start, err)
		}
		if r.commits > 0 {
			backoff = t.backoff
		}
		start = b.position()
		t.log.Warn("binlog stream broke; resuming from the last commit", "err", err, "from", start.String(), "in", backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

func (t *Tailer) runCanal(ctx context.Context, r *reader, flavor string, start Position) error {
	cc := &gocanal.Config{
		Addr: t.cfg.Addr, User: t.cfg.User, Password: t.cfg.Password, TLSConfig: t.cfg.TLS, Charset: "utf8mb4",
		ServerID: t.cfg.ServerID, Flavor: flavor,
		IncludeTableRegex: []string{tableRegex(t.m.SourceTables())},
		ParseTime:         true, TimestampStringLocation: time.UTC,
		// No ReadTimeout: go-mysql then sets a deadline on every packet,
		// which halves the read rate of small transactions. A dead peer is
		// found by TCP keepalive instead (~25 s), and the stream resumed.
		Dialer: (&net.Dialer{Timeout: 10 * time.Second,
			KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: 10 * time.Second, Interval: 5 * time.Second, Count: 3}}).DialContext,
		DisableRetrySync: true,
		// go-mysql reads ahead up to 10,240 events by default: hundreds of
		// MiB when the sink is slower than the reader. 1,024 keeps the
		// reader busy while bounding memory (measured: 289 -> 31 MiB peak).
		EventCacheCount: 1024,
		Logger:          slog.New(minLevel{t.log.Handler(), slog.LevelWarn}).With("lib", "go-mysql"),
		Dump:            gocanal.DumpConfig{ExecutionPath: ""},
	}
	var set mysql.GTIDSet
	if start.GTID != "" {
		var err error
		if set, err = mysql.ParseGTIDSet(flavor, start.GTID); err != nil {
			return r.fail(fmt.Errorf("start GTID %q: %w", start.GTID, err))
		}
	}
	c, err := gocanal.NewCanal(cc)
	if err != nil {
		return err
	}
	c.SetEventHandler(r)
	done := make(chan struct{})
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		select {
		case <-ctx.Done():
			c.Close()
		case <-done:
		}
	}()
	if set != nil {
		err = c.StartFromGTID(set)
	} else {
		err = c.RunFrom(mysql.Position{Name: start.File, Pos: start.Pos})
	}
	close(done)
	<-closed
	c.Close()
	return err
}

// tableRegex matches exactly the given schema.table names.
func tableRegex(tables []string) string {
	q := make([]string, len(tables))
	for i, t := range tables {
		q[i] = regexp.QuoteMeta(t)
	}
	return `^(?:` + strings.Join(q, "|") + `)$`
}

// minLevel quiets a handler below a level: go-mysql logs at Info on every
// (re)connection, with its whole configuration.
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(as []slog.Attr) slog.Handler {
	return minLevel{h.Handler.WithAttrs(as), h.min}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{h.Handler.WithGroup(name), h.min}
}
