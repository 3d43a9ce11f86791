package canal

import (
	"context"
	"database/sql"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	gocanal "github.com/go-mysql-org/go-mysql/canal"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/internal/testenv"
)

// BenchmarkReadThroughput compares the tailer with a no-op go-mysql canal
// reading the same binlog range (single-row, then 100-row transactions),
// started by file/offset and by GTID. Rates are steady-state: from the first
// decoded row to the end of the range, so connection setup is left out.
//
//	go test -run '^$' -bench ReadThroughput -benchtime 3x ./canal/
func BenchmarkReadThroughput(b *testing.B) {
	for _, shape := range []struct {
		name      string
		txns, per int
	}{{"1-row-tx", 40_000, 1}, {"100-row-tx", 2_000, 100}} {
		b.Run(shape.name, func(b *testing.B) {
			ctx := context.Background()
			db, dsn := testenv.MySQL(b)
			start, err := CurrentPosition(ctx, db)
			require.NoError(b, err)
			writeCoupons(b, dsn, shape.txns, shape.per)
			target, err := CurrentPosition(ctx, db)
			require.NoError(b, err)
			cfg, err := ConfigFromDSN(dsn)
			require.NoError(b, err)
			cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
			byFile := Position{File: start.File, Pos: start.Pos}
			byGTID := Position{GTID: start.GTID}
			for b.Loop() {
				base := noopCanal(b, cfg, byFile, target)
				ours := tailerRate(b, cfg, byFile, target)
				baseG := noopCanal(b, cfg, byGTID, target)
				oursG := tailerRate(b, cfg, byGTID, target)
				b.ReportMetric(base, "canal-rows/s")
				b.ReportMetric(ours, "tailer-rows/s")
				b.ReportMetric(ours/base, "ratio")
				b.ReportMetric(oursG/baseG, "gtid-ratio")
				b.ReportMetric(oursG/base, "gtid-vs-file-canal")
			}
		})
	}
}

func writeCoupons(b *testing.B, dsn string, txns, per int) {
	pool, err := sql.Open("mysql", dsn)
	require.NoError(b, err)
	defer pool.Close()
	pool.SetMaxOpenConns(16)
	var wg sync.WaitGroup
	const workers = 16
	for w := range workers {
		wg.Go(func() {
			vals := strings.TrimSuffix(strings.Repeat("(3, 'u', 'app', 1, NOW(), NOW()),", per), ",")
			q := "INSERT INTO user_coupon (template_id, user_id, channel, status, claimed_at, expires_at) VALUES " + vals
			for i := w; i < txns; i += workers {
				if _, err := pool.Exec(q); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

type noopHandler struct {
	gocanal.DummyEventHandler
	target Position
	rows   int
	first  time.Time
	done   chan struct{}
	once   sync.Once
}

func (h *noopHandler) OnRow(e *gocanal.RowsEvent) error {
	if h.rows == 0 {
		h.first = time.Now()
	}
	h.rows += len(e.Rows)
	return nil
}

func (h *noopHandler) OnPosSynced(hd *replication.EventHeader, p mysql.Position, _ mysql.GTIDSet, _ bool) error {
	if hd != nil && hd.EventType != replication.ROTATE_EVENT && (Position{File: p.Name, Pos: p.Pos}).Compare(h.target) >= 0 {
		h.once.Do(func() { close(h.done) })
	}
	return nil
}

// noopCanal returns a no-op canal's rows/s over [from, target].
func noopCanal(b *testing.B, cfg Config, from, target Position) float64 {
	tl, err := New(cfg)
	require.NoError(b, err)
	c, err := gocanal.NewCanal(&gocanal.Config{Addr: cfg.Addr, User: cfg.User, Password: cfg.Password, Charset: "utf8mb4",
		ServerID: tl.cfg.ServerID, Flavor: "mariadb", IncludeTableRegex: []string{tableRegex(tl.cfg.Mapping.SourceTables())},
		ParseTime: true, Logger: cfg.Logger, DisableRetrySync: true})
	require.NoError(b, err)
	h := &noopHandler{target: target, done: make(chan struct{})}
	c.SetEventHandler(h)
	go func() {
		if from.GTID != "" {
			set, _ := mysql.ParseGTIDSet("mariadb", from.GTID)
			_ = c.StartFromGTID(set)
		} else {
			_ = c.RunFrom(mysql.Position{Name: from.File, Pos: from.Pos})
		}
	}()
	<-h.done
	d := time.Since(h.first)
	c.Close()
	return float64(h.rows) / d.Seconds()
}

// tailerRate returns the tailer's rows/s over [from, target], from the
// delivery of its first batch.
func tailerRate(b *testing.B, cfg Config, from, target Position) float64 {
	tl, err := New(cfg)
	require.NoError(b, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	var first time.Time
	var firstRows, rows int
	h := handlerFunc(func(_ context.Context, bt *Batch) error {
		if bt.Rows > 0 && firstRows == 0 {
			first, firstRows = time.Now(), bt.Rows
		}
		rows += bt.Rows
		if bt.End.Compare(target) >= 0 && rows > 0 {
			close(done)
			<-ctx.Done()
		}
		return nil
	})
	errc := make(chan error, 1)
	go func() { errc <- tl.Run(ctx, from, h) }()
	select {
	case <-done:
	case err := <-errc:
		b.Fatalf("tailer: %v", err)
	}
	d := time.Since(first)
	cancel()
	<-errc
	return float64(rows-firstRows) / d.Seconds()
}
