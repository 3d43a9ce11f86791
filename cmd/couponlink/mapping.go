package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/internal/settings"
	"github.com/couponlink/couponlink/internal/words"
)

const mappingCheckSummary = "check a mapping against the live schema: what each role maps to, column types, NULLs, " +
	"the indexes the checks need, which checks are on and off; exit 1 on errors"

// runMapping is `couponlink mapping check [flags]`.
func runMapping(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && isHelp(args[0]) {
		mappingUsage(stdout)
		return nil
	}
	if len(args) == 0 || args[0] != "check" {
		mappingUsage(stderr)
		return errUsage
	}
	return runMappingCheck(ctx, args[1:], stdout, stderr)
}

func mappingUsage(w io.Writer) {
	printUsage(w, "couponlink mapping check -mapping FILE [flags]", "couponlink mapping check", 6,
		[]command{{name: "check", summary: mappingCheckSummary}})
}

func mappingCheckFlags(stderr io.Writer) (*settings.Flags, *dbMapping) {
	return dbMappingFlags("mapping check", "Connects to the server of the DSN (as the cdc does) and checks the mapping against its live schema: "+
		"the tables, columns and binlog settings the cdc checks at start; the mapped columns' types (ids, codes, budgets, limits and "+
		"counts integer; end times DATETIME or TIMESTAMP); nullable status or template columns (undecodable rows are possible: a warning); "+
		"the indexes the checks' queries need (missing: a warning with the CREATE INDEX to add). Prints what each role maps to and which "+
		"checks are on, and which are off because the shop lacks the data. With a mapping naming several sources, checks each source "+
		"on its own server (its DSN, its tables) and reports each. Exit code 1 on errors, 0 with warnings only.",
		"YAML mapping of the legacy schema to check (empty: couponlink's reference schema)",
		"with a mapping of several sources: check this source only (default: every source)", stderr)
}

func runMappingCheck(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, o := mappingCheckFlags(stderr)
	if err := f.Parse(args); err != nil {
		return err
	}
	path, source := *o.mapping.File, *o.mapping.Source
	m := canal.DefaultMapping()
	if path != "" {
		var err error
		if m, err = canal.ReadMappingFile(path); err != nil {
			fmt.Fprintf(stdout, "errors\n  - %v\n", err)
			fmt.Fprintln(stderr, "couponlink mapping check: the mapping is refused (see errors above)")
			return exitCode(1)
		}
	}
	if m.HasSources() {
		return checkSources(ctx, m, path, source, stdout, stderr)
	}
	if source != "" {
		return errors.New("-source needs a -mapping that names sources")
	}
	r, err := inspectOn(ctx, m, *o.db.DSN)
	if err != nil {
		return err
	}
	name := path
	if name == "" {
		name = "the reference schema"
	}
	printCheckReport(stdout, name, r)
	if !r.OK() {
		fmt.Fprintf(stderr, "couponlink mapping check: %s in %s (see above)\n", words.Count(len(r.Errors), "error"), name)
		return exitCode(1)
	}
	return nil
}

// inspectOn checks m against the server of dsn (canal.Mapping.Inspect).
func inspectOn(ctx context.Context, m *canal.Mapping, dsn string) (*canal.CheckReport, error) {
	db, err := openMySQL(dsn, 2)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	if err := db.PingContext(ctx); err != nil {
		return nil, fmt.Errorf("connect to MySQL: %w", err)
	}
	return m.Inspect(ctx, db)
}

// checkSources checks each source of m (or the named one) on its own
// server, with its own tables, and reports each; exit code 1 when a
// source has errors or cannot be reached.
func checkSources(ctx context.Context, m *canal.Mapping, path, source string, stdout, stderr io.Writer) error {
	names := m.SourceNames()
	if source != "" {
		names = []string{source}
	}
	var bad []string
	for i, name := range names {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		label := fmt.Sprintf("%s, source %s", path, name)
		sm, dsn, err := m.OneSource(name)
		var r *canal.CheckReport
		if err == nil {
			r, err = inspectOn(ctx, sm, dsn)
		}
		if err != nil {
			fmt.Fprintf(stdout, "mapping %s\n\nerrors\n  - cannot check this source: %v\n", label, err)
			bad = append(bad, fmt.Sprintf("source %s not checked", name))
			continue
		}
		printCheckReport(stdout, label, r)
		if !r.OK() {
			bad = append(bad, fmt.Sprintf("%s in source %s", words.Count(len(r.Errors), "error"), name))
		}
	}
	if len(bad) > 0 {
		fmt.Fprintf(stderr, "couponlink mapping check: %s of %s (see above)\n", strings.Join(bad, ", "), path)
		return exitCode(1)
	}
	return nil
}

// printCheckReport prints the roles, the checks, the warnings and the
// errors, and a last line that sums them up.
func printCheckReport(w io.Writer, name string, r *canal.CheckReport) {
	fmt.Fprintf(w, "mapping %s\n", name)
	printTables(w, r.Tables)
	fmt.Fprintf(w, "\nroles\n")
	tw := tabwriter.NewWriter(w, 2, 4, 1, ' ', 0)
	for _, role := range r.Roles {
		what := "missing"
		if role.Type != "" {
			what = role.Type
			if role.Nullable {
				what += ", NULL allowed"
			}
		}
		fmt.Fprintf(tw, "  %s\t→ %s\t(%s)\n", role.Role, role.Where(), what)
	}
	tw.Flush()
	if !r.Reference {
		fmt.Fprintf(w, "\ntime zone of DATETIME columns: %s\n", r.TimeZone)
	}
	fmt.Fprintf(w, "\nchecks (redemption_evidence: %s)\n", r.Evidence)
	for _, c := range r.Checks {
		fmt.Fprintf(w, "  %s\n", c)
	}
	for _, part := range []struct {
		title string
		lines []string
	}{{"warnings", r.Warnings}, {"errors", r.Errors}} {
		if len(part.lines) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s\n", part.title)
		for _, l := range part.lines {
			fmt.Fprintf(w, "  - %s\n", l)
		}
	}
	fmt.Fprintln(w)
	switch {
	case !r.OK():
		fmt.Fprintf(w, "%s, %s: the cdc would refuse this mapping or misread its columns\n", words.Count(len(r.Errors), "error"),
			words.Count(len(r.Warnings), "warning"))
	case len(r.Warnings) > 0:
		fmt.Fprintf(w, "ok, with %s\n", words.Count(len(r.Warnings), "warning"))
	default:
		fmt.Fprintln(w, "ok")
	}
}

// printTables prints the tables of each role on the server: the table, or
// a sharded role's set with its shard count and the first few shards.
func printTables(w io.Writer, roles []canal.RoleTables) {
	if len(roles) == 0 {
		return
	}
	fmt.Fprintf(w, "\ntables\n")
	tw := tabwriter.NewWriter(w, 2, 4, 1, ' ', 0)
	for _, rt := range roles {
		if !rt.Sharded {
			fmt.Fprintf(tw, "  %s\t→ %s\n", rt.Role, strings.Join(rt.Tables, ", "))
			continue
		}
		fmt.Fprintf(tw, "  %s\t→ %s\t(%s: %s)\n", rt.Role, rt.Written, words.Count(len(rt.Tables), "shard"), canal.FewOf(rt.Tables, 4))
	}
	tw.Flush()
}
