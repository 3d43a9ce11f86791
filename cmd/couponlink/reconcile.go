package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"os/user"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/inventory"
	"github.com/couponlink/couponlink/reconcile"
)

func runReconcile(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newFlags("reconcile", "Proves that the cdc's counters, coupon_template's cached counts, channel_quota and the Redis stock keys equal the truth in MySQL; fixes what is safe, records every pass in reconcile_task, leaves the rest for a person. Runs every -every as a daemon with /metrics, or once with -once (exit 0 clean or fixed, 1 needs review or, with -no-fix, any difference, 2 error).", stderr)
	dsn := f.dsn()
	mapping := f.string("mapping", "COUPONLINK_MAPPING", "", "YAML mapping of a legacy schema (default: the reference schema)")
	redisAddr := f.string("redis", "COUPONLINK_REDIS_ADDR", "127.0.0.1:6380", "Redis address (empty: Redis is not compared)")
	redisMode := f.string("redis-mode", "COUPONLINK_REDIS_MODE", "", "owner (couponlink's stock keys) or corrector (the mapping's legacy keys); default by schema")
	prefix := f.string("key-prefix", "COUPONLINK_KEY_PREFIX", "couponlink:", "prefix of couponlink's Redis keys")
	name := f.string("name", "COUPONLINK_CDC_NAME", "default", "the cdc's checkpoint name")
	every := f.duration("every", "COUPONLINK_RECONCILE_EVERY", 10*time.Minute, "time between passes of the daemon")
	once := f.bool("once", "", false, "run one pass, print the report, exit 0 (clean or fixed), 1 (needs review; with -no-fix, any difference) or 2 (error: the pass stopped; its task keeps what it found and fixed before)")
	list := f.bool("list", "", false, "list the open items (passes that need review) and exit")
	resolve := f.int("resolve", "", 0, "close the open item with this task id (with -note)")
	note := f.string("note", "", "", "what was checked or done, for -resolve")
	quiet := f.duration("quiet", "COUPONLINK_RECONCILE_QUIET", 5*time.Second, "a Redis key is corrected only if it and the truth stayed put this long")
	catchUp := f.duration("catch-up-wait", "COUPONLINK_RECONCILE_CATCH_UP", 30*time.Second, "bound of the binlog replay between the snapshot and the cdc's checkpoint, and of the wait for another pass (one pass at a time per database)")
	absT := f.int("abs-threshold", "COUPONLINK_RECONCILE_ABS", 100, "a counter or template count off by more than this and by more than -rel-threshold of the truth is left for a person, otherwise fixed")
	rel := f.float("rel-threshold", "COUPONLINK_RECONCILE_REL", 0.05, "share of the truth, above 0 and at most 1 (0.05 = 5%): a counter or template count off by more than this and by more than -abs-threshold is left for a person")
	noFix := f.bool("no-fix", "COUPONLINK_RECONCILE_NO_FIX", false, "only report, correct nothing (with -once: exit 1 when anything differs)")
	metricsAddr := f.string("metrics-addr", "COUPONLINK_RECONCILE_METRICS_ADDR", "127.0.0.1:9465", "listen address of /metrics, /healthz and /status (the cdc's status as JSON, as couponlink status -json prints it) for the daemon (empty: none)")
	level := f.logLevel()
	if err := f.parse(args); err != nil {
		return err
	}
	// with -once, whatever keeps the pass from running is exit code 2 (1 means "needs review")
	failed := func(err error) error {
		if !*once {
			return err
		}
		fmt.Fprintf(stderr, "couponlink reconcile: %v\n", err)
		return exitCode(2)
	}
	if !(*rel > 0 && *rel <= 1) { // 0 would mean the package's default
		return failed(fmt.Errorf("-rel-threshold must be a share of the truth above 0 and at most 1 (0.05 = 5%%), got %v", *rel))
	}
	base := newLogger(stderr, *level) // reconcile names its component
	log := base.With("component", "reconcile")
	db, err := openMySQL(*dsn, 4)
	if err != nil {
		return failed(err)
	}
	defer db.Close()
	who := "operator"
	if u, err := user.Current(); err == nil {
		who = u.Username
	}
	switch {
	case *list:
		return printOpen(ctx, db, stdout)
	case *resolve > 0:
		if err := reconcile.Resolve(ctx, db, int64(*resolve), who, *note); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "task %d resolved by %s\n", *resolve, who)
		return nil
	}
	cfg := reconcile.Config{DB: db, Checkpoint: *name, RedisMode: inventory.RedisMode(*redisMode), QuietWindow: *quiet, CatchUpWait: *catchUp,
		AbsThreshold: int64(*absT), RelThreshold: *rel, Logger: base}
	cfg.Keys.Prefix = *prefix
	if cfg.Binlog, err = tailerConfig(*dsn, 0, *name); err != nil {
		return failed(err)
	}
	fix := !*noFix
	cfg.AutoFix = &fix
	if *mapping != "" {
		if cfg.Mapping, err = canal.ReadMappingFile(*mapping); err != nil {
			return failed(err)
		}
	}
	if *redisAddr != "" {
		rdb := redis.NewClient(&redis.Options{Addr: *redisAddr, DialTimeout: time.Second})
		defer rdb.Close()
		cfg.Redis = rdb
	}
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	r, err := reconcile.New(cfg)
	if err != nil {
		return failed(err)
	}
	if *once {
		rep, err := r.Pass(ctx)
		if rep != nil {
			printReport(stdout, rep) // also a failed pass: what it found and fixed before it stopped
		}
		if err != nil {
			fmt.Fprintf(stderr, "couponlink reconcile: %v\n", err)
			return exitCode(2)
		}
		if rep.Status == "needs_review" {
			return exitCode(1)
		}
		return nil
	}
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if *metricsAddr != "" {
		stop, err := serveOps(ctx, *metricsAddr, reg, db, *name, log)
		if err != nil {
			return err
		}
		defer stop()
	}
	log.Info("reconciler running", "every", *every)
	return r.Run(ctx, *every)
}

func printReport(w io.Writer, rep *reconcile.Report) {
	fmt.Fprintf(w, "reconcile task %d: %s\n", rep.TaskID, rep.Status)
	fmt.Fprintf(w, "  snapshot   %s (%d coupons in %d buckets)\n", rep.Position, rep.Coupons, rep.Pairs)
	if rep.CountersCompared {
		fmt.Fprintf(w, "  cdc        checkpoint %s\n", rep.Checkpoint)
	}
	if rep.Note != "" {
		fmt.Fprintf(w, "  note       %s\n", rep.Note)
	}
	if rep.Failure != "" {
		fmt.Fprintf(w, "  error      %s\n", rep.Failure)
	}
	if rep.InFlight > 0 {
		fmt.Fprintf(w, "  in flight  %d counter rows moved past the snapshot; compared next pass\n", rep.InFlight)
	}
	fmt.Fprintf(w, "  took       %s (snapshot %s, waiting for the cdc %s, binlog replay to the checkpoint %s)\n",
		rep.Finished.Sub(rep.Started).Round(time.Millisecond), rep.SnapshotTook.Round(time.Millisecond),
		rep.CatchUpTook.Round(time.Millisecond), rep.ReplayTook.Round(time.Millisecond))
	switch {
	case len(rep.Differences) > 0:
		printDiffs(w, rep.Differences)
	case rep.Failure != "":
		fmt.Fprintln(w, "  no differences found before the error")
	default:
		fmt.Fprintln(w, "  no differences: counters, template counts, quotas and Redis equal the truth")
	}
}

func printDiffs(w io.Writer, diffs []reconcile.Difference) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  store\ttarget\texpected\tfound\taction\treason")
	for _, d := range diffs {
		found := "missing"
		if d.Found != nil {
			found = strconv.FormatInt(*d.Found, 10)
		} else if d.FoundRaw != "" {
			found = d.FoundRaw // a Redis key that holds no integer
		}
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t%s\t%s\n", d.Store, d.Target, d.Expected, found, d.Action, d.Reason)
	}
	tw.Flush()
}

func printOpen(ctx context.Context, db *sql.DB, stdout io.Writer) error {
	items, err := reconcile.ListOpen(ctx, db)
	if err != nil {
		return err
	}
	if len(items) == 0 {
		fmt.Fprintln(stdout, "no open items")
		return nil
	}
	for _, it := range items {
		fmt.Fprintf(stdout, "task %d at %s: %s\n", it.TaskID, it.StartedAt.Format(time.RFC3339), it.Summary)
		printDiffs(stdout, it.Differences)
		fmt.Fprintf(stdout, "  close with: couponlink reconcile -resolve %d -note \"what you checked or did\"\n\n", it.TaskID)
	}
	return nil
}
