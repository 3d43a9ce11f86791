package inventory

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/inventory/view"
)

// A legacy shop sharded over several servers (canal.Mapping.Sources) has
// one cdc per source, each with its checkpoint (named after the source)
// and its counters on that source's own server. The shop's inventory is
// the sum over the sources: ReadSources asks every source at once, each
// within a timeout, and sums what the sources that answered say. Every
// sum names the sources it holds and those it leaves out (down, or their
// cdc has not run yet): a source is never silently missing from a sum.

// SourceState is how a source answered.
type SourceState string

const (
	// SourceUp answered, with a checkpoint: its counters are in the sums.
	SourceUp SourceState = "up"
	// SourceDown did not answer, or not within the timeout, or its status
	// could not be read (Err says why): the sums leave it out.
	SourceDown SourceState = "down"
	// SourceNotStarted answered but has no checkpoint: its cdc has not run
	// yet, so it has no counters and the sums leave its coupons out.
	SourceNotStarted SourceState = "no checkpoint"
)

// Opener opens a pool on a source's DSN; the reader closes it.
type Opener func(dsn string) (*sql.DB, error)

// SourceStatus is one source's answer.
type SourceStatus struct {
	Name   string
	State  SourceState
	Err    error  // why it is down
	Status Status // what its server said (up, or no checkpoint)
}

// Counted reports whether the source's counters are in the sums.
func (s SourceStatus) Counted() bool { return s.State == SourceUp }

// Across is the status of a mapping's sources and the sums over those
// that answered.
type Across struct {
	Sources   []SourceStatus // in the mapping's order
	Pairs     []SourcesPair
	Templates []SourcesTemplate
}

// Left lists the sources the sums leave out: down or not started.
func (a Across) Left() []string {
	var out []string
	for _, s := range a.Sources {
		if !s.Counted() {
			out = append(out, s.Name)
		}
	}
	return out
}

// Complete reports whether every source is in the sums.
func (a Across) Complete() bool { return len(a.Left()) == 0 }

// AllDown reports whether no source answered at all.
func (a Across) AllDown() bool {
	if len(a.Sources) == 0 {
		return false
	}
	for _, s := range a.Sources {
		if s.State != SourceDown {
			return false
		}
	}
	return true
}

// SourcesPair is one (template, channel) summed over the sources: its
// counters added up (a channel bucket's quota is the shop's, read like its
// template table: from the first source that has the row, not added).
type SourcesPair struct {
	PairStatus
	Parts   []PairPart // the counted sources with a counter row of it
	Sources []string   // the parts' sources
	Left    []string   // the sources left out: the sum may miss their coupons
}

// PairPart is one source's share of a SourcesPair.
type PairPart struct {
	Source string
	PairStatus
}

// Complete reports whether every source is in the sum.
func (p SourcesPair) Complete() bool { return len(p.Left) == 0 }

// SourcesTemplate is a legacy template summed over the sources: its row
// in the template table (a copy on every source) from the first source
// that has one, with claimable = budget − taken over every counted
// source, and its channels summed.
type SourcesTemplate struct {
	view.Template
	Parts   []TemplatePart // the counted sources with a row or counters of it
	Sources []string       // the parts' sources
	Left    []string       // the sources left out: the sum may miss their coupons
	// Differ says where the sources' rows disagree on the budget ("budget
	// 100 on east, 120 on west"); the first one is shown.
	Differ string
}

// TemplatePart is one source's view of a SourcesTemplate.
type TemplatePart struct {
	Source string
	view.Template
}

// Complete reports whether every source is in the sum.
func (t SourcesTemplate) Complete() bool { return len(t.Left) == 0 }

// ReadSources reads the status of every source of m at once, each on its
// own server (its DSN opened with open, closed after) with
// ReadMappedStatus and m.ForSource, within timeout; and sums the pairs and
// templates of the sources that answered. A source that does not answer
// is SourceDown, with the reason; the error is for a mapping without
// sources.
func ReadSources(ctx context.Context, m *canal.Mapping, open Opener, timeout time.Duration) (Across, error) {
	if !m.HasSources() {
		return Across{}, errors.New("the mapping names no sources")
	}
	srcs := eachSource(ctx, m, open, timeout, func(ctx context.Context, _ int, name string, sm *canal.Mapping, db *sql.DB) (Status, error) {
		return ReadMappedStatus(ctx, db, name, sm)
	})
	judgeByRows(srcs)
	a := Across{Sources: srcs}
	left := a.Left()
	a.Pairs = sumPairs(srcs, left)
	parts := map[int64][]TemplatePart{}
	for _, s := range srcs {
		if !s.Counted() {
			continue
		}
		for _, t := range s.Status.Templates {
			parts[t.ID] = append(parts[t.ID], TemplatePart{Source: s.Name, Template: t})
		}
	}
	ids := make([]int64, 0, len(parts))
	for id := range parts {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		a.Templates = append(a.Templates, sumTemplate(id, parts[id], left))
	}
	return a, nil
}

// ReadSourcesTemplate reads one legacy template on every source of m at
// once (Queries.ReadTemplate, within timeout) and sums it as ReadSources
// does: Templates holds it, Pairs nothing, the sources' Status their
// checkpoint only. A template no counted source has is coupon.NotFound,
// with the sources all the same.
func ReadSourcesTemplate(ctx context.Context, m *canal.Mapping, open Opener, timeout time.Duration, id int64) (Across, error) {
	if !m.HasSources() {
		return Across{}, errors.New("the mapping names no sources")
	}
	views := make([]*view.Template, len(m.Sources))
	srcs := eachSource(ctx, m, open, timeout, func(ctx context.Context, i int, name string, sm *canal.Mapping, db *sql.DB) (Status, error) {
		st := Status{Now: time.Now().UTC()}
		var err error
		if st.Checkpoint, st.Found, err = LoadCheckpoint(ctx, db, name); err != nil || !st.Found {
			return st, err
		}
		if st.Server, err = canal.CurrentPosition(ctx, db); err != nil {
			return st, err
		}
		t, err := NewQueries(sm).ReadTemplate(ctx, db, id)
		if _, ok := coupon.AsError(err); ok {
			return st, nil // not on this source
		}
		if err == nil {
			views[i] = &t
		}
		return st, err
	})
	a := Across{Sources: srcs}
	var parts []TemplatePart
	for i, s := range srcs {
		if s.Counted() && views[i] != nil {
			parts = append(parts, TemplatePart{Source: s.Name, Template: *views[i]})
		}
	}
	if len(parts) == 0 {
		return a, coupon.NotFound("template", id)
	}
	if i := slices.IndexFunc(parts, func(p TemplatePart) bool { return p.Found }); i >= 0 {
		for k := range parts {
			if !parts[k].Found {
				judgeByRow(&parts[k].Template, parts[i].Template)
			}
		}
	}
	a.Templates = []SourcesTemplate{sumTemplate(id, parts, a.Left())}
	return a, nil
}

// sourceRead reads the status of source i of the mapping on its server
// (Found false: it has no checkpoint).
type sourceRead func(ctx context.Context, i int, name string, sm *canal.Mapping, db *sql.DB) (Status, error)

// eachSource runs read for every source of m at once, each on a pool of
// its DSN (opened with open, closed after) within timeout, and returns
// the sources' answers in the mapping's order.
func eachSource(ctx context.Context, m *canal.Mapping, open Opener, timeout time.Duration, read sourceRead) []SourceStatus {
	out := make([]SourceStatus, len(m.Sources))
	var wg sync.WaitGroup
	for i, spec := range m.Sources {
		wg.Go(func() {
			s := SourceStatus{Name: spec.Name, State: SourceUp}
			st, err := readSource(ctx, m, i, open, timeout, read)
			switch {
			case err != nil:
				s.State, s.Err = SourceDown, err
			case !st.Found:
				s.State, s.Status = SourceNotStarted, st
			default:
				s.Status = st
			}
			out[i] = s
		})
	}
	wg.Wait()
	return out
}

// readSource opens one source's DSN and reads it within timeout.
func readSource(ctx context.Context, m *canal.Mapping, i int, open Opener, timeout time.Duration, read sourceRead) (Status, error) {
	name := m.Sources[i].Name
	sm, dsn, err := m.OneSource(name)
	if err != nil {
		return Status{}, err
	}
	db, err := open(dsn)
	if err != nil {
		return Status{}, err
	}
	defer db.Close()
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := db.PingContext(rctx); err != nil {
		return Status{}, noAnswer(ctx, timeout, fmt.Errorf("connect: %w", err))
	}
	st, err := read(rctx, i, name, sm, db)
	return st, noAnswer(ctx, timeout, err)
}

// noAnswer says a read cut by the timeout (not by the caller) is one.
func noAnswer(ctx context.Context, timeout time.Duration, err error) error {
	if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("no answer within %s: %w", timeout, err)
	}
	return err
}
