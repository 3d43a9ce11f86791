package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/reconcile"
)

// runSources is couponlink reconcile on a mapping with sources: each
// source reconciled on its own server (its DSN from the mapping), then the
// checks of the sum over the sources. -dsn and -name are not used.
func (o *reconcileSettings) runSources(ctx context.Context, m *canal.Mapping, stdout, stderr io.Writer, failed func(error) error,
	base *slog.Logger) error {
	dbs, closeAll, err := openSources(m)
	if err != nil {
		return failed(err)
	}
	defer closeAll()
	switch {
	case *o.list:
		return listSources(ctx, dbs, stdout, stderr)
	case *o.resolve > 0:
		i := slices.IndexFunc(dbs, func(d reconcile.SourceDB) bool { return d.Name == *o.mapping.Source })
		if i < 0 {
			return fmt.Errorf("-resolve with a mapping with sources needs -source, one of %s: task ids are per source (each on its server)",
				strings.Join(m.SourceNames(), ", "))
		}
		return o.resolveTask(ctx, dbs[i].DB, stdout)
	case *o.ack != "":
		i := slices.IndexFunc(dbs, func(d reconcile.SourceDB) bool { return d.Name == *o.mapping.Source })
		if i < 0 {
			return fmt.Errorf("-ack with a mapping with sources needs -source, one of %s: each source's server has its own findings",
				strings.Join(m.SourceNames(), ", "))
		}
		return o.ackFinding(ctx, dbs[i].DB, stdout, stderr)
	}
	reg := prometheus.NewRegistry()
	cfg, closeRedis, err := o.config(reg, base)
	if err != nil {
		return failed(err)
	}
	defer closeRedis()
	cfg.Mapping = m
	s, err := reconcile.NewSources(cfg, dbs)
	if err != nil {
		return failed(err)
	}
	if *o.once {
		return sourcesOnce(ctx, s, stdout, stderr)
	}
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	first, _, err := m.ForSource(dbs[0].Name)
	if err != nil {
		return err
	}
	// /status and /healthz: the first source's cdc and server
	return o.serve(ctx, reg, dbs[0].DB, dbs[0].Name, first, base.With("component", "reconcile"),
		func(ctx context.Context) error { return s.Run(ctx, *o.every) })
}

// openSources opens every source's server (the database of its DSN) and
// its binlog settings; closeAll closes them.
func openSources(m *canal.Mapping) ([]reconcile.SourceDB, func(), error) {
	conns, err := openSourceConns(m, "", reconcileConns)
	if err != nil {
		return nil, nil, err
	}
	dbs := make([]reconcile.SourceDB, len(conns))
	closeAll := func() {
		for _, d := range dbs {
			_ = d.DB.Close()
		}
	}
	for i, c := range conns {
		dbs[i] = reconcile.SourceDB{Name: c.name, DB: c.db}
	}
	for i, c := range conns {
		if dbs[i].Binlog, err = tailerConfig(c.dsn, "", 0); err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("source %s: %w", c.name, err)
		}
	}
	return dbs, closeAll, nil
}

// sourcesOnce runs one pass over the sources and prints a report per
// source and the cross-source part. Exit code: 2 when a source's pass or
// the cross-source step failed (an unreachable source: the others are
// reconciled and printed all the same), else 1 when anything needs
// review, else 0.
func sourcesOnce(ctx context.Context, s *reconcile.Sources, stdout, stderr io.Writer) error {
	sr, err := s.Pass(ctx)
	for _, rep := range append(slices.Clone(sr.Parts), sr.Sum) {
		fmt.Fprintf(stdout, "== %s ==\n", sourceHeading(rep.Source))
		if rep.TaskID == 0 {
			fmt.Fprintf(stdout, "  %s\n", rep.Status)
			if rep.Note != "" {
				fmt.Fprintf(stdout, "  note       %s\n", rep.Note)
			}
			if rep.Failure != "" {
				fmt.Fprintf(stdout, "  error      %s\n", rep.Failure)
			}
		} else {
			printReport(stdout, rep)
		}
		fmt.Fprintln(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "couponlink reconcile: %v\n", err)
		return exitCode(2)
	}
	if sr.Status() == "needs_review" {
		return exitCode(1)
	}
	return nil
}

func sourceHeading(source string) string {
	if source == reconcile.AllSources {
		return "across sources (the sum; recorded on the first source's server)"
	}
	return "source " + source
}

// listSources lists the open items of every source's server; a source
// that cannot be read is said and makes the command fail, after the
// others are listed.
func listSources(ctx context.Context, dbs []reconcile.SourceDB, stdout, stderr io.Writer) error {
	var errs []error
	for _, d := range dbs {
		fmt.Fprintf(stdout, "== source %s ==\n", d.Name)
		if err := printOpen(ctx, d.DB, stdout, d.Name); err != nil {
			fmt.Fprintf(stderr, "couponlink reconcile: source %s: %v\n", d.Name, err)
			errs = append(errs, fmt.Errorf("source %s: %w", d.Name, err))
		}
	}
	return errors.Join(errs...)
}
