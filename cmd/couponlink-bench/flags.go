package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/couponlink/couponlink/internal/settings"
	"github.com/couponlink/couponlink/inventory"
)

// Every flag of the bench is defined here, in one place.

// config holds every setting of a run.
type config struct {
	repo           string
	out            string
	cpuprofile     string
	backlogSingle  int
	backlogBatched int
	txRows         int
	modes          []string
	reps           int
	lagRates       []int
	lagDuration    time.Duration
	lagLoad        string
	lagTxRows      int
	writers        int
	steadyDuration time.Duration
	clients        int
	apiDuration    time.Duration
	redeemPool     int
	batchRows      int
	batchWait      time.Duration
	dsnParams      string
	keepServers    bool
	quick          bool
	smoke          bool
	peerTransfer   string
	recRows        []int64
	recReaders     []int
	sourcesRows    int
	sourcesReps    int
	sourcesShards  []int
	flashClaims    int
	flashCoupons   int
	flashClients   int
	legacyRows     int
	legacyLayouts  []string
	phases         string
	stamp          string
}

// listFlags are the flags read as text, parsed once the presets are in,
// and the log level.
type listFlags struct {
	modes, rates, recRows, shards, layouts string
	recReaders                             string
	logging                                settings.Logging // -log-level, as every couponlink command has it
}

// defineFlags binds every flag of fs to the config and listFlags it returns.
func defineFlags(fs *flag.FlagSet) (*config, *listFlags) {
	cfg, l := &config{}, &listFlags{}
	fs.StringVar(&cfg.repo, "repo", ".", "repository root (holds deploy/local/servers.sh and cmd/couponlink)")
	fs.StringVar(&cfg.out, "out", "bench/results", "directory of the results (<timestamp>.md, .json, the CPU profile)")
	fs.StringVar(&cfg.cpuprofile, "cpuprofile", "", "CPU profile of the cdc catch-up (default <out>/<timestamp>-cdc-catchup.pprof)")
	fs.IntVar(&cfg.backlogSingle, "backlog-single", 500_000, "row changes of the backlog written in 1-row transactions")
	fs.IntVar(&cfg.backlogBatched, "backlog-batched", 500_000, "row changes of the backlog written in -tx-rows-row transactions")
	fs.IntVar(&cfg.txRows, "tx-rows", 100, "rows per transaction of the batched part of the backlog")
	fs.StringVar(&l.modes, "modes", "file,gtid", "start modes of the catch-up runs: file (file/offset), gtid, or both")
	fs.IntVar(&cfg.reps, "reps", 3, "repetitions of each catch-up pair (no-op reader, pipeline); the table shows medians")
	fs.StringVar(&l.rates, "lag-rates", "1000,5000", "claim rates (commits/s) of the steady-state lag runs")
	fs.DurationVar(&cfg.lagDuration, "lag-duration", 10*time.Second, "length of each steady-state lag run")
	fs.StringVar(&cfg.lagLoad, "lag-load", "inserts", "the steady-state lag runs' source transactions: inserts (one autocommit INSERT of one user_coupon row: 1-row transactions) or claims (coupon.Store.Claim: user_claim, user_coupon, channel_quota in one transaction)")
	fs.IntVar(&cfg.lagTxRows, "lag-tx-rows", 1, "rows per autocommit INSERT of -lag-load inserts (the rates stay rows/s): a multi-row writer when 1-row transactions cannot reach the rate")
	fs.IntVar(&cfg.writers, "writers", 64, "writer goroutines (and MySQL connections) of the paced loads; the lag runs from 5,000/s up use twice as many")
	fs.DurationVar(&cfg.steadyDuration, "steady-duration", 10*time.Second, "steady state at 1,000 claims/s of the couponlink cdc binary (memory row)")
	fs.IntVar(&cfg.clients, "clients", 32, "closed-loop HTTP clients of the API runs, and connections of the INSERT ceiling")
	fs.DurationVar(&cfg.apiDuration, "api-duration", 6*time.Second, "length of each API (and ceiling) run")
	fs.IntVar(&cfg.redeemPool, "redeem-pool", 100_000, "AVAILABLE coupons created for the redemption run")
	fs.IntVar(&cfg.batchRows, "cdc-batch-rows", 0, "the cdc's -batch-rows for the in-process pipeline and the binary (0: couponlink's default)")
	fs.DurationVar(&cfg.batchWait, "cdc-batch-wait", -1, "the cdc's -batch-wait (negative: couponlink's default)")
	fs.StringVar(&cfg.dsnParams, "dsn-params", "", "extra go-sql-driver DSN parameters for couponlink's own connections (api, cdc, sink, claim store), e.g. \"writeTimeout=5s\"; couponlink itself always interpolates parameters")
	fs.BoolVar(&cfg.keepServers, "keep-servers", false, "leave the private servers running at the end (debugging)")
	fs.StringVar(&l.recRows, "reconcile-rows", "1000000,10000000", "user coupon counts of the reconcile passes (multiples of 1,000; ascending, each seeded on top of the last)")
	fs.StringVar(&l.recReaders, "reconcile-readers", fmt.Sprint(inventory.DefaultSnapshotReaders), "transactions that count a reconcile snapshot (inventory.SetSnapshotReaders); several, e.g. 1,4: each size's passes with each, side by side")
	fs.IntVar(&cfg.sourcesRows, "sources-rows", 200_000, "row changes of the sources phase's shop: all on one server, or half on each of two (rounded down to a multiple of 2 × -tx-rows)")
	fs.IntVar(&cfg.sourcesReps, "sources-reps", 3, "repetitions of the sources phase's pair (1 source, 2 sources), each over new backlogs; the table shows the median")
	fs.StringVar(&l.shards, "sources-shards", "4,256", "shard table counts of the sources phase's start-up row (`couponlink cdc` on empty shops of that many user_coupon tables)")
	fs.IntVar(&cfg.flashClaims, "flash-claims", 200_000, "claims of distinct users in the flash phase's burst")
	fs.IntVar(&cfg.flashCoupons, "flash-coupons", 2_000, "coupons of the flash phase's campaign")
	fs.IntVar(&cfg.flashClients, "flash-clients", 64, "closed-loop HTTP clients of the flash phase's burst")
	fs.IntVar(&cfg.legacyRows, "legacy-rows", 1_000_000, "row changes of the legacy phase's backlog, per layout (at least: the row changes of the tables its cdc follows)")
	fs.StringVar(&l.layouts, "legacy-layouts", strings.Join(legacyShopNames(), ","), "layouts of the legacy phase: deploy/legacy directories, or sharded (the sources phase's shop)")
	fs.StringVar(&cfg.phases, "phases", "all", "all: every phase; else a comma-separated list of phases by name (catch-up, peer, memory, lag, api, reconcile, sources, legacy, flash); the phases a named one reads are added")
	fs.BoolVar(&cfg.quick, "quick", false, "short run (~1 minute): 50k+50k backlog, 3 s runs, reconcile over 100k and 1M")
	fs.StringVar(&cfg.peerTransfer, "peer-transfer", "", "a go-mysql-transfer binary (wj596/go-mysql-transfer, built by you, never part of this repository): adds the outside peer's catch-up row")
	fs.BoolVar(&cfg.smoke, "smoke", false, "every row at tiny sizes (about 40 s; part of make test): fails on any error or failed check")
	settings.Wrap(fs).Add(&l.logging)
	return cfg, l
}

// presets applies -quick or -smoke over the flags.
func (c *config) presets(l *listFlags) {
	if c.quick {
		c.backlogSingle, c.backlogBatched = 50_000, 50_000
		c.lagDuration, c.steadyDuration, c.apiDuration = 3*time.Second, 3*time.Second, 3*time.Second
		c.redeemPool, c.reps = 30_000, 1
		l.recRows = "100000,1000000"
		c.sourcesRows, c.sourcesReps, l.shards = 50_000, 1, "4,64"
		c.flashClaims, c.flashCoupons = 50_000, 500
		c.legacyRows = 100_000
	}
	if c.smoke {
		c.backlogSingle, c.backlogBatched, c.txRows = 2_000, 2_000, 100
		l.modes, l.rates, c.reps = "file,gtid", "1000", 1
		c.lagDuration, c.steadyDuration, c.apiDuration = time.Second, time.Second, time.Second
		c.redeemPool, c.writers, c.clients = 5_000, 16, 32
		l.recRows = "10000,50000"
		c.sourcesRows, c.sourcesReps, l.shards = 2_000, 1, "4,8"
		c.flashClaims, c.flashCoupons, c.flashClients = 2_000, 20, 16
		c.legacyRows = 2_000
	}
}

// finish applies the presets, parses the lists, checks the sizes and sets
// the run's stamp and paths; fs tells whether -out was given.
func (c *config) finish(l listFlags, fs *flag.FlagSet) error {
	c.presets(&l)
	var err error
	if c.modes, err = modesList.read(l.modes); err != nil {
		return err
	}
	if c.lagRates, err = ratesList.read(l.rates); err != nil {
		return err
	}
	if c.recRows, err = recRowsList.read(l.recRows); err != nil {
		return err
	}
	if c.recReaders, err = readersList.read(l.recReaders); err != nil {
		return err
	}
	if c.sourcesShards, err = shardsList.read(l.shards); err != nil {
		return err
	}
	if c.legacyLayouts, err = layoutsList.read(l.layouts); err != nil {
		return err
	}
	if err := c.check(); err != nil {
		return err
	}
	c.stamp = time.Now().Format("20060102-150405")
	if c.repo, err = filepath.Abs(c.repo); err != nil {
		return err
	}
	outSet := false
	fs.Visit(func(f *flag.Flag) { outSet = outSet || f.Name == "out" })
	if c.smoke && !outSet {
		c.out = filepath.Join(os.TempDir(), "couponlink-bench-smoke") // not bench/results: make test runs it every time
	}
	if !filepath.IsAbs(c.out) {
		c.out = filepath.Join(c.repo, c.out)
	}
	if c.cpuprofile == "" {
		c.cpuprofile = filepath.Join(c.out, c.stamp+"-cdc-catchup.pprof")
	}
	return nil
}

// check refuses sizes and phases the bench cannot run.
func (c *config) check() error {
	if c.backlogSingle <= 0 || c.backlogBatched <= 0 || c.txRows <= 0 || c.reps <= 0 || c.clients <= 0 || c.writers <= 0 {
		return errors.New("sizes, -clients and -writers must be positive")
	}
	if c.lagLoad != "inserts" && c.lagLoad != "claims" {
		return fmt.Errorf("-lag-load %q: want inserts or claims", c.lagLoad)
	}
	if c.lagTxRows < 1 || (c.lagTxRows > 1 && c.lagLoad != "inserts") {
		return errors.New("-lag-tx-rows must be at least 1, and above 1 only with -lag-load inserts")
	}
	if c.sourcesRows < 10*c.txRows || c.sourcesReps <= 0 {
		return fmt.Errorf("-sources-rows must be at least 10 × -tx-rows (%d), -sources-reps positive", 10*c.txRows)
	}
	if c.flashCoupons <= 0 || c.flashClaims < c.flashCoupons || c.flashClients <= 0 {
		return errors.New("-flash-coupons and -flash-clients must be positive, -flash-claims at least -flash-coupons")
	}
	if c.legacyRows < 10*c.txRows {
		return fmt.Errorf("-legacy-rows must be at least 10 × -tx-rows (%d)", 10*c.txRows)
	}
	if c.legacyRows > 50_000_000 {
		return errors.New("-legacy-rows must be at most 50,000,000: each layout's coupon ids start 100,000,000 after the last's")
	}
	if c.phases == "all" {
		return nil
	}
	for _, name := range strings.Split(c.phases, ",") {
		if !slices.ContainsFunc(phases, func(p phase) bool { return p.key == name }) {
			return fmt.Errorf("-phases %q: %q is no phase (want all, or some of %s)", c.phases, name, strings.Join(phaseKeys(), ", "))
		}
	}
	return nil
}

// phaseKeys are the -phases names, in the order of a run.
func phaseKeys() []string {
	keys := make([]string, len(phases))
	for i, p := range phases {
		keys[i] = p.key
	}
	return keys
}

// runs says whether the run includes the phase named key: -phases names it,
// or a phase it names reads its results.
func (c config) runs(key string) bool {
	if c.phases == "all" {
		return true
	}
	for _, name := range strings.Split(c.phases, ",") {
		if name == key {
			return true
		}
		for _, p := range phases {
			if p.key == name && slices.Contains(p.needs, key) {
				return true
			}
		}
	}
	return false
}

// lagWriters is how many writers (and connections) the lag run at rate
// uses: -writers, and twice as many from 5,000/s up, since 64 writers of
// 1-row transactions reach only ~3,900/s on the 2-core bench machine.
func (c config) lagWriters(rate int) int {
	if rate >= 5000 {
		return 2 * c.writers
	}
	return c.writers
}

// storeConns is the connections of the bench's own writers' pool: enough
// for the largest paced load.
func (c config) storeConns() int {
	n := c.writers
	for _, r := range c.lagRates {
		n = max(n, c.lagWriters(r))
	}
	return n
}

// cdcFlags are the batching flags given to `couponlink cdc`: only those set.
func (c config) cdcFlags() []string {
	var out []string
	if c.batchRows > 0 {
		out = append(out, "-batch-rows", strconv.Itoa(c.batchRows))
	}
	if c.batchWait >= 0 {
		out = append(out, "-batch-wait", c.batchWait.String())
	}
	return out
}

// cdcSettings describes the cdc's batching for the report.
func (c config) cdcSettings() string {
	if f := c.cdcFlags(); len(f) > 0 {
		return "cdc " + strings.Join(f, " ")
	}
	return "cdc batching at couponlink's defaults (-batch-rows, -batch-wait unset)"
}

// listFields splits a comma-separated flag value: fields trimmed, empty
// ones dropped.
func listFields(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// listFlag reads one comma-separated flag value: each field through
// parse, at least one field; with sorted, the values ascending, each once.
type listFlag[T cmp.Ordered] struct {
	name, bad, none string // the flag, the message of a bad field (%q: the field), of an empty list
	parse           func(string) (T, bool)
	sorted          bool
}

func (p listFlag[T]) read(s string) ([]T, error) {
	var out []T
	for _, f := range listFields(s) {
		v, ok := p.parse(f)
		if !ok {
			return nil, fmt.Errorf("%s: "+p.bad, p.name, f)
		}
		out = append(out, v)
	}
	if p.sorted {
		slices.Sort(out)
		out = slices.Compact(out)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: %s", p.name, p.none)
	}
	return out, nil
}

// intIn parses an integer in [lo, hi] that is a multiple of step.
func intIn[T int | int64](lo, hi, step T) func(string) (T, bool) {
	return func(f string) (T, bool) {
		n, err := strconv.ParseInt(f, 10, 64)
		v := T(n)
		return v, err == nil && int64(v) == n && v >= lo && v <= hi && v%step == 0
	}
}

var (
	modesList = listFlag[string]{name: "-modes", bad: "unknown start mode %q (want file, gtid)", none: "name at least one start mode (file, gtid)",
		parse: func(f string) (string, bool) { return f, f == "file" || f == "gtid" }}
	ratesList = listFlag[int]{name: "-lag-rates", bad: "%q is not a positive rate", none: "name at least one rate",
		parse: intIn(1, math.MaxInt, 1)}
	recRowsList = listFlag[int64]{name: "-reconcile-rows", bad: "%q is not a positive multiple of 1,000", none: "name at least one size",
		parse: intIn(1, math.MaxInt64, int64(1000)), sorted: true}
	layoutsList = listFlag[string]{name: "-legacy-layouts", bad: "%q is no layout (want " + strings.Join(legacyShopNames(), ", ") + ")", none: "name at least one layout",
		parse: func(f string) (string, bool) { return f, slices.Contains(legacyShopNames(), f) }}
	readersList = listFlag[int]{name: "-reconcile-readers", bad: "%q is not a reader count (1..64)", none: "name at least one reader count",
		parse: intIn(1, 64, 1), sorted: true}
	shardsList = listFlag[int]{name: "-sources-shards", bad: "%q is not a table count (1..4096)", none: "name at least one table count",
		parse: intIn(1, 4096, 1), sorted: true}
)
