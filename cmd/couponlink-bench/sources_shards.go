package main

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/migrations"
)

// What grows with the number of shard tables: `couponlink cdc` resolves a
// mapping's table sets at start (one information_schema look-up per shard
// table) and keeps a decoder per table. Measured on empty shops of
// -sources-shards tables each, on the bench's server.

// shardStarts are the starts of `couponlink cdc` on one shop size.
type shardStarts struct {
	shards    int
	bootstrap time.Duration   // first start: process start → checkpoint at the end (incl. the snapshot of the empty tables)
	startups  []time.Duration // later starts from the checkpoint: process start → "tailing the binlog"
	rss, hwm  int64           // VmRSS, VmHWM of the last start at the server's end
}

// shardRestarts is how many times the cdc is started from its checkpoint
// (once with -smoke).
func shardRestarts(cfg config) int {
	if cfg.smoke {
		return 1
	}
	return 3
}

func (s shardStarts) startup() time.Duration {
	return medianBy(s.startups, func(d time.Duration) time.Duration { return d })
}

// measureShardStarts creates, per size n, a shop of n empty user_coupon
// tables (shop_wN) on e's server, boots a cdc on it (source wN, its
// checkpoint in couponlink's database cl_w, shared by the sizes), then
// starts it shardRestarts more times from its checkpoint.
func measureShardStarts(ctx context.Context, cfg config, e *env, log *slog.Logger) ([]shardStarts, error) {
	const cl = "cl_w"
	if _, err := migrations.Up(shopDSN(cfg, e, cl)); err != nil {
		return nil, fmt.Errorf("migrate %s: %w", cl, err)
	}
	var out []shardStarts
	for _, n := range cfg.sourcesShards {
		schema, name := fmt.Sprintf("shop_w%d", n), fmt.Sprintf("w%d", n)
		t0 := time.Now()
		if err := createShop(ctx, e.db, schema, n); err != nil {
			return nil, err
		}
		path, err := writeShopMapping(e.dir, schema+".yaml", schema, n, []shopSource{{name: name, dsn: shopDSN(cfg, e, cl)}})
		if err != nil {
			return nil, err
		}
		setup := time.Since(t0)
		c := &srcCDC{name: name, srv: e, clDB: cl, shop: schema, mapping: path}
		st := shardStarts{shards: n}
		if _, err := runTo(ctx, cfg, e, []*srcCDC{c}, false); err != nil {
			return nil, fmt.Errorf("bootstrap on %d shard tables: %w", n, err)
		}
		st.bootstrap = c.took
		for range shardRestarts(cfg) {
			if _, err := runTo(ctx, cfg, e, []*srcCDC{c}, false); err != nil {
				return nil, fmt.Errorf("start on %d shard tables: %w", n, err)
			}
			st.startups = append(st.startups, c.startup)
		}
		st.rss, st.hwm = c.rss, c.hwm
		log.Info("couponlink cdc start-up", "shard_tables", n, "setup", setup.Round(time.Millisecond), "took", time.Since(t0).Round(time.Millisecond), "bootstrap", st.bootstrap.Round(time.Millisecond),
			"startup", st.startup().Round(time.Millisecond), "vmrss_mib", st.rss>>20)
		out = append(out, st)
	}
	return out, nil
}

// shardRow adds the start-up row: the largest shop against the smallest.
func (r *Report) shardRow(cfg config, starts []shardStarts) {
	if len(starts) < 2 {
		return
	}
	lo, hi := starts[0], starts[len(starts)-1]
	desc := func(s shardStarts) string {
		return fmt.Sprintf("%s, VmRSS %s (%d tables)", sec(s.startup()), mib(s.rss), s.shards)
	}
	var detail []string
	for _, s := range starts {
		detail = append(detail, fmt.Sprintf("%d tables: start-ups %s (median %s), bootstrap %s, VmRSS %s, VmHWM %s",
			s.shards, durs(s.startups), sec(s.startup()), sec(s.bootstrap), mib(s.rss), mib(s.hwm)))
	}
	per := time.Duration(0)
	if hi.shards > lo.shards {
		per = (hi.startup() - lo.startup()) / time.Duration(hi.shards-lo.shards)
	}
	r.add(Row{ID: "7", What: fmt.Sprintf("`couponlink cdc` start-up, %d vs %d shard tables", hi.shards, lo.shards),
		Ours: desc(hi), Peer: desc(lo), OursNum: hi.startup().Seconds(), PeerNum: lo.startup().Seconds(), Target: "report",
		Settings: fmt.Sprintf("empty shops of N user_coupon tables (mapping user_coupon_{0..N-1}, one source) on the bench's server; the cdc booted once "+
			"(snapshot of the empty tables), then started %d times from its checkpoint: time from process start to its \"tailing the binlog\" log line "+
			"(leader lock, mapping resolution: one information_schema look-up per table, decoders); VmRSS when its checkpoint reached the server's end; "+
			"%s per extra table; %s", shardRestarts(cfg), us(per), strings.Join(detail, "; ")),
	})
}

func durs(ds []time.Duration) string {
	return floats(mapped(ds, time.Duration.Seconds), "%.2f s")
}

// sourceSteady is the one-source cdc following a paced load of 1-row
// transactions on its shop: what it costs per row in steady state.
type sourceSteady struct {
	load     pacedLoad
	rows     int64         // row changes it applied over the load
	cpu      time.Duration // its CPU over the load and until its checkpoint reached the end
	rss      int64
	wanted   int
	errors   int64
	firstErr error
	profile  string // its CPU profile (-cpuprofile): start-up, catch-up to the end, the load
}

func (s sourceSteady) cpuPerRow() time.Duration { return perRow(s.cpu, s.rows) }

// measureSteady runs the one-source cdc (caught up first) while
// -writers write 1-row transactions into its shop at 1,000/s for
// -steady-duration (3 in 5 an INSERT, the others an UPDATE to USED of a
// coupon inserted 3 jobs before), and reads its CPU time around it.
func measureSteady(ctx context.Context, cfg config, c *srcCDC, base int64) (sourceSteady, error) {
	const rate = 1000
	st := sourceSteady{wanted: rate}
	end, err := canal.CurrentPosition(ctx, c.srv.db)
	if err != nil {
		return st, err
	}
	st.profile = filepath.Join(cfg.out, cfg.stamp+"-cdc-steady.pprof") // complete once it has stopped
	ch, err := startSourceCDC(cfg, c.srv, c, "steady", "-cpuprofile", st.profile)
	if err != nil {
		return st, err
	}
	defer ch.stop()
	if err := c.cp().wait(ctx, ch, end, 5*time.Minute); err != nil {
		return st, err
	}
	ev0, _, err := c.cp().read(ctx)
	if err != nil {
		return st, err
	}
	cpu0 := procCPU(ch.pid())
	st.load = pacedRun(ctx, rate, cfg.steadyDuration, cfg.writers, func(i int) (int64, error) {
		id, table := base+int64(i), fmt.Sprintf("`%s`.user_coupon_%d", c.shop, i%4)
		if i%5 >= 3 {
			id, table = base+int64(i-3), fmt.Sprintf("`%s`.user_coupon_%d", c.shop, (i-3)%4)
			_, err := c.srv.db.ExecContext(ctx, "UPDATE "+table+" SET state = 1 WHERE id = ? AND state = 0", id)
			return id, err
		}
		_, err := c.srv.db.ExecContext(ctx, "INSERT INTO "+table+" (id, tpl_id, state, uid) VALUES (?, ?, 0, ?)", id, 1+i%shopTemplates, id)
		return id, err
	})
	if end, err = canal.CurrentPosition(ctx, c.srv.db); err != nil {
		return st, err
	}
	if err := c.cp().wait(ctx, ch, end, time.Minute); err != nil {
		return st, err
	}
	st.cpu = procCPU(ch.pid()) - cpu0
	st.rss, _, _ = procMem(ch.pid())
	ev1, _, err := c.cp().read(ctx)
	st.rows = ev1 - ev0
	st.errors, st.firstErr = st.load.errors, st.load.firstErr
	return st, err
}

// steadyRow adds the one-source cdc's cost per row in steady state.
func (r *Report) steadyRow(cfg config, s sourceSteady) {
	per := s.cpuPerRow()
	r.add(Row{ID: "7", What: fmt.Sprintf("1 source: `couponlink cdc` CPU in steady state, 1-row transactions at %d/s", s.wanted),
		Ours: fmt.Sprintf("%s per row (%.1f%% of a core per 1,000 rows/s)", us(per), 100*float64(per)*1000/float64(time.Second)),
		Peer: "—", Ratio: "—", Target: "report",
		Settings: fmt.Sprintf("the one-source cdc of the rows above, caught up, then %d writers for %s: 3 in 5 jobs an INSERT of one coupon, the others "+
			"an UPDATE to USED of the coupon 3 jobs before (autocommit); achieved %.0f tx/s, %d errors%s; %s row changes applied; its CPU (/proc) from the "+
			"load's start until its checkpoint reached the end: %s; VmRSS then %s; its CPU profile (start-up included): %s",
			cfg.writers, cfg.steadyDuration, s.load.rate(), s.errors, errText(s.firstErr), count(s.rows), sec(s.cpu), mib(s.rss), s.profile),
	})
	if cfg.smoke && s.errors > 0 {
		r.Failures = append(r.Failures, fmt.Sprintf("sources steady state: %d writes failed (first: %v)", s.errors, s.firstErr))
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return " (first: " + err.Error() + ")"
}
