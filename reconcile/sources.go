package reconcile

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/couponlink/couponlink/canal"
)

// A legacy shop sharded over several servers (a mapping with sources:) is
// reconciled a source at a time, each at its own known position exactly as
// one server is: a Reconciler per source on its server (checkpoint = the
// source's name, the binlog of its DSN, its own tables), its pass recorded
// in that server's reconcile_task, its counters fixed there. A source
// alone is a part of each template, so the checks of a template's whole —
// over-issue of its budget or quota, the legacy template's own counts,
// the legacy Redis stock keys, coupon ids unique across the sources — are
// made after the sources' passes, on the sum over the sources, by a
// cross-source step recorded on the first source's server. A source that
// is down or whose pass failed makes that step skip: a partial sum is
// never compared.

// AllSources attributes a difference of the sum over every source.
const AllSources = "all sources"

// resultSkipped is the status of a cross-source step that did not run.
const resultSkipped = "skipped"

// SourceDB is one source's server for NewSources.
type SourceDB struct {
	Name   string
	DB     *sql.DB      // the server, in the database of the source's DSN (couponlink's tables)
	Binlog canal.Config // canal.ConfigFromDSN of the source's DSN; empty: wait for the cdc instead
}

// Sources reconciles the sources of a mapping with sources.
type Sources struct {
	names []string
	parts []*Reconciler // in the mapping's order
	sum   *Reconciler   // the cross-source step, on the first source's server
	log   *slog.Logger
}

// NewSources makes a Reconciler per source of cfg.Mapping (which must have
// sources; every one needs its server in dbs) and the cross-source step.
// cfg's DB, Checkpoint and Binlog are ignored; its Registerer gets every
// source's metrics with a label source (the cross-source step's: source
// "all").
func NewSources(cfg Config, dbs []SourceDB) (*Sources, error) {
	m := cfg.Mapping
	if m == nil || !m.HasSources() {
		return nil, errors.New("reconcile: NewSources needs a mapping with sources")
	}
	if cfg.Registerer == nil {
		cfg.Registerer = prometheus.NewRegistry()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	byName := map[string]SourceDB{}
	for _, d := range dbs {
		byName[d.Name] = d
	}
	s := &Sources{names: m.SourceNames()}
	for _, name := range s.names {
		d, ok := byName[name]
		if !ok || d.DB == nil {
			return nil, fmt.Errorf("reconcile: source %q has no server", name)
		}
		c := cfg
		var err error
		if c.Mapping, _, err = m.ForSource(name); err != nil {
			return nil, err
		}
		c.DB, c.Checkpoint, c.Binlog = d.DB, name, d.Binlog
		c.Registerer = prometheus.WrapRegistererWith(prometheus.Labels{"source": name}, cfg.Registerer)
		c.Logger = cfg.Logger.With("source", name)
		r, err := New(c)
		if err != nil {
			return nil, fmt.Errorf("source %s: %w", name, err)
		}
		s.parts = append(s.parts, r)
	}
	c := cfg
	c.DB, c.Checkpoint, c.Binlog = s.parts[0].db, s.names[0], canal.Config{}
	c.Registerer = prometheus.WrapRegistererWith(prometheus.Labels{"source": "all"}, cfg.Registerer)
	sum, err := New(c)
	if err != nil {
		return nil, err
	}
	sum.sum = &sumSources{parts: s.parts}
	s.sum, s.log = sum, sum.log
	return s, nil
}

// SourcesReport is what a pass over the sources found and did.
type SourcesReport struct {
	Parts []*Report // a source's own pass, in the mapping's order
	Sum   *Report   // the cross-source step (Status "skipped" when a source failed)
}

// Status is the worst of the parts' and the sum's: error, needs_review, acknowledged,
// auto_fixed or clean.
func (sr *SourcesReport) Status() string {
	worst := resultClean
	rank := map[string]int{resultClean: 0, resultAutoFixed: 1, resultAcknowledged: 2, resultNeedsReview: 3, resultSkipped: 4, resultError: 4}
	for _, rep := range append(sr.Parts, sr.Sum) {
		if rep != nil && rank[rep.Status] > rank[worst] {
			worst = rep.Status
		}
	}
	if worst == resultSkipped {
		worst = resultError
	}
	return worst
}

// Pass runs every source's pass (at once, each on its server), then the
// cross-source step when all of them succeeded. The error joins the
// sources' errors and the step's; the report has every part all the same
// (a source that could not even start its task has a Report with its
// Failure only).
func (s *Sources) Pass(ctx context.Context) (*SourcesReport, error) {
	out := &SourcesReport{Parts: make([]*Report, len(s.parts))}
	errs := make([]error, len(s.parts))
	var wg sync.WaitGroup
	for i, r := range s.parts {
		wg.Go(func() {
			rep, err := r.Pass(ctx)
			if rep == nil {
				rep = &Report{Source: s.names[i], Status: resultError, Failure: err.Error()}
			}
			out.Parts[i], errs[i] = rep, err
		})
	}
	wg.Wait()
	var failed []string
	for i, err := range errs {
		if err != nil {
			failed = append(failed, s.names[i])
			errs[i] = fmt.Errorf("source %s: %w", s.names[i], err)
		}
	}
	if len(failed) > 0 {
		note := fmt.Sprintf("the checks of the sum over the sources (over-issue, the template table's own counts, legacy stock keys, "+
			"coupon ids across sources) are skipped: the pass of %s failed, and a partial sum is never compared", strings.Join(failed, ", "))
		out.Sum = &Report{Source: AllSources, Status: resultSkipped, Note: note}
		s.log.Warn("reconcile across sources skipped", "failed", strings.Join(failed, ", "))
		return out, errors.Join(errs...)
	}
	rep, err := s.sum.Pass(ctx)
	if rep == nil {
		rep = &Report{Source: AllSources, Status: resultError, Failure: err.Error()}
	}
	if err != nil {
		err = fmt.Errorf("%s: %w", AllSources, err)
	}
	out.Sum = rep
	return out, err
}

// Run runs a pass over the sources every interval (the first at once)
// until ctx ends.
func (s *Sources) Run(ctx context.Context, every time.Duration) error {
	return runEvery(ctx, every, s.log, func(ctx context.Context) error {
		_, err := s.Pass(ctx)
		return err
	})
}

// Source is the Reconciler of one source (nil when the mapping has no
// source of that name).
func (s *Sources) Source(name string) *Reconciler {
	for i, n := range s.names {
		if n == name {
			return s.parts[i]
		}
	}
	return nil
}
