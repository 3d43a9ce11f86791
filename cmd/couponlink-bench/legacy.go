package main

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/migrations"
)

// Phase 7, legacy: the real `couponlink cdc` following a legacy shop
// through its mapping (decode through the mapping, the evidence checks,
// the key tables) over a backlog of -legacy-rows row changes per layout,
// beside a no-op go-mysql reader over the same binlog range, with the
// cdc's CPU profile (its -cpuprofile). Per layout of -legacy-layouts: the
// shop is created in a schema of its own (legacy_<layout>) beside
// couponlink's database for it (cl_<layout>), the cdc bootstrapped on the
// empty shop and stopped, the backlog written, then timed: a no-op reader,
// the cdc, a no-op reader again (the ratio takes the mean of the two
// readers). The counters must equal a GROUP BY of the shop's coupons, and
// the clean workload must leave no anomaly.

// legacyRun is one layout's timed catch-up.
type legacyRun struct {
	shop    legacyShop
	schema  string // the shop's schema
	clDB    string // couponlink's database of its cdc
	mapping string // the mapping file
	source  string // -source ("" without sources)
	name    string // its checkpoint name
	include []string
	part    backlogPart
	from    canal.Position
	events0 int64
	cdcRun
	noops   []readerRun // before and after the cdc
	dbCPU   time.Duration
	profile string // the cdc's CPU profile
	verify  string
}

func (l *legacyRun) cp(e *env) checkpointRef {
	return checkpointRef{e.db, "`" + l.clDB + "`.cdc_checkpoint", l.name}
}

// streamRate is rows/s from the cdc's "tailing the binlog" line to its
// checkpoint at the end.
func (l *legacyRun) streamRate() float64 {
	return float64(l.part.rows) / (l.took - l.startup).Seconds()
}

// noopRate is the mean of the no-op readers' rates.
func (l *legacyRun) noopRate() float64 {
	var sum float64
	for _, r := range l.noops {
		sum += r.rate
	}
	return sum / float64(len(l.noops))
}

func (l *legacyRun) ratio() float64 { return l.streamRate() / l.noopRate() }

// runLegacy runs phase 7 on the bench's server, layout by layout.
func runLegacy(ctx context.Context, cfg config, e *env, log *slog.Logger) ([]*legacyRun, error) {
	log.Info("phase 7: legacy: couponlink cdc through a mapping vs a no-op reader", "rows", cfg.legacyRows, "layouts", strings.Join(cfg.legacyLayouts, ","))
	var out []*legacyRun
	for i, name := range cfg.legacyLayouts {
		l, err := setupLegacy(ctx, cfg, e, name)
		if err != nil {
			return out, fmt.Errorf("%s: %w", name, err)
		}
		// each layout's coupon ids from its own base, within a signed INT
		// (the orders-writeoff shop's ids are INT(10), as its shop's are)
		if err := l.measure(ctx, cfg, e, int64(i)*100_000_000, log); err != nil {
			return out, fmt.Errorf("%s: %w", name, err)
		}
		out = append(out, l)
	}
	return out, nil
}

// setupLegacy creates the shop and couponlink's database of one layout,
// and writes its mapping.
func setupLegacy(ctx context.Context, cfg config, e *env, name string) (*legacyRun, error) {
	key := strings.ReplaceAll(name, "-", "_")
	l := &legacyRun{schema: "legacy_" + key, clDB: "cl_" + key, name: "default"}
	for _, s := range legacyShops {
		if s.name == name {
			l.shop = s
		}
	}
	if err := l.shop.create(ctx, e.db, shopDSN(cfg, e, l.schema), cfg.repo, l.schema); err != nil {
		return nil, err
	}
	dsn := shopDSN(cfg, e, l.clDB)
	if _, err := migrations.Up(dsn); err != nil {
		return nil, fmt.Errorf("migrate %s: %w", l.clDB, err)
	}
	text, source, err := l.shop.mapping(cfg.repo, l.schema, dsn)
	if err != nil {
		return nil, err
	}
	if l.source = source; source != "" {
		l.name = source
	}
	m, err := canal.LoadMapping([]byte(text))
	if err != nil {
		return nil, fmt.Errorf("its mapping: %w", err)
	}
	var q []string
	for _, t := range m.SourceTables() {
		q = append(q, regexp.QuoteMeta(t))
	}
	l.include = []string{`^(?:` + strings.Join(q, "|") + `)$`}
	l.mapping = filepath.Join(e.dir, "legacy-"+name+".yaml")
	return l, os.WriteFile(l.mapping, []byte(text), 0o600)
}

// measure boots the cdc on the empty shop, writes the backlog and times
// the readers and the cdc over it, then checks the counters.
func (l *legacyRun) measure(ctx context.Context, cfg config, e *env, base int64, log *slog.Logger) error {
	end, err := canal.CurrentPosition(ctx, e.db)
	if err != nil {
		return err
	}
	if _, err := l.runCDC(ctx, cfg, e, end, "bootstrap", ""); err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	if l.events0, l.from, err = l.cp(e).read(ctx); err != nil {
		return err
	}
	if l.part, err = writeLegacy(ctx, e, l.shop, l.schema, base, cfg.legacyRows, cfg.txRows, log); err != nil {
		return err
	}
	log.Info("legacy backlog written", "layout", l.shop.name, "rows", l.part.rows, "took", l.part.took.Round(time.Millisecond))
	if err := l.noop(ctx, e); err != nil {
		return err
	}
	l.profile = filepath.Join(cfg.out, cfg.stamp+"-cdc-legacy-"+l.shop.name+".pprof")
	db0 := e.mariadbCPU()
	ch, err := l.runCDC(ctx, cfg, e, l.part.to, "catchup", l.profile)
	if err != nil {
		return err
	}
	l.dbCPU = e.mariadbCPU() - db0
	if err := l.settle(ctx, l.cp(e), ch, l.events0); err != nil {
		return err
	}
	if err := l.noop(ctx, e); err != nil {
		return err
	}
	log.Info("couponlink cdc through the mapping caught up", "layout", l.shop.name, "rows", l.rows, "rows_per_s", int(l.streamRate()),
		"noop_rows_per_s", int(l.noopRate()), "ratio", fmt.Sprintf("%.2f", l.ratio()), "cpu_per_row", perRow(l.cpu, l.part.rows),
		"noop_cpu_per_row", l.noops[0].perRow, "profile", l.profile)
	if l.rows != int64(l.part.rows) {
		log.Warn("the cdc applied another number of rows than were written", "layout", l.shop.name, "written", l.part.rows, "cdc", l.rows)
	}
	l.verify, err = l.check(ctx, e)
	return err
}

// runCDC starts the cdc, waits for its checkpoint at target and stops it
// (which completes its profile, when one is asked for).
func (l *legacyRun) runCDC(ctx context.Context, cfg config, e *env, target canal.Position, label, profile string) (*child, error) {
	args := []string{"-dsn", shopDSN(cfg, e, l.clDB), "-mapping", l.mapping, "-redis", e.redisAddr, "-key-prefix", "bench-" + l.clDB + ":"}
	if l.source != "" {
		args = append(args, "-source", l.source)
	}
	if profile != "" {
		args = append(args, "-cpuprofile", profile)
	}
	ch, err := e.startCDC(cfg, fmt.Sprintf("cdc-legacy-%s-%s", l.shop.name, label), args...)
	if err != nil {
		return nil, err
	}
	defer ch.stop()
	if err := l.arrive(ctx, l.cp(e), ch, target, 15*time.Minute); err != nil {
		return nil, err
	}
	ch.stop()
	return ch, nil
}

// noop times a no-op reader over the backlog's range.
func (l *legacyRun) noop(ctx context.Context, e *env) error {
	r, err := timeNoop(ctx, e, l.include, modeStart(l.from, "file"), l.part.to)
	if err != nil {
		return fmt.Errorf("no-op reader: %w", err)
	}
	if r.rows != int64(l.part.rows) {
		return fmt.Errorf("the no-op reader saw %d row changes, %d were written", r.rows, l.part.rows)
	}
	l.noops = append(l.noops, r)
	return nil
}

// check compares the counters with a GROUP BY of the shop's coupons and
// counts the anomalies (none: the workload is clean). A result starting
// with "MISMATCH" is a failed check.
func (l *legacyRun) check(ctx context.Context, e *env) (string, error) {
	truth, err := groupCounts(ctx, e.db, l.shop.truth(l.schema))
	if err != nil {
		return "", fmt.Errorf("truth: %w", err)
	}
	got, err := readCounters(ctx, e.db, "`"+l.clDB+"`.inventory_counter")
	if err != nil {
		return "", err
	}
	var anomalies int64
	if err := e.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM `"+l.clDB+"`.cdc_anomaly").Scan(&anomalies); err != nil {
		return "", err
	}
	var coupons int64
	for _, c := range truth {
		coupons += c.Issued()
	}
	switch {
	case !maps.Equal(truth, got):
		return fmt.Sprintf("MISMATCH %s: counters %v, GROUP BY of the shop %v", l.shop.name, got, truth), nil
	case anomalies > 0:
		return fmt.Sprintf("MISMATCH %s: %d anomalies over a clean workload (see %s.cdc_anomaly)", l.shop.name, anomalies, l.clDB), nil
	}
	return fmt.Sprintf("%s: counters = GROUP BY of the shop for all %d pairs (%s coupons), no anomaly", l.shop.name, len(truth), count(coupons)), nil
}

// legacy adds phase 7's rows: per layout, the cdc against the no-op
// reader, and the top of its profile.
func (r *Report) legacy(cfg config, runs []*legacyRun) {
	for _, l := range runs {
		r.add(Row{ID: "8", What: fmt.Sprintf("CDC catch-up through a legacy mapping, %s, real `couponlink cdc` (rows/s)", l.shop.name),
			Ours: rate(l.streamRate(), "rows/s"), Peer: rate(l.noopRate(), "rows/s") + " (no-op go-mysql canal, mean of before and after)",
			OursNum: l.streamRate(), PeerNum: l.noopRate(), Target: "≥ 0.80",
			Settings: fmt.Sprintf("%s; schema %s; %s row changes in %d-coupon transactions by 8 writers (3 in 5 claim, the others use with the shop's evidence or expire, by turns), written in %s; "+
				"binlog %s → %s; cdc rows/s from its \"tailing the binlog\" line (start-up %s) to checkpoint ≥ end, from process start %s; rows it applied %s; "+
				"no-op readers %s (before, after); CPU per row: cdc %s (incl. start-up), no-op reader %s, MariaDB during the cdc %s; cdc VmRSS at its end %s, VmHWM %s; "+
				"profile %s; %s",
				l.shop.what, l.schema, count(int64(l.part.rows)), cfg.txRows, sec(l.part.took), l.from, l.part.to, sec(l.startup), rate(float64(l.part.rows)/l.took.Seconds(), "rows/s"),
				count(l.rows), rates(l.noops), us(perRow(l.cpu, l.part.rows)), us(medianCPU(l.noops)), us(perRow(l.dbCPU, l.part.rows)), mib(l.rss), mib(l.hwm),
				l.profile, cfg.cdcSettings()),
		})
		r.Notes = append(r.Notes, "After the legacy phase: "+l.verify)
		r.check("after the legacy phase", l.verify)
	}
}
