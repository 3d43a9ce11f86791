package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/inventory"
	"github.com/couponlink/couponlink/inventory/view"
)

// With a mapping of several sources, `couponlink status` asks every
// source's server at once and prints each source's state (up, down and
// why, no checkpoint), checkpoint and lag, then the pairs and templates
// summed over the sources that answered, each saying which it holds; a
// source left out is said above the sums, and in every summed row.

// openSource opens a small pool on a source's DSN.
func openSource(dsn string) (*sql.DB, error) { return openMySQL(dsn, 2) }

// printSourcesStatus prints the status over m's sources (with template:
// that template's), as text or JSON; it fails when every source is down,
// after printing them.
func printSourcesStatus(ctx context.Context, m *canal.Mapping, template int64, asJSON bool, timeout time.Duration, stdout io.Writer) error {
	var a inventory.Across
	var err error
	if template > 0 {
		a, err = inventory.ReadSourcesTemplate(ctx, m, openSource, timeout, template)
	} else {
		a, err = inventory.ReadSources(ctx, m, openSource, timeout)
	}
	if a.AllDown() {
		if asJSON {
			err = printJSON(stdout, sourcesJSONOf(a))
		} else {
			err = printSources(stdout, a)
		}
		return errors.Join(err, errAllDown(a))
	}
	if err != nil {
		if !a.Complete() && !asJSON {
			_ = printSources(stdout, a) // a template not found may be on a source left out
		}
		return err
	}
	switch {
	case asJSON && template > 0:
		return printJSON(stdout, sourcesTemplateJSON{a.Templates[0], a.Sources})
	case asJSON:
		return printJSON(stdout, sourcesJSONOf(a))
	case template > 0:
		return printSourcesTemplate(stdout, a)
	}
	if err := printSources(stdout, a); err != nil {
		return err
	}
	ps := make([]inventory.PairStatus, len(a.Pairs))
	in := make([]string, len(a.Pairs))
	for i, p := range a.Pairs {
		ps[i], in[i] = p.PairStatus, sourcesText(p.Sources, p.Left)
	}
	if err := printPairs(stdout, ps, in); err != nil {
		return err
	}
	ts := make([]view.Template, len(a.Templates))
	in = make([]string, len(a.Templates))
	for i, t := range a.Templates {
		ts[i], in[i] = t.Template, sourcesText(t.Sources, t.Left)
	}
	if err := printLegacyTemplates(stdout, ts, in); err != nil {
		return err
	}
	printDiffers(stdout, a.Templates)
	return nil
}

// errAllDown is the error of a status no source answered.
func errAllDown(a inventory.Across) error {
	return fmt.Errorf("every source is down (%s): nothing to sum", strings.Join(a.Left(), ", "))
}

// printSources prints the sources' table, and above the sums which
// sources they leave out, and why.
func printSources(stdout io.Writer, a inventory.Across) error {
	fmt.Fprintln(stdout, "sources (couponlink status -source NAME shows one in full)")
	w := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(w, "  source\tstate\tcheckpoint\tlag\tevents applied\tanomalies")
	for _, s := range a.Sources {
		switch s.State {
		case inventory.SourceDown:
			fmt.Fprintf(w, "  %s\tdown: %v\n", s.Name, s.Err)
		case inventory.SourceNotStarted:
			fmt.Fprintf(w, "  %s\tno checkpoint: its cdc has not run (couponlink cdc -source %s)\n", s.Name, s.Name)
		default:
			st := s.Status
			var anomalies int64
			for _, n := range st.Anomalies {
				anomalies += n
			}
			fmt.Fprintf(w, "  %s\tup\t%s\t%s\t%s\t%s\n", s.Name, st.Checkpoint.Pos, st.Lag().Round(time.Millisecond),
				appliedText(st.Checkpoint), anomaliesText(anomalies, st.Anomalies != nil))
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(stdout)
	for _, s := range a.Sources {
		switch s.State {
		case inventory.SourceDown:
			fmt.Fprintf(stdout, "source %s is down: the sums below leave out its coupons\n", s.Name)
		case inventory.SourceNotStarted:
			fmt.Fprintf(stdout, "source %s has no checkpoint yet: the sums below leave out its coupons\n", s.Name)
		}
	}
	if a.Complete() {
		fmt.Fprintf(stdout, "summed over every source: %s\n", strings.Join(sourceNames(a.Sources), ", "))
	}
	fmt.Fprintln(stdout)
	return nil
}

// appliedText is a checkpoint's events and batches.
func appliedText(cp inventory.Checkpoint) string {
	return fmt.Sprintf("%d in %d batches", cp.EventsApplied, cp.Batches)
}

// anomaliesText is a source's anomaly count, "-" when it was not read
// (status -template reads the checkpoints only).
func anomaliesText(n int64, read bool) string {
	if !read {
		return "-"
	}
	return fmt.Sprint(n)
}

// sourcesText says which sources a sum holds, and which it leaves out:
// "east+west", "east (west left out)".
func sourcesText(in, left []string) string {
	s := strings.Join(in, "+")
	if len(left) > 0 {
		s += " (" + strings.Join(left, ", ") + " left out)"
	}
	return s
}

func sourceNames(srcs []inventory.SourceStatus) []string {
	out := make([]string, len(srcs))
	for i, s := range srcs {
		out[i] = s.Name
	}
	return out
}

// printDiffers says which templates' rows disagree between sources.
func printDiffers(stdout io.Writer, ts []inventory.SourcesTemplate) {
	for _, t := range ts {
		if t.Differ != "" {
			fmt.Fprintf(stdout, "template %d: the sources' template rows differ (%s); the first is shown\n", t.ID, t.Differ)
		}
	}
}

// printSourcesTemplate prints one legacy template summed over the
// sources, then each source's part.
func printSourcesTemplate(stdout io.Writer, a inventory.Across) error {
	if err := printSources(stdout, a); err != nil {
		return err
	}
	t := a.Templates[0]
	if err := printTemplateView(stdout, t.Template); err != nil {
		return err
	}
	printDiffers(stdout, a.Templates)
	fmt.Fprintf(stdout, "\nper source: %s\n", sourcesText(t.Sources, t.Left))
	w := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(w, "  source\tbudget\theld\tused\texpired\treturned\treleased\tfrozen\tchannels")
	for _, p := range t.Parts {
		var chs []string
		for _, c := range p.Channels {
			chs = append(chs, fmt.Sprintf("%s: %d held, %d used", c.Name, c.Held, c.Used))
		}
		fmt.Fprintf(w, "  %s\t%s\t%d\t%d\t%s\t%d\t%d\t%d\t%s\n", p.Source, budgetText(p.Template), p.Held, p.Used,
			expiredText(p.Expired, p.PastEnd), p.Returned, p.Released, p.Frozen(), orDash(strings.Join(chs, "; ")))
	}
	for _, name := range t.Left {
		fmt.Fprintf(w, "  %s\tleft out\n", name)
	}
	return w.Flush()
}
