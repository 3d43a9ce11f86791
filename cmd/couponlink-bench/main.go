// Command couponlink-bench measures couponlink side by side with the
// ceilings of the machine it runs on, in one run, and prints one table:
// per row what was measured, couponlink's figure, the ceiling's (or
// peer's) figure, the ratio and the exact settings. The table also goes to
// bench/results/<timestamp>.md and .json, with a CPU profile of the cdc
// catch-up beside them.
//
// It starts its own private MariaDB and Redis (deploy/local/servers.sh with
// COUPONLINK_LOCAL_DIR in a temporary directory and free ports), so it never
// disturbs the test servers on 3307/6380, and stops them at the end, also on
// failure or Ctrl-C.
//
// Usage, from the repository root:
//
//	make bench                                # defaults: about 8 minutes on 2 cores
//	go run ./cmd/couponlink-bench -quick      # ~1 minute, small sizes
//	go run ./cmd/couponlink-bench -smoke      # every row at tiny sizes, about 40 s (make test runs it)
//	go run ./cmd/couponlink-bench -phases sources   # only phase 6 (1 vs 2 sources, shard start-up)
//	go run ./cmd/couponlink-bench -phases api       # only the API rows (combiners on and off, ceilings)
//	go run ./cmd/couponlink-bench -phases legacy    # only phase 7 (the cdc through legacy mappings, its CPU profiles)
//	go run ./cmd/couponlink-bench -phases lag,reconcile  # any phases by name (the ones they read are added)
//	go run ./cmd/couponlink-bench -phases flash     # only the flash sale (row 9)
//	go run ./cmd/couponlink-bench -h          # every size and duration
//
// A run exits non-zero when a phase fails or a correctness check fails
// (counters = GROUP BY user_coupon, Redis = quota − claimed); with -smoke
// also when any claim, redemption or INSERT of the load runs failed.
//
// Phases, in this order:
//
//  1. CDC catch-up. A backlog of row changes of user_coupon (60% INSERT,
//     40% UPDATE AVAILABLE→EXPIRED) is written with no reader running:
//     first -backlog-single changes in 1-row transactions, then
//     -backlog-batched in -tx-rows-row transactions. Over exactly each of
//     the two binlog ranges, and for each start mode (file/offset, GTID),
//     a no-op go-mysql canal reader (counts rows, nothing else) and
//     couponlink's pipeline (canal.Tailer + sink.Sink: counters and
//     checkpoint in MySQL, Redis stock keys in owner mode) are timed one
//     after the other. The pipeline's CPU profile is written (-cpuprofile)
//     and `go tool pprof -top` of it printed. The counters are then checked
//     against a GROUP BY of user_coupon.
//
//  2. Memory, and the real binary's catch-up: `couponlink cdc` (built with
//     go build) replays the whole backlog from its checkpoint; VmHWM/VmRSS
//     from /proc/<pid>/status when it reaches the end, then during
//     -steady-duration of claims at 1,000/s.
//
//  3. CDC steady-state lag: 1-row source transactions (an autocommit
//     INSERT of one user_coupon row, 40 channel buckets; -lag-tx-rows rows
//     per INSERT when 1-row writers cannot reach the rate; -lag-load
//     claims: coupon.Store.Claim, user_coupon INSERT + channel_quota UPDATE)
//     at each of -lag-rates for -lag-duration, while the pipeline runs
//     in-process behind a handler that records when each coupon's counters
//     were committed and its Redis keys written, and a no-op canal reader
//     runs beside it (the ceiling). Lag = that moment − the client's return
//     from COMMIT. A CPU profile of each load, its goroutines labelled,
//     gives the pipeline's CPU per row change; the sink's batches per
//     second and rows per batch are reported beside it.
//
//  4. API: the real `couponlink api` binary under a closed loop of -clients
//     HTTP clients: claims on one hot bucket, claims over 40 buckets,
//     redemptions, each through two api processes, one with the write
//     combiners on (the default) and one with them off; against the
//     ceiling of bare single-row autocommit INSERTs (same table shape,
//     same connections count, same server), measured before and after, and
//     against bare multi-row autocommit INSERTs of the mean group size the
//     combiner made in that run (couponlink_api_*_group_size); the api
//     process's CPU per request. Beside each claim run, the claim's own
//     transaction sent as raw SQL (no HTTP, no Go service): what the schema
//     and the row locks allow, so the API's own overhead shows apart. Last,
//     the cdc's lag (phase 3's pipeline and no-op reader) while the combined
//     api takes the hot-bucket claim load.
//
//  5. Reconcile (row 6): -reconcile-rows user coupons (default 1M and
//     10M) in 100 templates × 10 channels, in a database of their own
//     (couponlink_rec, Redis DB 1), seeded by INSERT … SELECT FROM seq_*
//     without binlog (the seeding time is reported); an in-process cdc
//     (sink.Daemon) rebuilds its counters from a snapshot, then -reps
//     reconcile.Reconciler passes (with the binlog) are timed: seconds,
//     snapshot and replay seconds, rows read (Handler_read_next around the
//     pass), and the growth from the smallest to the largest size. Every
//     pass must be clean.
//
//  6. Sources (row 7): a legacy sharded shop (four user_coupon_{0..3}
//     tables and a template table, redemption_evidence none) with
//     -sources-rows row changes (60% 100-row INSERTs, 40% UPDATEs to USED
//     or EXPIRED): all on the bench's server (1 source), or half there and
//     half on a second private MariaDB (2 sources: a mapping with
//     sources:, one `couponlink cdc -source NAME` per server, each with
//     its counters in its own database). Each cdc is brought to its
//     server's end (the first time: bootstrapped) and stopped before its
//     case's rows are written, so it reads only its range. Timed, for each
//     of -sources-reps repetitions over new rows: the one-source cdc to its
//     end; both source cdcs started together, to the slower one's end;
//     then a no-op reader over each cdc's range. The counters of each case
//     must equal a GROUP BY of its tables (summed over both servers). Then
//     the one-source cdc's CPU per row following 1-row transactions at
//     1,000/s for -steady-duration, and the cdc's start-up time and RSS on
//     empty shops of -sources-shards tables. -phases sources runs this
//     phase alone.
//
//  7. Legacy (row 8): the real `couponlink cdc` following a legacy shop
//     through its mapping, per layout of -legacy-layouts (the three of
//     deploy/legacy, each with its schema.sql and mapping.yaml, and the
//     sources phase's sharded shop): -legacy-rows row changes (3 in 5
//     transactions claim -tx-rows coupons, the others use them with the
//     shop's evidence, write-off rows or orders, or expire them) written
//     while its cdc is stopped, then a no-op reader, the cdc (with
//     -cpuprofile: <out>/<stamp>-cdc-legacy-<layout>.pprof) and a no-op
//     reader again over the same range. The counters must equal a GROUP
//     BY of the shop's coupons and the clean workload must leave no
//     anomaly. -phases legacy runs this phase alone.
//
//  8. Flash sale (row 9): a campaign of -flash-coupons coupons (2,000)
//     meets -flash-claims claims (200,000) of distinct users from
//     -flash-clients closed-loop HTTP clients at once, through the real
//     `couponlink api` (sold-out memory on, then off) with the real
//     `couponlink cdc` following, and through the field's common design as
//     the peer (an HTTP handler in this process doing a Redis Lua
//     pre-deduct): time until sold out, granted claims/s, all answers/s,
//     p50/p99 of granted and refused answers, the cdc's lag and the Redis
//     stock key during the burst; checked: exactly the campaign's coupons,
//     no over-issue, Redis = quota − claimed. -phases flash runs it alone.
//
// Every row also says where the time went: CPU per row or per request of
// this process, of MariaDB and of the couponlink binary; the server's
// statements per batch or request (SHOW GLOBAL STATUS); the sink's
// statements timed one by one; sink.ApplyBatch split into its MySQL and
// Redis parts.
//
// The defaults measure couponlink as shipped; -cdc-batch-rows,
// -cdc-batch-wait and -dsn-params change its own settings for what-if runs
// (the report's header says which were used).
//
// The machine is noisy (other tests may run): only ratios measured in the
// same run mean much; absolute figures drift.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() { os.Exit(run()) }

func run() int {
	if addr := os.Getenv(floorEnv); addr != "" { // started by the API phase as its HTTP floor (httpfloor.go)
		fmt.Fprintln(os.Stderr, serveFloor(addr))
		return 1
	}
	cfg, lists := defineFlags(flag.CommandLine)
	flag.Parse()
	log := lists.logging.Logger(os.Stderr)
	slog.SetDefault(log)
	if err := cfg.finish(*lists, flag.CommandLine); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := bench(ctx, *cfg, log); err != nil {
		if ctx.Err() != nil {
			log.Error("interrupted; servers stopped")
			return 130
		}
		log.Error("benchmark failed", "err", err)
		return 1
	}
	return 0
}

// bench runs the phases -phases names on private servers and writes the
// report.
func bench(ctx context.Context, cfg config, log *slog.Logger) error {
	start := time.Now()
	if err := os.MkdirAll(cfg.out, 0o755); err != nil { // the results and the profiles the phases write
		return err
	}
	srvB := startServerB(cfg, log) // the sources phase's second server, beside the first
	defer srvB.close(log)
	env, err := startEnv(ctx, cfg, log)
	if env != nil {
		defer env.close(log)
	}
	if err != nil {
		return err
	}
	r := &benchRun{cfg: cfg, env: env, srvB: srvB, rep: newReport(cfg, env), log: log}
	for _, p := range phases {
		if !cfg.runs(p.key) {
			continue
		}
		if err := p.run(ctx, r); err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
	}
	if r.cu != nil {
		r.rep.check("after the catch-up runs", r.cu.verify)
		r.rep.profile(ctx, cfg, r.cu.profile, log)
	}
	if r.lags != nil {
		r.rep.check("after the lag runs", r.lagCheck)
	}
	if cfg.smoke && cfg.phases == "all" {
		r.rep.loadErrors(r.lags, r.api)
	}
	return r.rep.finish(cfg, start, log)
}

// benchRun is one benchmark run: its settings, servers and report, and the
// results that later phases and the last checks read.
type benchRun struct {
	cfg      config
	env      *env
	srvB     *serverB
	rep      *Report
	log      *slog.Logger
	cu       *catchupResult
	lags     []lagResult
	lagCheck string
	api      apiResult
}

// phase is one phase of a run: it measures and adds its rows.
type phase struct {
	key   string   // its -phases name
	name  string   // the prefix of its error
	needs []string // the phases whose results it reads (-phases adds them)
	run   func(ctx context.Context, r *benchRun) error
}

// phases are every phase, in the order of a run.
var phases = []phase{
	{"catch-up", "catch-up", nil, func(ctx context.Context, r *benchRun) (err error) {
		if r.cu, err = runCatchup(ctx, r.cfg, r.env, r.log); err == nil {
			r.rep.catchup(r.cfg, r.cu)
		}
		return err
	}},
	{"peer", "peer go-mysql-transfer", []string{"catch-up"}, func(ctx context.Context, r *benchRun) (err error) {
		var p *peerResult
		if r.cfg.peerTransfer != "" {
			p, err = runPeer(ctx, r.cfg, r.env, r.cu, r.log)
		}
		if err == nil {
			r.rep.peer(r.cfg, p)
		}
		return err
	}},
	{"memory", "memory (couponlink cdc binary)", []string{"catch-up"}, func(ctx context.Context, r *benchRun) error {
		mem, err := runMemory(ctx, r.cfg, r.env, r.cu, r.log)
		if err == nil {
			r.rep.memory(r.cfg, mem)
		}
		return err
	}},
	{"lag", "lag", nil, func(ctx context.Context, r *benchRun) error { return r.lag(ctx) }},
	{"api", "api", nil, func(ctx context.Context, r *benchRun) (err error) {
		if r.api, err = runAPI(ctx, r.cfg, r.env, r.log); err == nil {
			r.rep.api(r.cfg, r.api)
			r.rep.apiProfile(ctx, r.api.profile, r.log)
		}
		return err
	}},
	{"reconcile", "reconcile", nil, func(ctx context.Context, r *benchRun) error {
		steps, err := runReconcile(ctx, r.cfg, r.env, r.log)
		if err != nil {
			return err
		}
		r.rep.reconcile(r.cfg, steps)
		for _, st := range steps {
			r.rep.check(fmt.Sprintf("after the reconcile passes over %d coupons", st.rows), st.verify)
		}
		return nil
	}},
	{"sources", "sources", nil, func(ctx context.Context, r *benchRun) error {
		src, err := runSources(ctx, r.cfg, r.env, r.srvB, r.log)
		if err == nil {
			r.rep.sources(r.cfg, src)
		}
		return err
	}},
	{"legacy", "legacy", nil, func(ctx context.Context, r *benchRun) error {
		runs, err := runLegacy(ctx, r.cfg, r.env, r.log)
		r.rep.legacy(r.cfg, runs)
		return err
	}},
	// last: it resets the cdc's derived state (the checks of the phases
	// before it are taken)
	{"flash", "flash sale", nil, func(ctx context.Context, r *benchRun) error {
		f, err := runFlash(ctx, r.cfg, r.env, r.log)
		if err == nil {
			r.rep.flash(r.cfg, f)
		}
		return err
	}},
}

// lag is phase 3: the lag runs at each rate, then the counters checked.
func (r *benchRun) lag(ctx context.Context) error {
	for _, rate := range r.cfg.lagRates {
		lr, err := runLag(ctx, r.cfg, r.env, rate, r.log)
		if err != nil {
			return fmt.Errorf("at %d/s: %w", rate, err)
		}
		r.lags = append(r.lags, lr)
	}
	var err error
	if r.lagCheck, err = verifyCounters(ctx, r.env); err != nil {
		return fmt.Errorf("verify counters after the lag runs: %w", err)
	}
	r.rep.lag(r.cfg, r.lags, r.lagCheck)
	return nil
}

// finish writes the report; failed checks fail the run.
func (r *Report) finish(cfg config, start time.Time, log *slog.Logger) error {
	r.Duration = time.Since(start).Round(time.Second).String()
	if err := r.write(cfg, log); err != nil {
		return err
	}
	if len(r.Failures) > 0 {
		return fmt.Errorf("%d failed checks: %s", len(r.Failures), strings.Join(r.Failures, "; "))
	}
	return nil
}
