package canal

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/internal/testenv"
)

// collector is a Handler that keeps a deep copy of every batch.
type collector struct {
	mu      sync.Mutex
	batches []Batch
	notify  chan struct{}
}

func newCollector() *collector { return &collector{notify: make(chan struct{}, 1)} }

func (c *collector) ApplyBatch(_ context.Context, b *Batch) error {
	cp := *b
	cp.Transitions = slices.Clone(b.Transitions)
	cp.Redemptions = slices.Clone(b.Redemptions)
	cp.Flows = slices.Clone(b.Flows)
	cp.Quotas = slices.Clone(b.Quotas)
	cp.Templates = slices.Clone(b.Templates)
	c.mu.Lock()
	c.batches = append(c.batches, cp)
	c.mu.Unlock()
	select {
	case c.notify <- struct{}{}:
	default:
	}
	return nil
}

// waitEnd waits until a batch ending at or after target arrived, and
// returns the batches up to and including the first such one.
func (c *collector) waitEnd(t *testing.T, target Position, errc <-chan error) []Batch {
	t.Helper()
	deadline := time.After(15 * time.Second)
	for {
		c.mu.Lock()
		for i, b := range c.batches {
			if b.End.Compare(target) >= 0 {
				out := slices.Clone(c.batches[:i+1])
				c.mu.Unlock()
				return out
			}
		}
		c.mu.Unlock()
		select {
		case <-c.notify:
		case err := <-errc:
			t.Fatalf("tailer stopped before %s: %v", target, err)
		case <-deadline:
			t.Fatalf("no batch reached %s in time", target)
		}
	}
}

// startTailer runs a tailer in the background; stop cancels it and
// returns Run's result.
func startTailer(t *testing.T, cfg Config, from Position) (*collector, <-chan error, func() error) {
	t.Helper()
	tl, err := New(cfg)
	require.NoError(t, err)
	c := newCollector()
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { errc <- tl.Run(ctx, from, c) }()
	var once sync.Once
	var runErr error
	stop := func() error {
		once.Do(func() {
			cancel()
			select {
			case runErr = <-errc:
			case <-time.After(10 * time.Second):
				runErr = fmt.Errorf("Run did not return after cancel")
			}
		})
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	return c, errc, stop
}

func testConfig(t *testing.T, dsn string) Config {
	cfg, err := ConfigFromDSN(dsn)
	require.NoError(t, err)
	cfg.BatchRows = 2 // cut after nearly every transaction, never inside one
	cfg.HeartbeatPeriod = 100 * time.Millisecond
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	return cfg
}

// txWriter runs each function in one transaction on one connection and
// records the GTID it committed.
type txWriter struct {
	t     *testing.T
	conn  *sql.Conn
	gtids []string
}

func (w *txWriter) tx(stmts ...string) {
	w.t.Helper()
	ctx := context.Background()
	tx, err := w.conn.BeginTx(ctx, nil)
	require.NoError(w.t, err)
	for _, s := range stmts {
		_, err := tx.ExecContext(ctx, s)
		require.NoError(w.t, err, s)
	}
	require.NoError(w.t, tx.Commit())
	var g string
	require.NoError(w.t, w.conn.QueryRowContext(ctx, "SELECT @@last_gtid").Scan(&g))
	w.gtids = append(w.gtids, g)
}

func allOf(batches []Batch) (ts []Transition, rs []Redemption, qs []QuotaChange) {
	for _, b := range batches {
		ts = append(ts, b.Transitions...)
		rs = append(rs, b.Redemptions...)
		qs = append(qs, b.Quotas...)
	}
	return
}

// strip drops the timestamps, which the test cannot know.
func strip(ts []Transition) []Transition {
	out := slices.Clone(ts)
	for i := range out {
		out[i].At = time.Time{}
	}
	return out
}

func TestTailerEndToEnd(t *testing.T) {
	ctx := context.Background()
	db, dsn := testenv.MySQL(t)
	cfg := testConfig(t, dsn)
	start, err := CurrentPosition(ctx, db)
	require.NoError(t, err)
	require.NotEmpty(t, start.GTID)

	// Tail while writing.
	c, errc, stop := startTailer(t, cfg, start)

	conn, err := db.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	w := &txWriter{t: t, conn: conn}
	const ins = "INSERT INTO user_coupon (template_id, user_id, channel, status, claimed_at, expires_at) VALUES "
	w.tx("INSERT INTO coupon_template (id, name, total_quota, valid_seconds) VALUES (3, 't', 1000, 86400)", // not subscribed
		"INSERT INTO channel_quota (template_id, channel, quota) VALUES (3, 'app', 1000)")
	w.tx(ins + "(3, 'u1', 'app', 1, NOW(), NOW()), (3, 'u2', 'app', 1, NOW(), NOW()), (3, 'u3', 'web', 1, NOW(), NOW())")
	w.tx("UPDATE user_coupon SET status = 2, order_id = 'o1' WHERE id = 1",
		"INSERT INTO redemption_log (user_coupon_id, template_id, channel, order_id, redeemed_at, idempotency_key) VALUES (1, 3, 'app', 'o1', NOW(), 'o1/1')")
	w.tx("UPDATE user_coupon SET status = 3 WHERE id = 2")
	big := make([]string, 100)
	for i := range big {
		big[i] = ins + fmt.Sprintf("(3, 'b%d', 'app', 1, NOW(), NOW())", i)
	}
	w.tx(big...)
	w.tx("DELETE FROM user_coupon WHERE id = 3")
	w.tx("UPDATE channel_quota SET claimed = 103 WHERE template_id = 3 AND channel = 'app'")
	w.tx("UPDATE user_coupon SET version = version + 1 WHERE id = 1") // no transition
	w.tx("UPDATE user_coupon SET status = 4 WHERE id = 1")
	target, err := CurrentPosition(ctx, db)
	require.NoError(t, err)

	batches := c.waitEnd(t, target, errc)
	require.NoError(t, stop())

	// Transitions, exactly and in order.
	tr := func(id int64, ch string, from, to coupon.Status, order string) Transition {
		user := fmt.Sprintf("u%d", id)
		if id > 3 {
			user = fmt.Sprintf("b%d", id-4)
		}
		prev := order // the before image's order: none before the redemption
		if from == coupon.Available {
			prev = ""
		}
		return Transition{Coupon: id, Template: 3, Channel: ch, From: from, To: to, FromCode: refCode(from), ToCode: refCode(to),
			PrevTemplate: 3, PrevChannel: ch, Order: order, PrevOrder: prev, User: user, PrevUser: user}
	}
	want := []Transition{
		tr(1, "app", coupon.None, coupon.Available, ""), tr(2, "app", coupon.None, coupon.Available, ""), tr(3, "web", coupon.None, coupon.Available, ""),
		tr(1, "app", coupon.Available, coupon.Used, "o1"),
		tr(2, "app", coupon.Available, coupon.Expired, ""),
	}
	for i := range 100 {
		want = append(want, tr(int64(4+i), "app", coupon.None, coupon.Available, ""))
	}
	want = append(want, tr(3, "web", coupon.Available, coupon.None, ""), tr(1, "app", coupon.Used, coupon.Returned, "o1"))
	ts, rs, qs := allOf(batches)
	require.Equal(t, want, strip(ts))
	require.Len(t, rs, 1)
	require.Equal(t, Redemption{ID: 1, Coupon: 1, Template: 3, Channel: "app", Order: "o1", At: rs[0].At, After: rs[0].After}, rs[0]) // After: batch-relative
	require.WithinDuration(t, time.Now(), rs[0].At, time.Minute)
	require.Equal(t, []QuotaChange{{Template: 3, Channel: "app", Quota: 1000, Inserted: true}, {Template: 3, Channel: "app", Quota: 1000, Claimed: 103, Updated: true, PrevQuota: 1000}}, qs)

	// Batches are cut at transaction ends only: the 100-row transaction is
	// in one batch.
	rows := 0
	for _, b := range batches {
		rows += b.Rows
		if b.Heartbeat {
			continue
		}
		var n int
		for _, x := range b.Transitions {
			if x.Coupon >= 4 && x.Coupon <= 103 && x.From == coupon.None {
				n++
			}
		}
		require.Contains(t, []int{0, 100}, n, "the 100-row transaction was split: %d rows in one batch", n)
	}
	require.Equal(t, 1+3+2+1+100+1+1+1+1, rows) // every row change, silent ones too
	last := batches[len(batches)-1]
	if now, err := CurrentPosition(ctx, db); err == nil && now == target {
		require.Equal(t, target, last.End) // no other test wrote meanwhile
	}
	require.GreaterOrEqual(t, gtidSeq(t, last.End.GTID), gtidSeq(t, w.gtids[len(w.gtids)-1]))

	// Resume from a batch in the middle, by GTID and by file/offset: the
	// stream goes on with the next transaction, nothing lost or repeated.
	var mid int
	for i, b := range batches {
		if !b.Heartbeat && len(b.Transitions) > 0 && b.Transitions[len(b.Transitions)-1].To == coupon.Used {
			mid = i // the batch that ends with the redemption transaction
		}
	}
	require.NotZero(t, mid, "no batch ends right after the redemption transaction")
	// Each End is a transaction boundary whose GTID position is the one the
	// server computes for that file and offset.
	for _, b := range []Batch{batches[mid], last} {
		g, err := binlogGTIDPos(ctx, db, b.End.File, b.End.Pos)
		require.NoError(t, err)
		require.Equal(t, g, b.End.GTID, "GTID of batch ending at %s", b.End)
	}
	before, _, _ := allOf(batches[:mid+1])
	rest := want[len(before):]
	require.Equal(t, tr(2, "app", coupon.Available, coupon.Expired, ""), rest[0])
	for _, from := range []Position{{GTID: batches[mid].End.GTID}, {File: batches[mid].End.File, Pos: batches[mid].End.Pos}} {
		t.Run("resume from "+from.String(), func(t *testing.T) {
			c, errc, stop := startTailer(t, cfg, from)
			again := c.waitEnd(t, target, errc)
			require.NoError(t, stop())
			ts, _, qs := allOf(again)
			require.Equal(t, rest, strip(ts))
			require.Equal(t, []QuotaChange{{Template: 3, Channel: "app", Quota: 1000, Claimed: 103, Updated: true, PrevQuota: 1000}}, qs)
			end := again[len(again)-1].End
			g, err := binlogGTIDPos(ctx, db, end.File, end.Pos)
			require.NoError(t, err)
			require.Equal(t, g, end.GTID)
		})
	}
}

func gtidSeq(t *testing.T, g string) uint64 {
	t.Helper()
	gs, err := parseMariaGTIDs(g)
	require.NoError(t, err)
	for _, d := range gs.doms {
		if d.domain == 0 {
			return d.seq
		}
	}
	t.Fatalf("no domain 0 in %q", g)
	return 0
}

func TestTailerHeartbeat(t *testing.T) {
	tl, start := newTailerAtEnd(t)
	c, errc, stop := startTailerWith(t, tl, start)
	// With nothing to deliver, heartbeats come anyway, at a transaction end.
	b := c.waitEnd(t, start, errc)
	require.NoError(t, stop())
	require.True(t, b[0].Heartbeat)
	require.Zero(t, b[0].Rows)
	require.GreaterOrEqual(t, b[0].End.Compare(start), 0)
	require.NotEmpty(t, b[0].End.GTID)
	require.NotZero(t, tl.Stats().Batches)
}

// newTailerAtEnd is a tailer of configAtEnd's, and where it starts.
func newTailerAtEnd(t *testing.T) (*Tailer, Position) {
	t.Helper()
	cfg, start := configAtEnd(t)
	tl, err := New(cfg)
	require.NoError(t, err)
	return tl, start
}

// configAtEnd is testConfig of a new database and the binlog's current
// end, where a tailer starts to see what the test writes next.
func configAtEnd(t *testing.T) (Config, Position) {
	t.Helper()
	db, dsn := testenv.MySQL(t)
	start, err := CurrentPosition(context.Background(), db)
	require.NoError(t, err)
	return testConfig(t, dsn), start
}

func startTailerWith(t *testing.T, tl *Tailer, from Position) (*collector, <-chan error, func() error) {
	c := newCollector()
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { errc <- tl.Run(ctx, from, c) }()
	stop := func() error { cancel(); return <-errc }
	return c, errc, stop
}

func TestTailerPurgedPosition(t *testing.T) {
	ctx := context.Background()
	cfg, cur := configAtEnd(t)
	for _, from := range []Position{
		{GTID: "0-1-" + fmt.Sprint(gtidSeq(t, cur.GTID)+1_000_000)}, // a GTID the server never wrote
		{GTID: "0-77777-5"},
		{File: "mysql-bin.999999", Pos: 4}, // a file it does not have
	} {
		t.Run(from.String(), func(t *testing.T) {
			tl, err := New(cfg)
			require.NoError(t, err)
			runCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			err = tl.Run(runCtx, from, newCollector())
			require.ErrorIs(t, err, ErrBinlogPurged)
			require.ErrorContains(t, err, "couponlink cdc --rebuild")
		})
	}
}

func TestTailerRefusesBadServerOrMapping(t *testing.T) {
	ctx := context.Background()
	cfg, cur := configAtEnd(t)
	cfg.Mapping = DefaultMapping()
	cfg.Mapping.UserCoupon.Status = "state"
	tl, err := New(cfg)
	require.NoError(t, err)
	err = tl.Run(ctx, cur, newCollector())
	require.ErrorContains(t, err, `user_coupon.status names column "state"`)
	require.True(t, strings.HasPrefix(err.Error(), "canal: mapping: "), err.Error())

	_, err = New(Config{Addr: "x:1", Mapping: DefaultMapping()})
	require.ErrorContains(t, err, "has no schema")
}

// A broken connection is resumed from the last commit: nothing is lost or
// delivered twice.
func TestTailerResumesBrokenConnection(t *testing.T) {
	ctx := context.Background()
	db, dsn := testenv.MySQL(t)
	cfg := testConfig(t, dsn)
	proxy := testenv.NewTCPProxy(t, cfg.Addr)
	cfg.Addr = proxy.Addr()
	start, err := CurrentPosition(ctx, db)
	require.NoError(t, err)
	tl, err := New(cfg)
	require.NoError(t, err)
	tl.backoff = 20 * time.Millisecond
	c, errc, stop := startTailerWith(t, tl, start)

	const ins = "INSERT INTO user_coupon (template_id, user_id, channel, status, claimed_at, expires_at) VALUES "
	mustExec(t, db, ins+"(3, 'u1', 'app', 1, NOW(), NOW()), (3, 'u2', 'app', 1, NOW(), NOW())")
	p1, err := CurrentPosition(ctx, db)
	require.NoError(t, err)
	c.waitEnd(t, p1, errc)
	proxy.CloseAll()
	mustExec(t, db, "UPDATE user_coupon SET status = 2 WHERE id = 1")
	mustExec(t, db, ins+"(3, 'u3', 'app', 1, NOW(), NOW())")
	p2, err := CurrentPosition(ctx, db)
	require.NoError(t, err)
	batches := c.waitEnd(t, p2, errc)
	require.NoError(t, stop())

	ts, _, _ := allOf(batches)
	tr := func(id int64, from, to coupon.Status) Transition {
		user := fmt.Sprintf("u%d", id)
		return Transition{Coupon: id, Template: 3, Channel: "app", From: from, To: to, FromCode: refCode(from), ToCode: refCode(to),
			PrevTemplate: 3, PrevChannel: "app", User: user, PrevUser: user}
	}
	require.Equal(t, []Transition{
		tr(1, coupon.None, coupon.Available), tr(2, coupon.None, coupon.Available),
		tr(1, coupon.Available, coupon.Used), tr(3, coupon.None, coupon.Available),
	}, strip(ts))
}

func mustExec(t *testing.T, db *sql.DB, q string) {
	t.Helper()
	_, err := db.Exec(q)
	require.NoError(t, err, q)
}

// Run waits for the batch in flight before it returns nil on cancellation,
// and returns the Handler's error.
func TestTailerHandlerInFlightAndError(t *testing.T) {
	ctx := context.Background()
	tl, start := newTailerAtEnd(t)

	h := &blockingHandler{entered: make(chan struct{}), release: make(chan struct{})}
	runCtx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- tl.Run(runCtx, start, h) }()
	<-h.entered // a heartbeat is being applied
	cancel()
	select {
	case err := <-errc:
		t.Fatalf("Run returned %v while the handler was applying a batch", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(h.release)
	require.NoError(t, <-errc)
	require.Equal(t, 1, h.applied)

	boom := errors.New("boom")
	err := tl.Run(ctx, start, handlerFunc(func(context.Context, *Batch) error { return boom }))
	require.ErrorIs(t, err, boom)
	require.ErrorContains(t, err, "apply batch ending at ")
}

type blockingHandler struct {
	entered, release chan struct{}
	applied          int
}

func (h *blockingHandler) ApplyBatch(ctx context.Context, b *Batch) error {
	close(h.entered)
	<-h.release
	h.applied++
	return nil
}

type handlerFunc func(context.Context, *Batch) error

func (f handlerFunc) ApplyBatch(ctx context.Context, b *Batch) error { return f(ctx, b) }

func TestSnapshotPosition(t *testing.T) {
	ctx := context.Background()
	db, _ := testenv.MySQL(t)
	mustExec(t, db, "INSERT INTO channel_quota (template_id, channel, quota) VALUES (1, 'a', 10)")
	before, err := CurrentPosition(ctx, db)
	require.NoError(t, err)
	tx, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer tx.Rollback()
	_, err = tx.ExecContext(ctx, "START TRANSACTION WITH CONSISTENT SNAPSHOT")
	require.NoError(t, err)
	snap, err := SnapshotPosition(ctx, tx)
	require.NoError(t, err)
	mustExec(t, db, "INSERT INTO channel_quota (template_id, channel, quota) VALUES (2, 'a', 10)")
	after, err := CurrentPosition(ctx, db)
	require.NoError(t, err)

	require.GreaterOrEqual(t, snap.Compare(before), 0)
	require.Less(t, snap.Compare(after), 0) // the later insert is after the snapshot
	require.GreaterOrEqual(t, gtidSeq(t, snap.GTID), gtidSeq(t, before.GTID))
	require.Less(t, gtidSeq(t, snap.GTID), gtidSeq(t, after.GTID))
	var n int
	require.NoError(t, tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM channel_quota").Scan(&n))
	require.Equal(t, 1, n)
}
