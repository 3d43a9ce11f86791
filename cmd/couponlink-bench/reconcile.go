package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/inventory"
	"github.com/couponlink/couponlink/migrations"
	"github.com/couponlink/couponlink/reconcile"
	"github.com/couponlink/couponlink/sink"
)

// Row 6: reconcile passes over -reconcile-rows user coupons, in a database
// of its own (recSchema, Redis DB 1) on the private server, so that the
// other phases' rows do not count and their keys do not mix.
//
// The coupons are seeded with INSERT … SELECT from MariaDB's sequence
// engine with sql_log_bin=0 (no binlog: the cdc then bootstraps from a
// snapshot, as on a first start over an existing table): 100 templates ×
// 10 channels, statuses 1–4 in equal parts, every bucket holding exactly
// rows/1000 coupons, and channel_quota.claimed set to match. For each size
// (ascending; the larger one adds rows to the smaller one's) an in-process
// cdc (sink.Daemon) rebuilds its counters and Redis keys from a snapshot;
// then -reps passes of reconcile.Reconciler (with the binlog) are timed
// for each -reconcile-readers (the transactions that count the snapshot),
// each with Handler_read_* and Innodb_buffer_pool_read* of SHOW GLOBAL
// STATUS around it. Every pass must
// be clean and, after them, counters = GROUP BY and Redis = quota − claimed,
// checked in a state the cdc has caught up to (recCheck: the cdc writes
// too, releasing the seed's RETURNED coupons).

const (
	recSchema    = "couponlink_rec"
	recTemplates = 100
	recChannels  = 10
	recRedisDB   = 1
	recCPName    = "bench-reconcile"
	recSeedChunk = 1_000_000
)

type recPass struct {
	took, snapshot, catchUp, replay time.Duration
	readNext, readKey, readRndNext  int64
	poolReads, poolRequests         int64 // Innodb_buffer_pool_reads (pages read from disk), _read_requests
	readers                         int   // transactions that counted the snapshot
	status                          string
	diffs                           int
	coupons                         int64
	pairs                           int
}

type recStep struct {
	rows      int64
	seedAdd   time.Duration // adding this step's rows (and the quota update)
	seedTotal time.Duration // all the seeding up to this size
	bootstrap time.Duration // cdc rebuild until counters and Redis were complete
	passes    [][]recPass   // per -reconcile-readers, in its order
	verify    string
}

// median is the pass of median total time with the i-th -reconcile-readers.
func (s recStep) median(i int) recPass {
	return medianBy(s.passes[i], func(p recPass) time.Duration { return p.took })
}

// runReconcile runs row 6: for each size, ascending, seed up to it,
// bootstrap a cdc over it and time the passes.
func runReconcile(ctx context.Context, cfg config, e *env, log *slog.Logger) ([]recStep, error) {
	log.Info("phase 5: reconcile passes", "rows", cfg.recRows, "schema", recSchema)
	rb, err := openRecBench(ctx, cfg, e, log)
	defer rb.close()
	if err != nil {
		return nil, err
	}
	var steps []recStep
	var have int64
	var seeded time.Duration
	for _, n := range cfg.recRows {
		st, err := rb.step(ctx, have, n, seeded)
		if err != nil {
			return steps, err
		}
		have, seeded = n, st.seedTotal
		steps = append(steps, st)
	}
	return steps, nil
}

// recBench is row 6's own database (recSchema) and Redis DB (recRedisDB).
type recBench struct {
	cfg        config
	e          *env
	dsn        string
	db         *sql.DB
	rdb        *redis.Client
	log, quiet *slog.Logger
}

// openRecBench migrates recSchema, empties the Redis DB and creates the
// templates, with room for the largest size; close undoes what was done,
// also after an error.
func openRecBench(ctx context.Context, cfg config, e *env, log *slog.Logger) (*recBench, error) {
	rb := &recBench{cfg: cfg, e: e, dsn: fmt.Sprintf("root@tcp(127.0.0.1:%d)/%s", e.mysqlPort, recSchema), log: log, quiet: quietLogger(log)}
	if _, err := migrations.Up(rb.dsn); err != nil {
		return rb, fmt.Errorf("migrate %s: %w", recSchema, err)
	}
	var err error
	if rb.db, err = openMySQL(rb.dsn, 8); err != nil {
		return rb, err
	}
	rb.rdb = redis.NewClient(&redis.Options{Addr: e.redisAddr, DB: recRedisDB})
	if err := rb.rdb.FlushDB(ctx).Err(); err != nil {
		return rb, fmt.Errorf("flush Redis DB %d: %w", recRedisDB, err)
	}
	perBucketQuota := slices.Max(cfg.recRows)/(recTemplates*recChannels) + 1000
	return rb, recTemplatesCreate(ctx, rb.db, perBucketQuota)
}

func (rb *recBench) close() {
	if rb.rdb != nil {
		rb.rdb.Close()
	}
	if rb.db != nil {
		rb.db.Close()
	}
}

// tailer is the binlog configuration of the cdc and of the reconciler.
func (rb *recBench) tailer() (canal.Config, error) {
	tcfg, err := canal.ConfigFromDSN(rb.dsn)
	tcfg.Logger = rb.quiet
	return tcfg, err
}

// step seeds the coupons from have up to n (seeding having taken seeded
// so far), bootstraps an in-process cdc over them, times the passes and,
// with the cdc still running, checks the store.
func (rb *recBench) step(ctx context.Context, have, n int64, seeded time.Duration) (recStep, error) {
	st := recStep{rows: n}
	t0 := time.Now()
	if err := recSeed(ctx, rb.db, have, n, rb.log); err != nil {
		return st, err
	}
	st.seedAdd = time.Since(t0)
	st.seedTotal = seeded + st.seedAdd
	rb.log.Info("seeded", "rows", n, "took", st.seedAdd.Round(time.Millisecond), "total", st.seedTotal.Round(time.Millisecond))

	stop, took, err := rb.startCDC(ctx, n)
	if err != nil {
		return st, fmt.Errorf("cdc bootstrap over %d coupons: %w", n, err)
	}
	defer stop()
	st.bootstrap = took
	rb.log.Info("cdc bootstrapped", "rows", n, "took", took.Round(time.Millisecond))
	defer inventory.SetSnapshotReaders(inventory.SetSnapshotReaders(inventory.DefaultSnapshotReaders))
	for _, readers := range rb.cfg.recReaders {
		inventory.SetSnapshotReaders(readers)
		ps, err := rb.passes(ctx, n)
		st.passes = append(st.passes, ps)
		if err != nil {
			return st, err
		}
	}
	// with the cdc still running: it must have caught up with its own releases
	if st.verify, err = recCheck(ctx, rb.db, rb.rdb); err != nil {
		return st, fmt.Errorf("verify %s after the passes: %w", recSchema, err)
	}
	rb.log.Info("after the reconcile passes", "rows", n, "check", st.verify)
	return st, nil
}

// passes times -reps reconcile passes over n coupons; each must be clean
// and count all n.
func (rb *recBench) passes(ctx context.Context, n int64) ([]recPass, error) {
	tcfg, err := rb.tailer()
	if err != nil {
		return nil, err
	}
	r, err := reconcile.New(reconcile.Config{DB: rb.db, Checkpoint: recCPName, Binlog: tcfg, Redis: rb.rdb,
		Logger: rb.quiet, Registerer: prometheus.NewRegistry(), QuietWindow: 200 * time.Millisecond})
	if err != nil {
		return nil, err
	}
	var out []recPass
	for i := range rb.cfg.reps {
		p, err := recTimePass(ctx, rb.e.db, r)
		if err != nil {
			return out, fmt.Errorf("pass %d over %d coupons: %w", i+1, n, err)
		}
		rb.log.Info("reconcile pass", "rows", n, "readers", p.readers, "took", p.took.Round(time.Millisecond), "snapshot", p.snapshot.Round(time.Millisecond),
			"catch_up", p.catchUp.Round(time.Millisecond), "replay", p.replay.Round(time.Millisecond), "read_next", p.readNext,
			"pages_read", p.poolReads, "page_requests", p.poolRequests, "status", p.status)
		if p.status != "clean" || p.coupons != n {
			return out, fmt.Errorf("pass %d over %d coupons: status %s, %d differences, %d coupons counted (want clean, %d)",
				i+1, n, p.status, p.diffs, p.coupons, n)
		}
		out = append(out, p)
	}
	return out, nil
}

// recTemplatesCreate makes templates 1..100 of 10 channels ch0..ch9.
func recTemplatesCreate(ctx context.Context, db *sql.DB, perBucket int64) error {
	var vals, qs []string
	for t := 1; t <= recTemplates; t++ {
		vals = append(vals, fmt.Sprintf("(%d, 'bench reconcile %d', %d, %d)", t, t, perBucket*recChannels, 90*24*3600))
		for c := range recChannels {
			qs = append(qs, fmt.Sprintf("(%d, 'ch%d', %d, 0)", t, c, perBucket))
		}
	}
	for _, q := range []string{
		"INSERT INTO coupon_template (id, name, total_quota, valid_seconds) VALUES " + strings.Join(vals, ","),
		"INSERT INTO channel_quota (template_id, channel, quota, claimed) VALUES " + strings.Join(qs, ","),
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("create the reconcile templates: %w", err)
		}
	}
	return nil
}

// recSeed adds coupons seq from..to-1 and sets claimed to to/1000 per
// bucket less the slots the last size's cdc already released (the claim
// guard: claimed = coupons − released), without binlog.
func recSeed(ctx context.Context, db *sql.DB, from, to int64, log *slog.Logger) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SET SESSION sql_log_bin = 0"); err != nil {
		return fmt.Errorf("SET sql_log_bin = 0: %w", err)
	}
	defer conn.ExecContext(context.Background(), "SET SESSION sql_log_bin = 1") //nolint:errcheck
	for lo := from; lo < to; lo += recSeedChunk {
		hi := min(lo+recSeedChunk, to) - 1
		q := fmt.Sprintf(`INSERT INTO user_coupon (template_id, user_id, channel, status, claimed_at, expires_at)
			SELECT 1 + (seq DIV %d) %% %d, CONCAT('u', seq), CONCAT('ch', seq %% %d), 1 + (seq DIV 1000) %% 4, NOW(6), NOW(6) + INTERVAL 1 DAY
			FROM seq_%d_to_%d`, recChannels, recTemplates, recChannels, lo, hi)
		t0 := time.Now()
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("seed user_coupon %d..%d: %w", lo, hi, err)
		}
		log.Debug("seed chunk", "from", lo, "to", hi, "took", time.Since(t0))
	}
	if _, err := conn.ExecContext(ctx, `UPDATE channel_quota q SET claimed = ? - (SELECT COUNT(*) FROM inventory_flow f
		WHERE f.kind = 'release' AND f.template_id = q.template_id AND f.channel = q.channel)`, to/(recTemplates*recChannels)); err != nil {
		return fmt.Errorf("set channel_quota.claimed: %w", err)
	}
	return nil
}

// startCDC starts an in-process cdc that rebuilds from a snapshot and
// waits until its counters hold n coupons and every Redis bucket key says
// quota − claimed (as channel_quota says now: the cdc's first release round
// may already have moved it). stop ends it.
func (rb *recBench) startCDC(ctx context.Context, n int64) (func(), time.Duration, error) {
	t0 := time.Now()
	db, rdb := rb.db, rb.rdb
	s, err := sink.New(sink.Config{DB: db, Name: recCPName, Redis: rdb, Logger: rb.quiet, Registerer: prometheus.NewRegistry()})
	if err != nil {
		return nil, 0, err
	}
	tcfg, err := rb.tailer()
	if err != nil {
		return nil, 0, err
	}
	d := &sink.Daemon{Sink: s, Tailer: tcfg, Rebuild: true, RetryWait: 500 * time.Millisecond}
	runCtx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- d.Run(runCtx) }()
	stop := func() {
		cancel()
		<-errc
	}
	err = poll(ctx, 100*time.Millisecond, 15*time.Minute, func() (bool, error) {
		select {
		case err := <-errc:
			errc <- err // for stop
			return false, fmt.Errorf("the cdc stopped: %v", err)
		default:
		}
		var sum, pairs int64
		err := db.QueryRowContext(ctx, `SELECT COALESCE(SUM(held + used + expired + returned), 0), COUNT(*) FROM inventory_counter`).Scan(&sum, &pairs)
		if err != nil || sum != n || pairs != recTemplates*recChannels {
			return false, nil
		}
		ok, err := recKeysFollow(ctx, db, rdb)
		return err == nil && ok, nil
	})
	if errors.Is(err, errTimedOut) {
		err = errors.New("counters or Redis keys incomplete after 15 minutes")
	}
	if err != nil {
		stop()
		return nil, 0, err
	}
	return stop, time.Since(t0), nil
}

// recCheck checks the store (verifyStore: counters = GROUP BY user_coupon,
// Redis = quota − claimed) in a state the running cdc has caught up to.
// The cdc writes too: the seed's RETURNED coupons are due releases from its
// bootstrap on (500 a round, every -release-every), and a round that commits
// just before a check moves channel_quota ahead of the Redis keys until the
// cdc reads it back. So each attempt notes the cdc's writes (release rows,
// transfers), waits until its checkpoint reaches the server's binlog
// position and its keys follow channel_quota, checks, and counts again: a
// check during which the cdc wrote is done again.
func recCheck(ctx context.Context, db *sql.DB, rdb *redis.Client) (string, error) {
	const attempts = 5
	for range attempts {
		before, err := recCDCWrites(ctx, db)
		if err != nil {
			return "", err
		}
		if err := recCaughtUp(ctx, db, rdb); err != nil {
			return "", err
		}
		verify, err := verifyStore(ctx, db, rdb)
		if err != nil {
			return "", err
		}
		if after, err := recCDCWrites(ctx, db); err != nil || after == before {
			return verify, err
		}
	}
	return "", fmt.Errorf("the cdc released or moved quota during each of %d checks", attempts)
}

// recCDCWrites counts what the cdc wrote to channel_quota on its own:
// release rows and quota transfers.
func recCDCWrites(ctx context.Context, db *sql.DB) (int64, error) {
	var n int64
	err := db.QueryRowContext(ctx, `SELECT (SELECT COUNT(*) FROM inventory_flow WHERE kind = 'release') +
		(SELECT COUNT(*) FROM quota_transfer_log)`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count the cdc's releases and transfers: %w", err)
	}
	return n, nil
}

// recCaughtUp waits until the cdc's checkpoint reaches the server's binlog
// position as of the call (it fails if it does not within a minute), then,
// for at most 10 s, until the Redis keys (written just after each
// checkpoint commit) follow channel_quota; keys still off are left for the
// check to report.
func recCaughtUp(ctx context.Context, db *sql.DB, rdb *redis.Client) error {
	target, err := canal.CurrentPosition(ctx, db)
	if err != nil {
		return err
	}
	var cp inventory.Checkpoint
	err = poll(ctx, 10*time.Millisecond, time.Minute, func() (bool, error) {
		c, found, err := inventory.LoadCheckpoint(ctx, db, recCPName)
		cp = c
		return found && c.Pos.File != "" && c.Pos.Compare(target) >= 0, err
	})
	if errors.Is(err, errTimedOut) {
		return fmt.Errorf("the cdc's checkpoint %s did not reach %s within a minute", cp.Pos, target)
	}
	if err != nil {
		return err
	}
	err = poll(ctx, 10*time.Millisecond, 10*time.Second, func() (bool, error) { return recKeysFollow(ctx, db, rdb) })
	if errors.Is(err, errTimedOut) {
		return nil
	}
	return err
}

// recKeysFollow reports whether every bucket's Redis key equals its
// quota − claimed now.
func recKeysFollow(ctx context.Context, db *sql.DB, rdb *redis.Client) (bool, error) {
	bad, _, err := stockDiffs(ctx, db, rdb)
	return err == nil && len(bad) == 0, err
}

// handlerReads selects the server's Handler_read_* counters and the
// buffer pool's reads.
const handlerReads = "WHERE Variable_name LIKE 'Handler_read%' OR Variable_name LIKE 'Innodb_buffer_pool_read%'"

// recTimePass runs one pass with the server's handler counters around it.
func recTimePass(ctx context.Context, sdb *sql.DB, r *reconcile.Reconciler) (recPass, error) {
	before, err := globalStatus(ctx, sdb, handlerReads)
	if err != nil {
		return recPass{}, err
	}
	t0 := time.Now()
	rep, err := r.Pass(ctx)
	took := time.Since(t0)
	if err != nil {
		return recPass{}, err
	}
	after, err := globalStatus(ctx, sdb, handlerReads)
	if err != nil {
		return recPass{}, err
	}
	if !rep.CountersCompared {
		return recPass{}, fmt.Errorf("counters not compared: %s", rep.Note)
	}
	return recPass{took: took, snapshot: rep.SnapshotTook, catchUp: rep.CatchUpTook, replay: rep.ReplayTook,
		readNext: after["Handler_read_next"] - before["Handler_read_next"],
		readKey:  after["Handler_read_key"] - before["Handler_read_key"], readRndNext: after["Handler_read_rnd_next"] - before["Handler_read_rnd_next"],
		poolReads:    after["Innodb_buffer_pool_reads"] - before["Innodb_buffer_pool_reads"],
		poolRequests: after["Innodb_buffer_pool_read_requests"] - before["Innodb_buffer_pool_read_requests"],
		readers:      rep.SnapshotReaders, status: rep.Status, diffs: len(rep.Differences), coupons: rep.Coupons, pairs: rep.Pairs}, nil
}

// reconcile adds row 6: one line per size (and per -reconcile-readers
// when several), and the growth from the smallest to the largest.
func (r *Report) reconcile(cfg config, steps []recStep) {
	several := len(cfg.recReaders) > 1
	readersOf := func(i int) string {
		if !several {
			return ""
		}
		return fmt.Sprintf(", snapshot counted by %d", cfg.recReaders[i])
	}
	for _, st := range steps {
		for i := range st.passes {
			if len(st.passes[i]) == 0 {
				continue
			}
			m := st.median(i)
			var tooks []string
			for _, p := range st.passes[i] {
				tooks = append(tooks, sec(p.took))
			}
			r.add(Row{ID: "6", What: fmt.Sprintf("Reconcile pass over %s user coupons (%d templates × %d channels)%s, median of %d",
				count(st.rows), recTemplates, recChannels, readersOf(i), len(st.passes[i])),
				Ours:    fmt.Sprintf("%s (snapshot %s, replay %s); %s rows read", sec(m.took), sec(m.snapshot), sec(m.replay), count(m.readNext)),
				OursNum: m.took.Seconds(), Peer: "—", Ratio: "—", Target: "linear in rows",
				Settings: fmt.Sprintf("passes %s; catch-up wait %s; snapshot counted by %d transaction(s) (-reconcile-readers %d); Handler_read_next %d, Handler_read_key %d, Handler_read_rnd_next %d, "+
					"Innodb_buffer_pool_reads %d (pages from disk), Innodb_buffer_pool_read_requests %d (SHOW GLOBAL STATUS around the median pass, whole server); "+
					"status %s, %d buckets, %d coupons counted; seeded by INSERT … SELECT FROM seq_* (sql_log_bin=0, %d-row chunks) in %s (this size's rows: %s); "+
					"in-process cdc (sink.Daemon -rebuild) bootstrap %s; reconcile.Reconciler with the binlog, Redis compared (DB %d), schema %s; after the passes: %s",
					strings.Join(tooks, ", "), sec(m.catchUp), m.readers, cfg.recReaders[i], m.readNext, m.readKey, m.readRndNext, m.poolReads, m.poolRequests,
					m.status, m.pairs, m.coupons, recSeedChunk, sec(st.seedTotal), sec(st.seedAdd), sec(st.bootstrap), recRedisDB, recSchema, st.verify)})
		}
	}
	if len(steps) < 2 {
		return
	}
	a, b := steps[0], steps[len(steps)-1]
	for i := range b.passes {
		if len(a.passes[i]) == 0 || len(b.passes[i]) == 0 {
			continue
		}
		ma, mb := a.median(i), b.median(i)
		rows := float64(b.rows) / float64(a.rows)
		r.add(Row{ID: "6", What: fmt.Sprintf("Reconcile growth %s → %s coupons (×%.0f rows)%s", count(a.rows), count(b.rows), rows, readersOf(i)),
			Ours: fmt.Sprintf("×%.2f time, ×%.2f rows read, pages from disk %d → %d", ratioDur(mb.took, ma.took),
				float64(mb.readNext)/float64(max(1, ma.readNext)), ma.poolReads, mb.poolReads),
			Peer: fmt.Sprintf("×%.0f (linear)", rows), OursNum: ratioDur(mb.took, ma.took), PeerNum: rows,
			Target:   "≤ 1 (linear or better)",
			Settings: fmt.Sprintf("median pass %s vs %s; ratio = time growth / row growth", sec(mb.took), sec(ma.took))})
	}
}
