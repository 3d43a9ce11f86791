package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/internal/settings"
	"github.com/couponlink/couponlink/quota"
)

type quotaCommand struct {
	name, summary string
	run           func(ctx context.Context, name string, args []string, stdout, stderr io.Writer) error
	flags         func(name string, stderr io.Writer) *settings.Flags // run's, for FlagSets
}

func quotaCommands() []quotaCommand {
	return []quotaCommand{
		{"show", "print a template's rebalancing policy: each field, its value and whether an override or the defaults set it", runPolicyShow, flagsOnly(policyShowFlags)},
		{"set", "change fields of a template's override (only the flags given), audited", runPolicySet, flagsOnly(policySetFlags)},
		{"reset", "delete a template's override: it follows the defaults again, audited", runPolicyReset, flagsOnly(policyResetFlags)},
		{"audit", "list the changes of a template's policy, newest first", runPolicyAudit, flagsOnly(policyAuditFlags)},
	}
}

// flagsOnly is the flag set of a policy command's flag function.
func flagsOnly[S any](flags func(string, io.Writer) (*settings.Flags, S)) func(string, io.Writer) *settings.Flags {
	return func(name string, stderr io.Writer) *settings.Flags {
		f, _ := flags(name, stderr)
		return f
	}
}

// runQuota is `couponlink quota policy <show|set|reset|audit> [flags]`.
func runQuota(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && isHelp(args[0]) {
		quotaUsage(stdout)
		return nil
	}
	if len(args) < 2 || args[0] != "policy" {
		quotaUsage(stderr)
		return errUsage
	}
	if isHelp(args[1]) {
		quotaUsage(stdout)
		return nil
	}
	for _, c := range quotaCommands() {
		if c.name == args[1] {
			name := "quota policy " + c.name
			return reportDomain(stderr, name, c.run(ctx, name, args[2:], stdout, stderr))
		}
	}
	fmt.Fprintf(stderr, "couponlink quota policy: unknown command %q\n\n", args[1])
	quotaUsage(stderr)
	return errUsage
}

func quotaUsage(w io.Writer) {
	printUsage(w, "couponlink quota policy <command> -template ID [flags]", "couponlink quota policy <command>", 6, quotaCommands())
}

func (c quotaCommand) usageLine() (name, summary string) { return c.name, c.summary }

// flagOf is the flag of the command line that sets a field of the store's errors.
var flagOf = map[string]string{
	"mode": "-mode", "low": "-low", "high": "-high", "min_claims": "-min-claims", "max_share": "-max-share",
	"reserve": "-reserve", "cooldown_seconds": "-cooldown", "min_age_seconds": "-min-age",
	"changed_by": "-by", "reason": "-reason", "template": "-template",
}

// reportDomain prints a domain error (bad input, no such template) as its
// message, naming the flag, and ends the command with exit code 1; other
// errors go back to main.
func reportDomain(stderr io.Writer, name string, err error) error {
	e, ok := coupon.AsError(err)
	if !ok {
		return err
	}
	if fl, ok := flagOf[e.Field]; ok {
		fmt.Fprintf(stderr, "couponlink %s: %s: %s\n", name, fl, e.Message)
	} else {
		fmt.Fprintf(stderr, "couponlink %s: %s\n", name, e.Message)
	}
	return exitCode(1)
}

// policySettings are the flags every policy command has: the database
// and the template.
type policySettings struct {
	db       settings.Database
	template *int64
}

// register adds -dsn and the -template the policy commands require.
func (o *policySettings) register(f *settings.Flags) {
	f.Add(&o.db)
	o.template = f.Int64("template", 0, "id of the template (required)")
}

// parse parses args and checks that -template was given.
func (o *policySettings) parse(f *settings.Flags, args []string) error {
	if err := f.Parse(args); err != nil {
		return err
	}
	if *o.template <= 0 {
		fmt.Fprintln(f.Output(), "-template is required: the id of a template")
		return errUsage
	}
	return nil
}

// withDB parses args and runs do with the database, for a command that
// has nothing to check before it reads or writes.
func (o *policySettings) withDB(f *settings.Flags, args []string, do func(db *sql.DB) error) error {
	if err := o.parse(f, args); err != nil {
		return err
	}
	return withMySQL(*o.db.DSN, 2, do)
}

// policyShowSettings are couponlink quota policy show's flags.
type policyShowSettings struct {
	policySettings
	asJSON *bool
}

func policyShowFlags(name string, stderr io.Writer) (*settings.Flags, *policyShowSettings) {
	f := newFlags(name, "Prints the rebalancing policy of a template: each field's effective value, whether the template's override or the defaults set it, and the default.", stderr)
	o := &policyShowSettings{}
	o.register(f)
	o.asJSON = f.Bool("json", false, "print the policy as JSON, as GET /v1/templates/{id}/quota-policy does")
	return f, o
}

func runPolicyShow(ctx context.Context, name string, args []string, stdout, stderr io.Writer) error {
	f, o := policyShowFlags(name, stderr)
	return o.withDB(f, args, func(db *sql.DB) error {
		v, err := quota.GetPolicy(ctx, db, *o.template)
		if err != nil {
			return err
		}
		if *o.asJSON {
			return printJSON(stdout, v)
		}
		return printPolicy(stdout, v)
	})
}

func printPolicy(w io.Writer, v quota.PolicyView) error {
	fmt.Fprintf(w, "template %d\n", v.Template)
	if v.UpdatedAt != nil {
		fmt.Fprintf(w, "override version %d, by %s at %s\n", v.Version, v.UpdatedBy, v.UpdatedAt.UTC().Format(time.RFC3339))
	} else {
		fmt.Fprintln(w, "no override: every field is the default")
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "field\tvalue\tfrom\tdefault")
	for _, p := range policyFields(v) {
		from := "default"
		if p.overridden {
			from = "override"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", p.name, p.value, from, p.def)
	}
	return tw.Flush()
}

// policyField is one field of a policy, shown under its flag's name.
type policyField struct {
	name, value, def string
	overridden       bool
}

func policyFields(v quota.PolicyView) []policyField {
	e, d, o := v.Effective, v.Defaults, v.Override
	num := func(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
	secs := func(s int64) string { return coupon.Seconds(s).String() } // clamped: a row stored before the bounds cannot wrap
	return []policyField{
		{"mode", e.Mode, d.Mode, o.Mode != nil},
		{"low", num(e.Low), num(d.Low), o.Low != nil},
		{"high", num(e.High), num(d.High), o.High != nil},
		{"min-claims", strconv.FormatInt(e.MinClaims, 10), strconv.FormatInt(d.MinClaims, 10), o.MinClaims != nil},
		{"max-share", num(e.MaxShare), num(d.MaxShare), o.MaxShare != nil},
		{"reserve", num(e.Reserve), num(d.Reserve), o.Reserve != nil},
		{"cooldown", secs(e.CooldownSeconds), secs(d.CooldownSeconds), o.CooldownSeconds != nil},
		{"min-age", secs(e.MinAgeSeconds), secs(d.MinAgeSeconds), o.MinAgeSeconds != nil},
	}
}

// policySetSettings are couponlink quota policy set's flags: the fields
// to change, and who changes them and why.
type policySetSettings struct {
	policySettings
	mode                         *string
	low, high, maxShare, reserve *float64
	minClaims                    *int64
	cooldown, minAge             *time.Duration
	by, reason                   *string
}

func policySetFlags(name string, stderr io.Writer) (*settings.Flags, *policySetSettings) {
	f := newFlags(name, "Changes the fields of a template's override named by the flags given (the others keep their value), checks the result over the defaults, and records who, why and what in the audit.", stderr)
	o := &policySetSettings{}
	o.register(f)
	o.mode = f.String("mode", "", "off, signal (recommend only) or auto (move quota)")
	o.low = f.Float64("low", 0, "a channel whose redemption rate is below this gives quota (0 to 1)")
	o.high = f.Float64("high", 0, "a channel whose redemption rate is above this receives quota (0 to 1)")
	o.minClaims = f.Int64("min-claims", 0, "claims a channel needs before its rate counts")
	o.maxShare = f.Float64("max-share", 0, "most of a giver's claimable quota one decision moves (0 to 1)")
	o.reserve = f.Float64("reserve", 0, "share of its quota a giver always keeps claimable (0 to 1)")
	o.cooldown = f.Duration("cooldown", 0, "least time between two decisions of the template (e.g. 1h)")
	o.minAge = f.Duration("min-age", 0, "no decision before the campaign is this old (e.g. 1h)")
	o.by, o.reason = whoAndWhy(f, "who makes the change (required)")
	return f, o
}

// whoAndWhy are -by and -reason, which an audited change requires.
func whoAndWhy(f *settings.Flags, byUse string) (by, reason *string) {
	return f.String("by", "", byUse), f.String("reason", "", "why, e.g. a ticket (required)")
}

func runPolicySet(ctx context.Context, name string, args []string, stdout, stderr io.Writer) error {
	f, o := policySetFlags(name, stderr)
	if err := o.parse(f, args); err != nil {
		return err
	}
	change, err := o.change(f)
	if err != nil {
		return err
	}
	if change.Empty() {
		fmt.Fprintln(stderr, "nothing to change: give at least one of -mode, -low, -high, -min-claims, -max-share, -reserve, -cooldown, -min-age")
		return errUsage
	}
	return withMySQL(*o.db.DSN, 2, func(db *sql.DB) error {
		v, err := quota.SetPolicy(ctx, db, *o.template, change, *o.by, *o.reason, quota.SourceCLI, "")
		if err != nil {
			return err
		}
		return printPolicy(stdout, v)
	})
}

// change is the override of the fields whose flags were given.
func (o *policySetSettings) change(f *settings.Flags) (quota.Override, error) {
	var change quota.Override
	var bad error
	f.Visit(func(fl *flag.Flag) {
		switch fl.Name {
		case "mode":
			change.Mode = o.mode
		case "low":
			change.Low = o.low
		case "high":
			change.High = o.high
		case "min-claims":
			change.MinClaims = o.minClaims
		case "max-share":
			change.MaxShare = o.maxShare
		case "reserve":
			change.Reserve = o.reserve
		case "cooldown":
			change.CooldownSeconds, bad = seconds("cooldown_seconds", *o.cooldown, bad)
		case "min-age":
			change.MinAgeSeconds, bad = seconds("min_age_seconds", *o.minAge, bad)
		}
	})
	return change, bad
}

// seconds is d in whole seconds, or the first error.
func seconds(field string, d time.Duration, bad error) (*int64, error) {
	if bad != nil {
		return nil, bad
	}
	if d%time.Second != 0 {
		return nil, coupon.Invalid(field, "%v is not a whole number of seconds", d)
	}
	s := int64(d / time.Second)
	return &s, nil
}

// policyResetSettings are couponlink quota policy reset's flags.
type policyResetSettings struct {
	policySettings
	by, reason *string
}

func policyResetFlags(name string, stderr io.Writer) (*settings.Flags, *policyResetSettings) {
	f := newFlags(name, "Deletes a template's override, so that it follows the defaults again; recorded in the audit. A template without an override is left as it is.", stderr)
	o := &policyResetSettings{}
	o.register(f)
	o.by, o.reason = whoAndWhy(f, "who resets the policy (required)")
	return f, o
}

func runPolicyReset(ctx context.Context, name string, args []string, stdout, stderr io.Writer) error {
	f, o := policyResetFlags(name, stderr)
	return o.withDB(f, args, func(db *sql.DB) error {
		v, err := quota.ResetPolicy(ctx, db, *o.template, *o.by, *o.reason, quota.SourceCLI, "")
		if err != nil {
			return err
		}
		return printPolicy(stdout, v)
	})
}

// policyAuditSettings are couponlink quota policy audit's flags.
type policyAuditSettings struct {
	db       settings.Database
	template *int64
	limit    *int
}

func policyAuditFlags(name string, stderr io.Writer) (*settings.Flags, *policyAuditSettings) {
	f := newFlags(name, "Lists the changes of a template's policy, newest first: when, version, set or reset, who, from where (cli, api, config), why, and the override before and after.", stderr)
	o := &policyAuditSettings{}
	f.Add(&o.db)
	o.template = f.Int64("template", -1, "id of the template (required; 0 lists the changes of the defaults the cdc publishes)")
	o.limit = f.Int("limit", 20, "most changes to list (at most 1000)")
	return f, o
}

func runPolicyAudit(ctx context.Context, name string, args []string, stdout, stderr io.Writer) error {
	f, o := policyAuditFlags(name, stderr)
	if err := f.Parse(args); err != nil {
		return err
	}
	if *o.template < 0 {
		fmt.Fprintln(stderr, "-template is required: the id of a template, or 0 for the defaults")
		return errUsage
	}
	return withMySQL(*o.db.DSN, 2, func(db *sql.DB) error {
		entries, err := quota.Audit(ctx, db, *o.template, *o.limit)
		if err != nil {
			return err
		}
		return printPolicyAudit(stdout, *o.template, entries)
	})
}

// printPolicyAudit prints the changes of a template's policy, newest first.
func printPolicyAudit(stdout io.Writer, template int64, entries []quota.AuditEntry) error {
	if len(entries) == 0 {
		fmt.Fprintf(stdout, "no changes of the policy of template %d\n", template)
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "at\tversion\taction\tby\tsource\treason\tbefore\tafter")
	for _, e := range entries {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", e.At.UTC().Format(time.RFC3339), e.Version, e.Action,
			e.ChangedBy, e.Source, e.Reason, overrideText(e.Before), overrideText(e.After))
	}
	return tw.Flush()
}

func overrideText(o *quota.Override) string {
	if o == nil {
		return "-"
	}
	b, err := json.Marshal(o)
	if err != nil {
		return fmt.Sprint(*o)
	}
	return string(b)
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
