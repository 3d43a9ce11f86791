package sink

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/inventory"
)

// The pipeline: what the sink does with a batch of decoded binlog rows
// (ApplyBatch), step by step, as newPipeline lists it.
//
// Before the transaction (it writes nothing):
//
//  1. newBatch: the batch's state — the counter deltas, the counters they
//     leave, the channel_quota and template changes — which every later
//     step reads and adds to (*batch).
//  2. load: each check reads what the batch needs (the template rules the
//     cache lacks, from the template table).
//  3. judge: each check finds the batch's anomalies in memory (a move into
//     USED starts its wait for a redemption row here, and the waits whose
//     grace ended are decided).
//
// In one MySQL transaction — exactly-once: the counters, the checks' state
// and the checkpoint commit together or not at all:
//
//  4. counters: inventory_counter plus the deltas, stamped with the batch's
//     end — a statement kept for the tail of the transaction (step 11).
//  5. template counts: coupon_template's cached counts (reference schema),
//     from the counters — kept for the tail too, after them.
//  6. write: each check counts the batch into its tables (redemption keys,
//     order keys, coupons per user) and adds the anomalies that needed them.
//  7. anomalies: every anomaly into cdc_anomaly.
//  8. save: each check writes what the batch changed of the state it keeps
//     in memory (pending redemption checks, template rules).
//  9. releases: the slots of voids and recycles go back; expiries under
//     the release policy are scheduled.
//  10. events: the webhook events (sold out, low, released, anomalies).
//  11. checkpoint: the tail (steps 4 and 5) and the batch's end, fenced by
//      the leader's epoch: one round trip on a pool that takes several
//      statements in one query (groupcommit.go).
//
// A deadlock or a lock wait timeout (the outbox, the findings and the
// counters are written by others too) runs the transaction again from
// step 4, a few times (sqltx.RetryDeadlocks, couponlink_tx_retries_total)
// before the batch fails. Each run starts from the state the batch had
// after step 3: what a failed run added to the batch (anomalies, releases)
// is dropped, and a check whose write changes the state it keeps in memory
// puts it back (rewinder). The other in-transaction steps change only the
// batch, or read what never changes (the releases' expiry policies).
//
// After the commit (Redis is written only then; its trouble is logged and
// never stops the counters):
//
//  12. mirror: the counters, quotas and template rules the batch left; the
//      stall watch's checkpoint.
//  13. metrics: the batch's rows, lag and anomalies (each logged).
//  14. Redis: the stock keys of the templates whose buckets the batch
//      changed (one pipelined write; none for coupon rows alone), then of
//      the buckets it released.
//
// A heartbeat (an empty batch: idle) runs steps 1 to 3 when the position
// moved or a check waits for a deadline (the judge decides the waits whose
// grace ended), and steps 4 to 11 when the position moved or that changed
// something (on an empty batch the steps of the counters and the releases
// write nothing, and the order keys due are decided in step 6); then it
// moves the position and logs the anomalies, and rebuilds the Redis keys
// only when Redis lost them.
//
// Adding a check: a type that embeds noCheck and implements the parts it
// has (check.go), in a file of its own, and one line in the list below (a
// new kind of anomaly also joins inventory.AnomalyKinds, for the metrics).

// stage is one step of the pipeline.
type stage func(ctx context.Context, b *batch) error

// stages runs its stages in order and stops at the first error.
type stages []stage

func (ss stages) exec(ctx context.Context, b *batch) error {
	for _, st := range ss {
		if err := st(ctx, b); err != nil {
			return err
		}
	}
	return nil
}

// pipeline is the sink's steps (newPipeline).
type pipeline struct {
	checks checks
	judge  stages                                // before the transaction
	commit stages                                // in it
	after  []func(ctx context.Context, b *batch) // after the commit of a batch that is not a heartbeat
}

// newPipeline lists the checks and the steps, in the order they run.
func (s *Sink) newPipeline() pipeline {
	cs := checks{
		undecodableRows{},          // undecodable_row (anomaly.go)
		illegalTransitions{},       // illegal_transition, deleted_coupon (anomaly.go)
		newRedemptionWait(s),       // used_without_redemption, evidence table (redemption.go)
		couponOrders{s: s},         // used_without_redemption, double_spend, evidence coupon_order (evidence.go)
		endTimes{s: s},             // used_after_expiry (expiry.go)
		overIssue{s: s},            // over_issue (budget.go)
		duplicateRedemptions{s: s}, // duplicate_redemption (duplicates.go)
		&crossWriteOffs{s: s},      // with sources: the write-offs another source also holds, mailed to the judge (sourcesmail.go)
		&sourcesJudge{s: s},        // with sources, on the judge: over_issue and duplicate_redemption of the sum (sourcesjudge.go)
		&templateFeed{s: s},        // the template table on another source: its rules, through its cdc (templatesource.go)
		&orderKeys{s: s},           // used_without_redemption, double_spend, evidence order_table (orders.go)
		&templateRules{s: s},       // the template rules in force, which the checks judge by (templates.go)
		newUserLimits(s),           // per_user_limit_exceeded (userlimit.go)
		offShelf{s: s},             // claimed_off_shelf (shelf.go)
	}
	rel := &releaser{s: s, policy: map[int64]bool{}}
	events := s.enqueueBatch
	if hook := s.cfg.inBatchTx; hook != nil {
		events = func(ctx context.Context, b *batch) error {
			if err := hook(ctx, b.tx); err != nil {
				return err
			}
			return s.enqueueBatch(ctx, b)
		}
	}
	return pipeline{
		checks: cs,
		judge: stages{
			cs.load,  // 2. load
			cs.judge, // 3. judge
		},
		commit: stages{
			s.writeBatchCounters,    // 4. counters
			s.refreshBatchTemplates, // 5. template counts
			cs.write,                // 6. write
			s.recordAnomalies,       // 7. anomalies
			cs.save,                 // 8. save
			rel.apply,               // 9. releases
			events,                  // 10. events
			s.saveBatchCheckpoint,   // 11. checkpoint
		},
		after: []func(context.Context, *batch){
			s.commitMirror,          // 12. mirror
			s.judgeOverIssueByTruth, // 12b. over-issue from the truth (overissue.go)
			s.observe,               // 13. metrics
			s.syncBatch,             // 14. Redis
		},
	}
}

// ApplyBatch applies one batch (see the pipeline above). An error leaves
// MySQL as it was before the batch; the caller must stop and restart from
// the checkpoint.
func (s *Sink) ApplyBatch(ctx context.Context, cb *canal.Batch) error {
	s.work.Lock()
	defer s.work.Unlock()
	start := time.Now()
	if cb.Empty() {
		return s.idle(ctx, cb)
	}
	if s.cfg.Strict && len(cb.Undecodable) > 0 {
		return fmt.Errorf("%w: %s (strict)", ErrUndecodableRow, cb.Undecodable[0])
	}
	b := s.newBatch(cb)
	if err := s.pipe.judge.exec(ctx, b); err != nil {
		return err
	}
	if err := s.commit(ctx, b); err != nil {
		return fmt.Errorf("apply batch ending at %s: %w", b.End, err)
	}
	for _, after := range s.pipe.after {
		after(ctx, b)
	}
	s.m.batchDuration.Observe(time.Since(start).Seconds())
	return nil
}

// idle handles a heartbeat: save a moved position, decide the checks
// whose deadline passed, and keep Redis whole.
func (s *Sink) idle(ctx context.Context, cb *canal.Batch) error {
	moved := cb.End != s.pos
	if _, due := s.pipe.checks.waiting(); moved || due {
		b := s.newBatch(cb)
		if err := s.pipe.judge.exec(ctx, b); err != nil {
			return err
		}
		if moved || b.changed() {
			if err := s.commit(ctx, b); err != nil {
				return fmt.Errorf("save idle checkpoint %s: %w", b.End, err)
			}
			s.pos = b.End
			s.progressed(b.End, b.EventTime)
			s.countAnomalies(b.anomalies)
		}
		s.pendingChecks()
	}
	s.m.lag.Set(0)                    // caught up: the heartbeat came because nothing was left to read
	s.judgeOverIssueByTruth(ctx, nil) // the template rules a start loaded after the counters (overissue.go)
	if s.redis != nil {
		s.syncRedis(ctx, nil)
	}
	return nil
}

// commit runs the commit stages in one transaction, again from the start
// after a deadlock.
func (s *Sink) commit(ctx context.Context, b *batch) error {
	rewind := s.pipe.rewind(b)
	return s.retries.Run(ctx, s.db, "batch", func(tx *sql.Tx) error {
		rewind()
		b.tx, b.tail = tx, b.tail[:0]
		defer func() { b.tx = nil }()
		return s.pipe.commit.exec(ctx, b)
	})
}

// A rewinder is a check whose write changes the state it keeps in memory:
// mark returns what puts that state back as it is now.
type rewinder interface{ mark() (back func()) }

// rewind returns what puts b and the checks back as they are now, before
// b's transaction: each run of the transaction starts there.
func (p *pipeline) rewind(b *batch) func() {
	found := len(b.anomalies)
	var back []func()
	for _, c := range p.checks {
		if r, ok := c.(rewinder); ok {
			back = append(back, r.mark())
		}
	}
	return func() {
		b.anomalies, b.released = slices.Clip(b.anomalies[:found]), nil
		for _, f := range back {
			f()
		}
	}
}

// batch is a batch on its way through the pipeline: what its steps read,
// and what they found.
type batch struct {
	*canal.Batch
	idle      bool                                 // a heartbeat: no rows
	deltas    inventory.Deltas                     // the counters' changes
	next      map[inventory.Pair]*inventory.Counts // the counters the batch leaves (the pairs it touched)
	pairs     []inventory.Pair                     // every touched pair, sorted, even with a net zero delta: its stamp must move
	touched   []int64                              // their templates, sorted
	quotas    map[inventory.Pair]inventory.Quota   // its channel_quota changes
	templates map[int64]tplChange                  // its template changes (a mapping that follows templates)
	rulesRead map[int64]bool                       // template rules read from the template table, saved with this batch

	tx           *sql.Tx                       // the batch's transaction, during the commit stages
	tail         []statement                   // the statements sent with the checkpoint (groupcommit.go)
	anomalies    []Anomaly                     // found so far, in the order of the checks
	pendingDirty map[redemptionKey]bool        // pending redemption checks the batch changed (saved with it)
	decide       bool                          // a heartbeat must commit: a check decides in the transaction
	released     []release                     // the releases the batch applied
	openOrders   map[string]bool               // evidence coupon_order: the kept orders that are open (evidence.go)
	proved       map[redemptionKey]evidenceKey // evidence states: the keys whose proved uses the batch changed (evidencestates.go)
}

// newBatch is b's state before the pipeline's first step.
func (s *Sink) newBatch(cb *canal.Batch) *batch {
	b := &batch{Batch: cb, idle: cb.Empty(), deltas: inventory.FromBatch(cb), quotas: quotaChanges(cb),
		pendingDirty: map[redemptionKey]bool{}}
	b.next = make(map[inventory.Pair]*inventory.Counts, len(b.deltas))
	b.pairs = make([]inventory.Pair, 0, len(b.deltas))
	for p, delta := range b.deltas {
		c := inventory.Counts{}
		if old := s.counts[p]; old != nil {
			c = *old
		}
		c.Add(*delta)
		b.next[p] = &c
		b.pairs = append(b.pairs, p)
	}
	sortPairs(b.pairs)
	b.touched = templatesOf(b.pairs)
	if s.followsTemplates() {
		b.templates = templateChanges(cb)
	}
	return b
}

// changed says whether a heartbeat's judge changed what the transaction
// saves: anomalies, pending checks, or a check deciding in it.
func (b *batch) changed() bool {
	return len(b.anomalies) > 0 || len(b.pendingDirty) > 0 || b.decide
}
