package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/migrations"
)

// Phase 6, sources: a legacy shop over one server against the same shop
// split over two servers (mapping sources:, one `couponlink cdc -source`
// per server), the same total of row changes; each cdc's catch-up beside
// a no-op reader over its own binlog range.

// srcCDC is one `couponlink cdc -source NAME` of the phase, its shop and
// what its timed catch-up gave.
type srcCDC struct {
	name    string // source name: -source, checkpoint name
	srv     *env   // its server
	clDB    string // couponlink's database on that server (counters, checkpoint)
	shop    string // the shop schema it follows
	mapping string // mapping file
	part    backlogPart

	// the timed catch-up
	from    canal.Position // its checkpoint before
	events0 int64          // events_applied before
	cdcRun                 // its last run
	noop    readerRun      // a no-op reader alone over [from, part.to]
}

// cp is its checkpoint.
func (c *srcCDC) cp() checkpointRef {
	return checkpointRef{c.srv.db, "`" + c.clDB + "`.cdc_checkpoint", c.name}
}

// rate is rows/s from process start; streamRate from its "tailing the
// binlog" line.
func (c *srcCDC) rate() float64 { return float64(c.part.rows) / c.took.Seconds() }
func (c *srcCDC) streamRate() float64 {
	return float64(c.part.rows) / (c.took - c.startup).Seconds()
}

func (c *srcCDC) cpuPerRow() time.Duration { return perRow(c.cpu, c.part.rows) }

// sourcesRep is one repetition: new backlogs, the timed runs over them.
type sourcesRep struct {
	oneWall, twoWall   time.Duration // cdc(s) started → (the last) checkpoint at its end
	noopTwo            time.Duration // both no-op readers started together → the last at its end
	dbOne, dbTwo       time.Duration // MariaDB CPU over the timed runs (both servers for two)
	oneWrite, twoWrite time.Duration // writing the backlogs (the halves in parallel)
	cdcs               []srcCDC      // one, a, b as they ended the repetition
}

// ratio is the two-source rate over the one-source rate.
func (r sourcesRep) ratio() float64 { return r.oneWall.Seconds() / r.twoWall.Seconds() }

// sourcesResult holds phase 6.
type sourcesResult struct {
	rows, per int
	one       *srcCDC
	two       []*srcCDC // a on the bench's server, b on the second one
	cur       sourcesRep
	reps      []sourcesRep
	oneVerify string
	twoVerify string
	bPort     int
	shards    []shardStarts
	steady    sourceSteady
}

func (s *sourcesResult) all() []*srcCDC { return append([]*srcCDC{s.one}, s.two...) }

// runSources runs phase 6 on the bench's server (A) and the second
// private server (B).
func runSources(ctx context.Context, cfg config, e *env, sb *serverB, log *slog.Logger) (*sourcesResult, error) {
	log.Info("phase 6: sources: one legacy shop on 1 server vs split over 2 servers, one couponlink cdc per source", "rows", cfg.sourcesRows)
	b, err := sb.wait(ctx)
	if err != nil {
		return nil, err
	}
	res, err := setupSources(ctx, cfg, e, b)
	if err != nil {
		return nil, err
	}
	for i := range cfg.sourcesReps {
		if err := res.writeBacklogs(ctx, cfg, i, log); err != nil {
			return nil, err
		}
		if err := res.time(ctx, cfg, e, b, log); err != nil {
			return nil, err
		}
		for _, c := range res.all() {
			res.cur.cdcs = append(res.cur.cdcs, *c)
		}
		res.reps = append(res.reps, res.cur)
		res.cur = sourcesRep{}
	}
	if res.steady, err = measureSteady(ctx, cfg, res.one, int64(cfg.sourcesReps)*int64(res.rows)+1); err != nil {
		return nil, fmt.Errorf("one-source cdc in steady state: %w", err)
	}
	log.Info("one-source cdc in steady state", "rows_per_s", int(float64(res.steady.rows)/res.steady.load.took.Seconds()),
		"cpu_per_row", res.steady.cpuPerRow(), "errors", res.steady.errors)
	if res.oneVerify, err = verifyShop(ctx, "1 source", []*srcCDC{res.one}); err != nil {
		return nil, err
	}
	if res.twoVerify, err = verifyShop(ctx, "2 sources, summed over both servers", res.two); err != nil {
		return nil, err
	}
	log.Info("counters after the sources phase", "one", res.oneVerify, "two", res.twoVerify)
	if res.shards, err = measureShardStarts(ctx, cfg, e, log); err != nil {
		return nil, err
	}
	return res, nil
}

// serverB is the sources phase's second private MariaDB (and its Redis,
// unused), started in the background at the start of the run, beside the
// first: its datadir takes seconds to initialise.
type serverB struct {
	done chan struct{}
	env  *env
	err  error
}

// startServerB starts the second server in the background when the run
// has the sources phase; close stops it, also when it is still starting.
func startServerB(cfg config, log *slog.Logger) *serverB {
	s := &serverB{done: make(chan struct{})}
	if !cfg.runs("sources") {
		s.err = errors.New("the second server is started only for the sources phase")
		close(s.done)
		return s
	}
	go func() {
		defer close(s.done)
		s.env, s.err = upServerB(cfg, log)
	}()
	return s
}

// wait returns the started server.
func (s *serverB) wait(ctx context.Context) (*env, error) {
	select {
	case <-s.done:
		return s.env, s.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (s *serverB) close(log *slog.Logger) {
	<-s.done
	if s.env != nil {
		s.env.close(log)
	}
}

// upServerB starts the second server in a temporary directory of its own
// and migrates couponlink's database cl_src there.
func upServerB(cfg config, log *slog.Logger) (*env, error) {
	b, err := upServers(cfg, "couponlink-bench-b-", "the second private MariaDB (sources phase)", log)
	if err != nil {
		return b, err
	}
	b.dsn = shopDSN(cfg, b, "cl_src")
	if _, err := migrations.Up(b.dsn); err != nil {
		return b, fmt.Errorf("migrate cl_src on the second server: %w", err)
	}
	b.db, err = openMySQL(b.dsn, 16)
	return b, err
}

// shopDSN is the DSN of couponlink's database db on srv's server.
func shopDSN(cfg config, srv *env, db string) string {
	dsn := fmt.Sprintf("root@tcp(127.0.0.1:%d)/%s", srv.mysqlPort, db)
	if cfg.dsnParams != "" {
		dsn += "?" + cfg.dsnParams
	}
	return dsn
}

// setupSources creates the shops (shop_one and shop_a on A, shop_b on B),
// couponlink's databases (cl_one and cl_src on A; cl_src on B, made by
// startServerB) and the two mappings.
func setupSources(ctx context.Context, cfg config, a, b *env) (*sourcesResult, error) {
	res := &sourcesResult{per: cfg.txRows, bPort: b.mysqlPort}
	for _, db := range []string{"cl_one", "cl_src"} {
		if _, err := migrations.Up(shopDSN(cfg, a, db)); err != nil {
			return nil, fmt.Errorf("migrate %s: %w", db, err)
		}
	}
	for _, s := range []struct {
		srv  *env
		name string
	}{{a, "shop_one"}, {a, "shop_a"}, {b, "shop_b"}} {
		if err := createShop(ctx, s.srv.db, s.name, 4); err != nil {
			return nil, err
		}
	}
	res.one = &srcCDC{name: "one", srv: a, clDB: "cl_one", shop: "shop_one"}
	res.two = []*srcCDC{{name: "a", srv: a, clDB: "cl_src", shop: "shop_a"}, {name: "b", srv: b, clDB: "cl_src", shop: "shop_b"}}
	var err error
	if res.one.mapping, err = writeShopMapping(a.dir, "shop-one.yaml", "shop_one", 4,
		[]shopSource{{name: "one", dsn: shopDSN(cfg, a, "cl_one")}}); err != nil {
		return nil, err
	}
	path, err := writeShopMapping(a.dir, "shop-two.yaml", "shop_a", 4, []shopSource{
		{name: "a", dsn: shopDSN(cfg, a, "cl_src")}, {name: "b", dsn: shopDSN(cfg, b, "cl_src"), schema: "shop_b"}})
	for _, c := range res.two {
		c.mapping = path
	}
	return res, err
}

// writeBacklogs brings the one-source cdc to the server's end (the first
// time: its bootstrap), writes its backlog, then does the same with the two
// source cdcs and writes the halves on both servers in parallel: each
// case's binlog range holds its own rows only. Repetition rep's coupon ids
// follow the earlier ones'.
func (s *sourcesResult) writeBacklogs(ctx context.Context, cfg config, rep int, log *slog.Logger) error {
	half := cfg.sourcesRows / 2 / s.per
	s.rows = 2 * half * s.per
	base := int64(rep) * int64(s.rows)
	e := s.one.srv
	if _, err := runTo(ctx, cfg, e, []*srcCDC{s.one}, false); err != nil {
		return fmt.Errorf("one-source cdc to the server's end: %w", err)
	}
	t0 := time.Now()
	var err error
	if s.one.part, err = writeShop(ctx, s.one.srv, s.one.shop, base, s.rows, s.per, log); err != nil {
		return err
	}
	s.cur.oneWrite = time.Since(t0)
	if _, err := runTo(ctx, cfg, e, s.two, false); err != nil {
		return fmt.Errorf("source cdcs to their servers' ends: %w", err)
	}
	t0 = time.Now()
	g, gctx := errgroup.WithContext(ctx)
	for _, c := range s.two {
		g.Go(func() error {
			var err error
			c.part, err = writeShop(gctx, c.srv, c.shop, base, s.rows/2, s.per, log)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	s.cur.twoWrite = time.Since(t0)
	log.Info("sources backlogs written", "rep", rep+1, "rows", s.rows, "one_took", s.cur.oneWrite.Round(time.Millisecond), "two_took", s.cur.twoWrite.Round(time.Millisecond))
	return nil
}

// time times the one-source cdc, then both source cdcs together, then the
// no-op readers over the same ranges: each alone, and a's and b's together.
func (s *sourcesResult) time(ctx context.Context, cfg config, a, b *env, log *slog.Logger) error {
	db0 := a.mariadbCPU()
	var err error
	if s.cur.oneWall, err = runTo(ctx, cfg, a, []*srcCDC{s.one}, true); err != nil {
		return fmt.Errorf("one-source catch-up: %w", err)
	}
	s.cur.dbOne = a.mariadbCPU() - db0
	db0 = a.mariadbCPU() + b.mariadbCPU()
	if s.cur.twoWall, err = runTo(ctx, cfg, a, s.two, true); err != nil {
		return fmt.Errorf("two-source catch-up: %w", err)
	}
	s.cur.dbTwo = a.mariadbCPU() + b.mariadbCPU() - db0
	for _, c := range s.all() {
		log.Info("couponlink cdc -source caught up", "source", c.name, "rows", c.rows, "rows_per_s", int(c.rate()),
			"stream_rows_per_s", int(c.streamRate()), "startup", c.startup.Round(time.Millisecond), "cpu_per_row", c.cpuPerRow(), "vmrss_mib", c.rss>>20)
	}
	for _, c := range s.all() {
		if c.noop, err = timeNoop(ctx, c.srv, shopInclude(c.shop), modeStart(c.from, c.mode), c.part.to); err != nil {
			return fmt.Errorf("no-op reader of source %s: %w", c.name, err)
		}
		log.Info("no-op canal reader", "source", c.name, "rows", c.noop.rows, "rows_per_s", int(c.noop.rate), "ratio", fmt.Sprintf("%.2f", c.streamRate()/c.noop.rate))
		if c.noop.rows != int64(c.part.rows) || c.rows != int64(c.part.rows) {
			log.Warn("a reader saw another number of rows than were written", "source", c.name, "written", c.part.rows, "noop", c.noop.rows, "cdc", c.rows)
		}
	}
	walls := make([]time.Duration, len(s.two))
	g, gctx := errgroup.WithContext(ctx)
	for i, c := range s.two {
		g.Go(func() error {
			r, err := timeNoop(gctx, c.srv, shopInclude(c.shop), modeStart(c.from, c.mode), c.part.to)
			walls[i] = r.wall
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return fmt.Errorf("no-op readers of both sources together: %w", err)
	}
	s.cur.noopTwo = max(walls[0], walls[1])
	log.Info("sources catch-up", "rows", s.rows, "one_rows_per_s", int(float64(s.rows)/s.cur.oneWall.Seconds()),
		"two_rows_per_s", int(float64(s.rows)/s.cur.twoWall.Seconds()), "noop_two_rows_per_s", int(float64(s.rows)/s.cur.noopTwo.Seconds()))
	return nil
}

// runTo starts the cdcs together and waits until each has checkpointed
// its target, then stops them; it returns the wall time from the first
// start to the last arrival, and records each run in its srcCDC. Timed:
// the target is the end of the cdc's backlog; else (a bootstrap, or a
// catch-up to now) it is the server's end at the start.
func runTo(ctx context.Context, cfg config, e *env, cdcs []*srcCDC, timed bool) (time.Duration, error) {
	targets := make([]canal.Position, len(cdcs))
	for i, c := range cdcs {
		var err error
		if c.events0, c.from, err = c.cp().read(ctx); err != nil {
			return 0, err
		}
		if targets[i] = c.part.to; !timed {
			if targets[i], err = canal.CurrentPosition(ctx, c.srv.db); err != nil {
				return 0, err
			}
		}
	}
	children := make([]*child, len(cdcs))
	defer func() {
		for _, ch := range children {
			if ch != nil {
				ch.stop()
			}
		}
	}()
	label := map[bool]string{false: "bootstrap", true: "catchup"}[timed]
	t0 := time.Now()
	for i, c := range cdcs {
		var err error
		if children[i], err = startSourceCDC(cfg, e, c, label); err != nil {
			return 0, err
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	for i, c := range cdcs {
		g.Go(func() error {
			if err := c.arrive(gctx, c.cp(), children[i], targets[i], 15*time.Minute); err != nil {
				return fmt.Errorf("source %s: %w", c.name, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return 0, err
	}
	wall := time.Since(t0)
	var wg sync.WaitGroup
	for _, ch := range children {
		wg.Go(ch.stop)
	}
	wg.Wait()
	for i, c := range cdcs {
		if err := c.settle(ctx, c.cp(), children[i], c.events0); err != nil {
			return 0, err
		}
	}
	return wall, nil
}

// startSourceCDC starts `couponlink cdc -mapping … -source NAME` (Redis in
// the mapping's default mode, corrector: it writes no stock keys).
func startSourceCDC(cfg config, e *env, c *srcCDC, label string, extra ...string) (*child, error) {
	return e.startCDC(cfg, fmt.Sprintf("cdc-%s-%s-%d", c.name, label, time.Now().UnixNano()),
		append([]string{"-mapping", c.mapping, "-source", c.name, "-redis", e.redisAddr, "-key-prefix", "bench-shop:"}, extra...)...)
}
