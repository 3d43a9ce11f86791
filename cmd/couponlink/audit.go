package main

import (
	"context"
	"errors"
	"fmt"
	"io"
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
	if m, err = m.Resolve(ctx, db); err != nil {
		return err
	}
	rep, err := audit.Run(ctx, db, m, name, audit.Config{Examples: *o.examples, Logger: log})
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
