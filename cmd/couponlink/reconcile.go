package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"

	"github.com/couponlink/couponlink/api"
	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/internal/redisconn"
	"github.com/couponlink/couponlink/internal/settings"
	"github.com/couponlink/couponlink/inventory"
	"github.com/couponlink/couponlink/reconcile"
)

// reconcileSettings are couponlink reconcile's flags, by concern.
type reconcileSettings struct {
	daemonSettings
	// a pass: its waits, what it fixes, what it leaves for a person, its events
	quiet, claimedQuiet, catchUp *time.Duration
	absT                         *int
	rel                          *float64
	noFix, events                *bool
	// the daemon's passes
	every *time.Duration
	// the one-shot actions, on the command line only: one pass, the open
	// items, closing one, acknowledging a finding
	once, list    *bool
	resolve       *int
	note          *string
	ack, operator *string
}

const reconcileSummary = "Proves that the cdc's counters, coupon_template's cached counts, channel_quota and the Redis stock keys equal the truth in MySQL; fixes what is safe, records every pass in reconcile_task, leaves the rest for a person. With a mapping with sources: each source on its own server (its dsn), then the checks of a template's whole on the sum over the sources. Runs every -every as a daemon with /metrics, or once with -once (exit 0 clean, fixed or acknowledged, 1 needs review or, with -no-fix, any difference, 2 error)."

func reconcileFlags(stderr io.Writer) (*settings.Flags, *reconcileSettings) {
	f := newFlags("reconcile", reconcileSummary, stderr)
	o := &reconcileSettings{}
	o.register(f, "reconcile", daemonUses{
		mapping:   "YAML mapping of a legacy schema (default: the reference schema)",
		source:    "with a mapping with sources: the source whose task -resolve closes or whose finding -ack acknowledges (each source's server has its own)",
		redis:     "Redis address (host:port, or redis://[user:password@]host:port[/db], rediss:// for TLS), or a comma-separated list of a Redis Cluster's nodes (empty: Redis is not compared)",
		redisMode: "owner (couponlink's stock keys) or corrector (the mapping's legacy keys); default by schema",
		name:      "the cdc's checkpoint name",
		metrics:   "listen address of /metrics, /healthz and /status (the cdc's status as JSON, as couponlink status -json prints it) for the daemon (empty: none)",
	})
	o.quiet = f.EnvDuration("quiet", "COUPONLINK_RECONCILE_QUIET", 5*time.Second, "a Redis key is corrected only if it and the truth stayed put this long")
	o.claimedQuiet = f.EnvDuration("claimed-quiet", "COUPONLINK_RECONCILE_CLAIMED_QUIET", 2*time.Minute,
		"corrector mode: a member of a front end's claimed set (redis.claimed_users) without the per-user limit in MySQL is removed only if it is still so this long after it was found and the set did not change (longer than a claim takes from the front end's SADD to its order's commit)")
	o.catchUp = f.EnvDuration("catch-up-wait", "COUPONLINK_RECONCILE_CATCH_UP", 30*time.Second, "bound of the binlog replay between the snapshot and the cdc's checkpoint, and of the wait for another pass (one pass at a time per database)")
	o.absT = f.EnvInt("abs-threshold", "COUPONLINK_RECONCILE_ABS", 100, "a counter or template count off by more than this and by more than -rel-threshold of the truth is left for a person, otherwise fixed")
	o.rel = f.EnvFloat("rel-threshold", "COUPONLINK_RECONCILE_REL", 0.05, "share of the truth, above 0 and at most 1 (0.05 = 5%): a counter or template count off by more than this and by more than -abs-threshold is left for a person")
	o.noFix = f.EnvBool("no-fix", "COUPONLINK_RECONCILE_NO_FIX", false, "only report, correct nothing (with -once: exit 1 when anything differs)")
	o.events = f.EnvBool("events", "COUPONLINK_RECONCILE_EVENTS", os.Getenv("COUPONLINK_WEBHOOK_URL") != "" || os.Getenv("COUPONLINK_EVENT_SINKS") != "",
		"write a reconcile.needs_review event to the webhook outbox with each pass that needs a person (default: on when COUPONLINK_WEBHOOK_URL or COUPONLINK_EVENT_SINKS is set, as for the cdc that delivers it)")
	o.every = f.EnvDuration("every", "COUPONLINK_RECONCILE_EVERY", time.Minute, "time between passes of the daemon (the alert budget of drift is it + 60 s: docs/monitoring.md)")
	o.once = f.Bool("once", false, "run one pass, print the report, exit 0 (clean, fixed, or acknowledged: every difference left for a person is a finding acknowledged as it is), 1 (needs review; with -no-fix, any difference) or 2 (error: the pass stopped; its task keeps what it found and fixed before; with sources: a source's pass or the cross-source step, the others' reports printed all the same)")
	o.list = f.Bool("list", false, "list the open items (passes that need review) and exit")
	o.resolve = f.Int("resolve", 0, "close the open item with this task id (with -note)")
	o.note = f.String("note", "", "what was checked or done, for -resolve; why, for -ack")
	o.ack = f.String("ack", "", "acknowledge the finding with this fingerprint (with -operator and -note): found again as it is, a pass reports it acknowledged and -once exits 0")
	o.operator = f.String("operator", "", "who acknowledges, for -ack")
	return f, o
}

func runReconcile(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, o := reconcileFlags(stderr)
	if err := f.Parse(args); err != nil {
		return err
	}
	inventory.SetSnapshotMethod(*o.snapshot.Method)
	// with -once, whatever keeps the pass from running is exit code 2 (1 means "needs review")
	failed := func(err error) error {
		if !*o.once {
			return err
		}
		fmt.Fprintf(stderr, "couponlink reconcile: %v\n", err)
		return exitCode(2)
	}
	if !(*o.rel > 0 && *o.rel <= 1) { // 0 would mean the package's default
		return failed(fmt.Errorf("-rel-threshold must be a share of the truth above 0 and at most 1 (0.05 = 5%%), got %v", *o.rel))
	}
	base := o.logging.Logger(stderr) // reconcile names its component
	m, err := readMapping(*o.mapping.File)
	if err != nil {
		return failed(err)
	}
	if m != nil && m.HasSources() {
		return o.runSources(ctx, m, stdout, stderr, failed, base)
	}
	db, err := openMySQL(*o.db.DSN, reconcileConns)
	if err != nil {
		return failed(err)
	}
	defer db.Close() // after every part below has stopped
	switch {
	case *o.list:
		return printOpen(ctx, db, stdout, "")
	case *o.resolve > 0:
		if *o.mapping.Source != "" {
			return fmt.Errorf("-source %q: the mapping names no sources", *o.mapping.Source)
		}
		return o.resolveTask(ctx, db, stdout)
	case *o.ack != "":
		if *o.mapping.Source != "" {
			return fmt.Errorf("-source %q: the mapping names no sources", *o.mapping.Source)
		}
		return o.ackFinding(ctx, db, stdout, stderr)
	}
	reg := prometheus.NewRegistry()
	r, closeRedis, err := o.reconciler(db, m, reg, base)
	if err != nil {
		return failed(err)
	}
	defer closeRedis()
	if *o.once {
		return reconcileOnce(ctx, r, stdout, stderr)
	}
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return o.daemon(ctx, r, reg, db, base.With("component", "reconcile"))
}

// resolveTask closes the task of -resolve on db.
func (o *reconcileSettings) resolveTask(ctx context.Context, db *sql.DB, stdout io.Writer) error {
	who := "operator"
	if u, err := user.Current(); err == nil {
		who = u.Username
	}
	if err := reconcile.Resolve(ctx, db, int64(*o.resolve), who, *o.note, ""); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "task %d resolved by %s\n", *o.resolve, who)
	return nil
}

// ackFinding acknowledges the finding of -ack on db, with -operator and
// -note.
func (o *reconcileSettings) ackFinding(ctx context.Context, db *sql.DB, stdout, stderr io.Writer) error {
	f, err := inventory.AckFinding(ctx, db, *o.ack, *o.operator, *o.note, "")
	if err != nil {
		return reportFinding(stderr, "reconcile -ack", err)
	}
	fmt.Fprintf(stdout, "finding %s (%s: %s) acknowledged by %s\n", f.Fingerprint, f.Kind, f.Subject, f.AcknowledgedBy)
	return nil
}

// config is the reconciler settings the flags describe (all but the
// database, its binlog and the mapping), and how to close its Redis client.
func (o *reconcileSettings) config(reg prometheus.Registerer, log *slog.Logger) (reconcile.Config, func(), error) {
	cfg := reconcile.Config{Checkpoint: *o.cp.Name, QuietWindow: *o.quiet, ClaimedQuiet: *o.claimedQuiet, CatchUpWait: *o.catchUp,
		AbsThreshold: int64(*o.absT), RelThreshold: *o.rel, Events: *o.events, Logger: log, Registerer: reg}
	var err error
	if cfg.RedisMode, err = inventory.ParseRedisMode(*o.redis.Mode); err != nil {
		return cfg, nil, fmt.Errorf("-redis-mode: %w", err)
	}
	cfg.Keys.Prefix = *o.redis.Prefix
	fix := !*o.noFix
	cfg.AutoFix = &fix
	closeRedis := func() {}
	if *o.redis.Addr != "" {
		ro := o.redis.Options()
		ro.DialTimeout = time.Second
		rdb, err := redisconn.Open(ro)
		if err != nil {
			return cfg, nil, err
		}
		cfg.Redis, closeRedis = rdb, func() { _ = rdb.Close() }
	}
	return cfg, closeRedis, nil
}

// reconciler is the reconciler the flags describe on one server, and how
// to close its Redis client.
func (o *reconcileSettings) reconciler(db *sql.DB, m *canal.Mapping, reg prometheus.Registerer, log *slog.Logger) (*reconcile.Reconciler, func(), error) {
	cfg, closeRedis, err := o.config(reg, log)
	if err != nil {
		return nil, nil, err
	}
	cfg.DB, cfg.Mapping = db, m
	if cfg.Binlog, err = tailerConfig(*o.db.DSN, "", 0); err != nil {
		closeRedis()
		return nil, nil, err
	}
	r, err := reconcile.New(cfg)
	if err != nil {
		closeRedis()
		return nil, nil, err
	}
	return r, closeRedis, nil
}

// reconcileOnce runs one pass and prints its report; the exit code says
// how it went.
func reconcileOnce(ctx context.Context, r *reconcile.Reconciler, stdout, stderr io.Writer) error {
	rep, err := r.Pass(ctx)
	if rep != nil {
		printReport(stdout, rep) // also a failed pass: what it found and fixed before it stopped
	}
	if err != nil {
		fmt.Fprintf(stderr, "couponlink reconcile: %v\n", err)
		return exitCode(2)
	}
	if rep.Status == "needs_review" { // acknowledged: only findings a person acknowledged, 0
		return exitCode(1)
	}
	return nil
}

// daemon runs the reconciler's loop and the ops server in one group: the
// first that fails stops the other.
func (o *reconcileSettings) daemon(ctx context.Context, r *reconcile.Reconciler, reg *prometheus.Registry, db *sql.DB, log *slog.Logger) error {
	m, err := readMapping(*o.mapping.File) // read and checked before, by reconciler
	if err != nil {
		return err
	}
	return o.serve(ctx, reg, db, *o.cp.Name, m, log, func(ctx context.Context) error { return r.Run(ctx, *o.every) })
}

// serve runs the reconciler's loop (run) and the ops server (/status of
// the cdc name on db) in one group: the first that fails stops the other.
func (o *reconcileSettings) serve(ctx context.Context, reg *prometheus.Registry, db *sql.DB, name string, m *canal.Mapping,
	log *slog.Logger, run func(context.Context) error) error {
	g, gctx := errgroup.WithContext(ctx)
	if *o.metrics.Addr != "" {
		ops, err := listenOps(*o.metrics.Addr, reg, db, name, m, nil, log)
		if err != nil {
			return err
		}
		g.Go(func() error { return ops.Run(gctx) })
	}
	log.Info("reconciler running", "every", *o.every)
	g.Go(func() error { return run(gctx) })
	return g.Wait()
}

func printReport(w io.Writer, rep *reconcile.Report) {
	fmt.Fprintf(w, "reconcile task %d: %s\n", rep.TaskID, rep.Status)
	if len(rep.SumOf) > 0 { // the cross-source step
		fmt.Fprintf(w, "  sum of     %s (%d coupons in %d buckets)\n", strings.Join(rep.SumOf, ", "), rep.Coupons, rep.Pairs)
	} else {
		fmt.Fprintf(w, "  snapshot   %s (%d coupons in %d buckets)\n", rep.Position, rep.Coupons, rep.Pairs)
	}
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

// printDiffs prints the differences, with a column source when they
// have one (a mapping with sources).
func printDiffs(w io.Writer, diffs []reconcile.Difference) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	sourced := slices.ContainsFunc(diffs, func(d reconcile.Difference) bool { return d.Source != "" })
	head := "  store\ttarget\texpected\tfound\taction\treason"
	if sourced {
		head = "  source\t" + head[2:]
	}
	fmt.Fprintln(tw, head)
	for _, d := range diffs {
		found := "missing"
		if d.Found != nil {
			found = strconv.FormatInt(*d.Found, 10)
		} else if d.FoundRaw != "" {
			found = d.FoundRaw // a Redis key that holds no integer
		}
		fmt.Fprint(tw, "  ")
		if sourced {
			fmt.Fprintf(tw, "%s\t", d.Source)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", d.Store, d.Target, d.Expected, found, d.Action, d.Reason)
	}
	tw.Flush()
	printFindings(w, diffs)
}

// printFindings lists the findings the differences left for a person are,
// with their state, and how to acknowledge the open ones.
func printFindings(w io.Writer, diffs []reconcile.Difference) {
	open := false
	for _, d := range diffs {
		if d.Fingerprint != "" {
			fmt.Fprintf(w, "  finding %s %s: %s\n", d.Fingerprint, d.Finding, d.Target)
			open = open || d.Finding == api.FindingOpen
		}
	}
	if open {
		fmt.Fprintln(w, "  acknowledge with: couponlink reconcile -ack FINGERPRINT -operator NAME -note \"what you checked\"")
	}
}

// printOpen lists the open items on db; with sources, source names the
// source whose server db is (-resolve needs it).
func printOpen(ctx context.Context, db *sql.DB, stdout io.Writer, source string) error {
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
		flag := ""
		if source != "" {
			flag = " -source " + source
		}
		fmt.Fprintf(stdout, "  close with: couponlink reconcile -resolve %d%s -note \"what you checked or did\"\n\n", it.TaskID, flag)
	}
	return nil
}
