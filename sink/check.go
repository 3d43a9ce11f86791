package sink

import (
	"context"
	"database/sql"

	"github.com/couponlink/couponlink/inventory"
)

// A check is one anomaly check of the batches (or, for templateRules, the
// state the others judge by). It owns what it keeps beyond a batch; what
// it finds in one batch goes into the batch's state (*batch). The sink
// runs the checks' parts in the order of their list (newPipeline), each
// part of every check before the next part of any:
//
//   - on: the check runs under this mapping; a check that is off is
//     neither seeded, nor loaded, nor judged, nor written.
//   - seed: a bootstrap's part, in its transaction: rewrite the check's
//     durable state from the snapshot (sd.stx) and return the anomalies
//     found there that the state did not hold yet.
//   - resume: at every start, on or not, after the counters are in place:
//     read back the state saved with the checkpoint (a check that is off
//     forgets its state). bootstrapped says the start bootstrapped.
//   - load: read what the batch needs before it is judged.
//   - judge: find the batch's anomalies in memory, before its transaction.
//   - write: in the batch's transaction, before its anomalies are recorded:
//     count the batch into the check's tables and return the anomalies that
//     needed them.
//   - save: in the batch's transaction, after its anomalies are recorded:
//     write what the batch changed of the state the check keeps in memory.
//   - waiting: the checks waiting for a deadline (couponlink_cdc_pending_checks),
//     and whether one may be due: a heartbeat then runs the pipeline.
type check interface {
	on() bool
	seed(ctx context.Context, sd *seeding) ([]Anomaly, error)
	resume(ctx context.Context, bootstrapped bool) error
	load(ctx context.Context, b *batch) error
	judge(ctx context.Context, b *batch) ([]Anomaly, error)
	write(ctx context.Context, b *batch) ([]Anomaly, error)
	save(ctx context.Context, b *batch) error
	waiting() (n int, due bool)
}

// seeding is a bootstrap's snapshot as the checks' seed reads it: stx is
// the snapshot's transaction, tx the bootstrap's; infos the template rows
// of the snapshot (a mapping that follows templates).
type seeding struct {
	stx, tx *sql.Tx
	snap    inventory.Snapshot
	infos   map[int64]inventory.TemplateInfo
}

// noCheck is a check that does nothing: a check embeds it and implements
// the parts it has.
type noCheck struct{}

func (noCheck) on() bool                                          { return true }
func (noCheck) seed(context.Context, *seeding) ([]Anomaly, error) { return nil, nil }
func (noCheck) resume(context.Context, bool) error                { return nil }
func (noCheck) load(context.Context, *batch) error                { return nil }
func (noCheck) judge(context.Context, *batch) ([]Anomaly, error)  { return nil, nil }
func (noCheck) write(context.Context, *batch) ([]Anomaly, error)  { return nil, nil }
func (noCheck) save(context.Context, *batch) error                { return nil }
func (noCheck) waiting() (int, bool)                              { return 0, false }

// checks runs each part of its checks in their order.
type checks []check

// seed seeds the checks that are on; it returns their anomalies in order.
func (cs checks) seed(ctx context.Context, sd *seeding) ([]Anomaly, error) {
	var out []Anomaly
	for _, c := range cs {
		if !c.on() {
			continue
		}
		found, err := c.seed(ctx, sd)
		if err != nil {
			return nil, err
		}
		out = append(out, found...)
	}
	return out, nil
}

// resume resumes every check, on or not.
func (cs checks) resume(ctx context.Context, bootstrapped bool) error {
	for _, c := range cs {
		if err := c.resume(ctx, bootstrapped); err != nil {
			return err
		}
	}
	return nil
}

// load is the load stage: each check that is on loads what b needs.
func (cs checks) load(ctx context.Context, b *batch) error { return cs.each(ctx, b, check.load) }

// judge is the judge stage: the anomalies of the checks that are on join
// b's, in order.
func (cs checks) judge(ctx context.Context, b *batch) error {
	return cs.find(ctx, b, check.judge)
}

// write is the write stage, in b's transaction.
func (cs checks) write(ctx context.Context, b *batch) error {
	return cs.find(ctx, b, check.write)
}

func (cs checks) find(ctx context.Context, b *batch, part func(check, context.Context, *batch) ([]Anomaly, error)) error {
	for _, c := range cs {
		if !c.on() {
			continue
		}
		found, err := part(c, ctx, b)
		if err != nil {
			return err
		}
		b.anomalies = append(b.anomalies, found...)
	}
	return nil
}

// save is the save stage, in b's transaction.
func (cs checks) save(ctx context.Context, b *batch) error { return cs.each(ctx, b, check.save) }

// each runs part of each check that is on.
func (cs checks) each(ctx context.Context, b *batch, part func(check, context.Context, *batch) error) error {
	for _, c := range cs {
		if c.on() {
			if err := part(c, ctx, b); err != nil {
				return err
			}
		}
	}
	return nil
}

// waiting sums the checks' waiting ones, and says whether one may be due.
func (cs checks) waiting() (n int, due bool) {
	for _, c := range cs {
		w, d := c.waiting()
		n, due = n+w, due || d
	}
	return n, due
}

// pendingChecks sets couponlink_cdc_pending_checks.
func (s *Sink) pendingChecks() {
	n, _ := s.pipe.checks.waiting()
	s.m.pendingChecks.Set(float64(n))
}
