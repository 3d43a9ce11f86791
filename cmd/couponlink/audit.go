package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/couponlink/couponlink/audit"
	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/internal/redact"
	"github.com/couponlink/couponlink/internal/settings"
	"github.com/couponlink/couponlink/inventory"
)

// auditSettings are couponlink audit's flags.
type auditSettings struct {
	db       settings.Database
	mapping  *string
	logging  settings.Logging
	snapshot settings.Snapshot
	asJSON   *bool
	record   *bool
	examples *int
}

const auditSummary = "Reads the shop's tables (through -mapping, or couponlink's own schema) at one consistent snapshot and reports " +
	"what was already wrong before couponlink came, by kind, naming the coupons, orders and members: coupons used with no evidence " +
	"(used_without_redemption), evidence on unused coupons (redemption_on_unused), a coupon behind two orders (double_spend), " +
	"budgets or quotas exceeded (over_issue), members over the per-user limit (per_user_limit_exceeded), uses after expiry " +
	"(used_after_expiry, where the schema keeps the time of a use); with the totals (coupons issued, used, with and without " +
	"evidence, write-offs). Counts are exact; each kind names at most -examples findings; progress goes to stderr. " +
	"With -record, the findings named are written as findings of kind found_at_attach/<kind> (they never page; acknowledge them " +
	"with couponlink anomalies ack). Exit code 0 when nothing was found, 1 when inconsistencies were found, 2 on error."

func auditFlags(stderr io.Writer) (*settings.Flags, *auditSettings) {
	f := newFlags("audit", auditSummary, stderr)
	o := &auditSettings{}
	f.Add(&o.db, &o.logging, &o.snapshot)
	// no -source: a shop of several sources is audited source by source, each with a mapping of its own
	o.mapping = f.EnvString("mapping", "COUPONLINK_MAPPING", "", "YAML mapping of the shop's schema to audit (empty: couponlink's reference schema)")
	o.asJSON = f.Bool("json", false, "print the report as JSON")
	o.record = f.Bool("record", false, "write the findings named into the finding table, kind found_at_attach/<kind> (a second run does not duplicate them)")
	o.examples = f.Int("examples", audit.DefaultExamples, "findings named (and recorded) per kind; the counts are exact all the same")
	return f, o
}

// runAudit is `couponlink audit`: its errors are exit code 2, as 1 means
// "inconsistencies found".
func runAudit(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, o := auditFlags(stderr)
	if err := f.Parse(args); err != nil {
		return err
	}
	err := o.run(ctx, stdout, stderr)
	var found exitCode
	if err == nil || errors.As(err, &found) {
		return err
	}
	fmt.Fprintf(stderr, "couponlink audit: %s\n", redact.Text(err.Error()))
	return exitCode(2)
}

// run audits, prints the report, records it with -record, and ends in
// exitCode(1) when it found anything.
func (o *auditSettings) run(ctx context.Context, stdout, stderr io.Writer) error {
	if *o.examples < 1 {
		return fmt.Errorf("-examples must be at least 1, got %d", *o.examples)
	}
	inventory.SetSnapshotMethod(*o.snapshot.Method)
	log := o.logging.Logger(stderr).With("component", "audit")
	db, err := openMySQL(*o.db.DSN, 2)
	if err != nil {
		return err
	}
	defer db.Close()
	m, name := canal.DefaultMapping(), "the reference schema"
	if path := *o.mapping; path != "" {
		if m, err = canal.ReadMappingFile(path); err != nil {
			return err
		}
		name = path
	}
	rep, err := auditShop(ctx, db, m, name, *o.examples, log)
	if err != nil {
		return err
	}
	if *o.asJSON {
		err = rep.WriteJSON(stdout)
	} else {
		err = rep.WriteText(stdout)
	}
	if err != nil {
		return err
	}
	if *o.record {
		n, err := audit.Record(ctx, db, rep, time.Now())
		if err != nil {
			return err
		}
		log.Info("audit: findings recorded", "findings", n, "kind", "found_at_attach/<kind>")
	}
	if !rep.Clean() {
		return exitCode(1)
	}
	return nil
}

// auditShop audits the shop's tables of m (resolved on db first).
func auditShop(ctx context.Context, db *sql.DB, m *canal.Mapping, name string, examples int, log *slog.Logger) (*audit.Report, error) {
	m, err := m.Resolve(ctx, db)
	if err != nil {
		return nil, err
	}
	return audit.Run(ctx, db, m, name, audit.Config{Examples: examples, Logger: log})
}

// auditAtBootstrap is the cdc's audit at attach (-audit-at-bootstrap):
// after each bootstrap, in the background, the shop's tables are audited
// in a snapshot of their own (a moment after the bootstrap's position)
// and what was already wrong is recorded as found_at_attach findings. It
// is logged, never fatal: a mapping the audit cannot read (several
// sources, shards) only says so.
func auditAtBootstrap(db *sql.DB, m *canal.Mapping, checkpoint string, log *slog.Logger) func(context.Context, canal.Position) {
	log = log.With("component", "audit")
	return func(ctx context.Context, pos canal.Position) {
		go func() {
			rep, err := auditShop(ctx, db, m, "checkpoint "+checkpoint, audit.DefaultExamples, log)
			if err != nil {
				log.Warn("audit at bootstrap: not done", "err", redact.Text(err.Error()))
				return
			}
			n, err := audit.Record(ctx, db, rep, time.Now())
			switch {
			case err != nil:
				log.Warn("audit at bootstrap: findings not recorded", "err", redact.Text(err.Error()))
			case rep.Clean():
				log.Info("audit at bootstrap: the shop's tables were consistent", "bootstrap_position", pos.String())
			default:
				log.Warn("audit at bootstrap: the shop's tables held inconsistencies before this bootstrap (couponlink anomalies lists them)",
					"found", rep.Found, "recorded", n, "kind", "found_at_attach/<kind>", "bootstrap_position", pos.String())
			}
		}()
	}
}
