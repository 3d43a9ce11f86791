package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

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
	if len(s.startups) == 0 {
		return 0
	}
	x := slices.Clone(s.startups)
	slices.Sort(x)
	return x[len(x)/2]
}

// measureShardStarts creates, per size n, a shop of n empty user_coupon
// tables (shop_wN) and couponlink's database cl_wN on e's server, boots a
// cdc on it, then starts it shardRestarts more times from its checkpoint.
func measureShardStarts(ctx context.Context, cfg config, e *env, log *slog.Logger) ([]shardStarts, error) {
	var out []shardStarts
	for _, n := range cfg.sourcesShards {
		schema, cl := fmt.Sprintf("shop_w%d", n), fmt.Sprintf("cl_w%d", n)
		t0 := time.Now()
		if err := createShop(ctx, e.db, schema, n); err != nil {
			return nil, err
		}
		if _, err := migrations.Up(shopDSN(cfg, e, cl)); err != nil {
			return nil, fmt.Errorf("migrate %s: %w", cl, err)
		}
		path, err := writeShopMapping(e.dir, schema+".yaml", schema, n, []shopSource{{name: "w", dsn: shopDSN(cfg, e, cl)}})
		if err != nil {
			return nil, err
		}
		setup := time.Since(t0)
		c := &srcCDC{name: "w", srv: e, clDB: cl, shop: schema, mapping: path}
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

// parseShards reads -sources-shards: table counts of 1 to 4096, sorted,
// each once.
func parseShards(s string) ([]int, error) {
	var out []int
	for _, f := range listFields(s) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 || n > 4096 {
			return nil, fmt.Errorf("-sources-shards: %q is not a table count (1..4096)", f)
		}
		out = append(out, n)
	}
	slices.Sort(out)
	if out = slices.Compact(out); len(out) == 0 {
		return nil, errors.New("-sources-shards: name at least one table count")
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
	var xs []float64
	for _, d := range ds {
		xs = append(xs, d.Seconds())
	}
	return floats(xs, "%.2f s")
}
