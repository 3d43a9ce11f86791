package reconcile

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/couponlink/couponlink/api"
	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/internal/sqltx"
	"github.com/couponlink/couponlink/internal/words"
	"github.com/couponlink/couponlink/inventory"
)

// Reconciler runs reconciliation passes.
type Reconciler struct {
	cfg Config
	db  *sql.DB
	log *slog.Logger
	m   *metrics
	// retries runs the transactions that write the counters, the cached
	// counts and the outbox, again after a deadlock with the cdc
	retries *sqltx.Retries

	mu       sync.Mutex
	src      *inventory.Queries // the queries of resolved
	resolved *canal.Mapping     // cfg.Mapping resolved on the server by the latest pass
	// sum makes this the cross-source step of Sources: its pass checks the
	// sum over the sources' passes (sources.go)
	sum *sumSources
	// drift is what the drift gauge holds: the last pass's (observeDrift)
	drift map[driftKey]float64
}

// New checks cfg and fills in its defaults.
func New(cfg Config) (*Reconciler, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	if err := inventory.RegisterSnapshotMetrics(cfg.Registerer); err != nil {
		return nil, err
	}
	if err := inventory.RegisterFindingsMetrics(cfg.Registerer, cfg.DB, api.FindingFromReconcile, nil); err != nil {
		return nil, err
	}
	log := cfg.Logger.With("component", "reconcile")
	return &Reconciler{cfg: cfg, db: cfg.DB, src: inventory.NewQueries(cfg.Mapping), resolved: cfg.Mapping,
		log: log, m: newMetrics(cfg.Registerer), retries: sqltx.NewRetries(cfg.Registerer, log, "counter", "template", "task")}, nil
}

// Report is what one pass found and did.
type Report struct {
	// Source is the source this report is of, with sources: its name, or
	// AllSources for the cross-source step; "" for one server.
	Source           string
	SumOf            []string // the cross-source step: each source and the snapshot its part was read at
	TaskID           int64
	Started          time.Time
	Finished         time.Time
	Position         canal.Position // the snapshot's binlog position
	Checkpoint       canal.Position // the cdc's checkpoint the counters were read at
	CountersCompared bool
	Note             string // why something could not be compared
	Coupons          int64  // user coupons counted
	Pairs            int
	InFlight         int           // counter rows that moved past the snapshot: compared next time
	SnapshotTook     time.Duration // counting the truth
	SnapshotReaders  int           // transactions of the snapshot that counted it (inventory.SetSnapshotReaders)
	CatchUpTook      time.Duration // waiting for the cdc to reach the snapshot
	ReplayTook       time.Duration // replaying the binlog from the snapshot to the checkpoint
	Differences      []Difference
	Status           string // clean, auto_fixed, needs_review, error
	Failure          string // why the pass stopped (status error)
}

// Count returns how many differences got the action.
func (rep *Report) Count(action string) int {
	n := 0
	for _, d := range rep.Differences {
		if d.Action == action {
			n++
		}
	}
	return n
}

// Summary is one line for logs and the task record.
func (rep *Report) Summary() string {
	var b strings.Builder
	counts := fmt.Sprintf("%s (%d fixed, %d need review, %d in flight)", words.Count(len(rep.Differences), "difference"), rep.Count(ActionFixed),
		rep.Count(ActionNeedsReview), rep.Count(ActionInFlight))
	if n := rep.Count(ActionAcknowledged); n > 0 {
		counts = strings.TrimSuffix(counts, ")") + fmt.Sprintf(", %d acknowledged)", n)
	}
	if rep.Source != "" {
		b.WriteString(rep.Source + ": ")
	}
	at := rep.Position.String()
	if len(rep.SumOf) > 0 {
		at = "the sum of " + strings.Join(rep.SumOf, ", ")
	}
	if rep.Status == resultError {
		fmt.Fprintf(&b, "error after %s: %s", counts, rep.Failure)
	} else {
		fmt.Fprintf(&b, "%s: %d coupons in %d buckets at %s; %s", rep.Status, rep.Coupons, rep.Pairs, at, counts)
	}
	if rep.Note != "" {
		b.WriteString("; " + rep.Note)
	}
	return b.String()
}

// Pass runs one reconciliation: truth at a known position, compare, fix
// what is safe, record the task.
func (r *Reconciler) Pass(ctx context.Context) (*Report, error) {
	unlock, err := r.lock(ctx)
	if err != nil {
		r.m.runs.WithLabelValues(resultError).Inc()
		return nil, err
	}
	defer unlock()
	start := r.cfg.Now()
	// the task row is written whatever ctx does meanwhile: a row the server
	// inserted while the driver answered "cancelled" would stay "running"
	// for good, its id unknown to the finishing step below
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	id, err := r.startTask(sctx, start)
	scancel()
	if err != nil {
		r.m.runs.WithLabelValues(resultError).Inc()
		return nil, err
	}
	rep := &Report{TaskID: id, Started: start}
	var mysqlSnap, redisSnap any
	if r.sum != nil {
		mysqlSnap, redisSnap, err = r.sumPass(ctx, rep)
	} else {
		mysqlSnap, redisSnap, err = r.pass(ctx, rep)
	}
	r.attribute(rep)
	if err == nil {
		err = r.recordFindings(ctx, rep)
	}
	rep.Finished = r.cfg.Now()
	r.m.duration.Observe(rep.Finished.Sub(start).Seconds())
	switch {
	case err != nil:
		// recorded with what the pass found and did before it stopped:
		// its corrections are in correction_log under this task
		rep.Status, rep.Failure = resultError, err.Error()
	case rep.Count(ActionNeedsReview)+rep.Count(ActionReported)+rep.Count(ActionAcknowledged) > 0: // reported: found, and left as it is (auto-fix off)
		rep.Status = resultNeedsReview
		if allAcknowledged(rep) {
			rep.Status = resultAcknowledged
		}
	case rep.Count(ActionFixed) > 0:
		rep.Status = resultAutoFixed
	default:
		rep.Status = resultClean
	}
	// a pass that got this far is recorded even when ctx ends now (the
	// reconciler is stopping): a task must never stay "running"
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if ferr := r.finishTask(fctx, rep, mysqlSnap, redisSnap); ferr != nil && err == nil {
		err = ferr
		rep.Status, rep.Failure = resultError, err.Error()
	}
	if err != nil {
		r.m.runs.WithLabelValues(resultError).Inc()
		return rep, err
	}
	r.m.runs.WithLabelValues(rep.Status).Inc()
	r.observeDrift(rep)
	if rep.CountersCompared || r.sum != nil {
		r.m.lastSuccess.Set(float64(rep.Finished.Unix()))
	}
	r.countOpen(ctx)
	r.log.Info("reconcile pass", "task", id, "status", rep.Status, "summary", rep.Summary(), "took", rep.Finished.Sub(start).Round(time.Millisecond))
	return rep, nil
}

type mysqlSnapshot struct {
	Position   string             `json:"position"`
	Checkpoint string             `json:"checkpoint,omitempty"`
	Truth      map[string][]int64 `json:"truth"` // "template/channel" -> held, used, expired, returned, released
	Quotas     map[string][]int64 `json:"quotas,omitempty"`
}

func (r *Reconciler) pass(ctx context.Context, rep *Report) (any, any, error) {
	if err := r.resolve(ctx); err != nil {
		return nil, nil, err
	}
	t0 := time.Now()
	snap, err := r.queries().Snapshot(ctx, r.db)
	if err != nil {
		return nil, nil, fmt.Errorf("snapshot: %w", err)
	}
	rep.SnapshotTook, rep.SnapshotReaders = time.Since(t0), snap.Taken.Readers
	if snap.Taken.Locked > 0 {
		r.log.Info("truth snapshot's position taken under a lock", "position_by", snap.Taken.Method, "lock_held", snap.Taken.Locked)
	}
	rep.Position, rep.Pairs = snap.Pos, len(snap.Counts)
	for _, c := range snap.Counts {
		rep.Coupons += c.Issued()
	}
	r.m.rowsRead.Add(float64(rep.Coupons))
	ms := mysqlSnapshot{Position: snap.Pos.String(), Truth: map[string][]int64{}, Quotas: map[string][]int64{}}
	for p, c := range snap.Counts {
		ms.Truth[pairKey(p)] = fieldsOf(*c)
	}
	for p, q := range snap.Quotas {
		ms.Quotas[pairKey(p)] = []int64{q.Quota, q.Claimed}
	}

	// one source of several: the checks of a template's whole (its budget,
	// its own counts, its quota buckets, legacy stock keys) are the sum's
	part := r.cfg.Mapping.Source() != ""
	var budgets map[int64]int64
	if !part && (snap.Quotas == nil || r.cfg.RedisMode == inventory.RedisCorrector) {
		if budgets, err = r.queries().TemplateQuotas(ctx, r.db, templateIDs(snap)); err != nil {
			return ms, nil, err
		}
	}
	if snap.Quotas != nil && !part {
		rep.Differences = append(rep.Differences, compareQuotas(snap.Counts, snap.Quotas)...)
		totals := budgets
		if totals == nil {
			if totals, err = r.queries().TemplateQuotas(ctx, r.db, templateIDs(snap)); err != nil {
				return ms, nil, err
			}
		}
		rep.Differences = append(rep.Differences, compareQuotaTotals(snap.Quotas, totals)...)
	}
	if !r.cfg.Mapping.Reference() && !part {
		own, err := r.queries().LegacyCounts(ctx, r.db, templateIDs(snap))
		if err != nil {
			return ms, nil, err
		}
		judged := budgets
		if snap.Quotas != nil {
			judged = nil // over-issue is judged per channel bucket
		}
		rep.Differences = append(rep.Differences, compareLegacy(snap.Counts, judged, own)...)
	}
	if !r.cfg.Mapping.Reference() {
		dups, err := r.queries().DuplicateCouponIDs(ctx, r.db, 10)
		if err != nil {
			return ms, nil, err
		}
		rep.Differences = append(rep.Differences, duplicateIDs(dups)...)
	}

	if err := r.counters(ctx, rep, snap); err != nil {
		return ms, nil, err
	}
	ms.Checkpoint = rep.Checkpoint.String()
	if part && r.cfg.RedisMode == inventory.RedisCorrector {
		return ms, nil, nil
	}
	redisSnap, err := r.redis(ctx, rep, snap, budgets)
	if err != nil {
		return ms, redisSnap, err
	}
	return ms, redisSnap, r.claimedUsers(ctx, rep)
}

// attribute names the source of a pass and of the differences it found
// (with sources; nothing for one server).
func (r *Reconciler) attribute(rep *Report) {
	rep.Source = r.cfg.Mapping.Source()
	if r.sum != nil {
		rep.Source = AllSources
	}
	for i := range rep.Differences {
		if rep.Differences[i].Source == "" {
			rep.Differences[i].Source = rep.Source
		}
	}
}

// counters compares (and fixes) inventory_counter and the template cache,
// once the cdc's checkpoint has reached the snapshot.
func (r *Reconciler) counters(ctx context.Context, rep *Report, snap inventory.Snapshot) error {
	withCache := r.cfg.Mapping.Template.Table == canal.DefaultMapping().Template.Table && snap.Quotas != nil
	var counters map[inventory.Pair]inventory.Counter
	var cache map[int64]inventory.TemplateCache
	var stamp int64
	if r.cfg.Binlog.Addr != "" {
		// Compare at a known position, without waiting for the cdc: read
		// the counters with the checkpoint they reflect, and move the truth
		// from the snapshot to that checkpoint along the binlog.
		c, err := inventory.ReadCounters(ctx, r.db, r.cfg.Checkpoint, withCache)
		if err != nil {
			return err
		}
		counters, cache = c.Rows, c.Templates
		at, age := c.At, c.Age
		rep.Checkpoint = at
		t0 := time.Now()
		truth, err := r.truthAt(ctx, snap.Counts, snap.Pos, at)
		rep.ReplayTook = time.Since(t0)
		if err != nil {
			rep.Note = fmt.Sprintf("counters not compared: the binlog between the snapshot %s and the cdc's checkpoint %s could not be replayed (is the cdc down or far behind?): %v",
				snap.Pos, at, err)
			r.m.cdcBehind.Set(1)
			return nil
		}
		snap.Counts, stamp = truth, math.MaxInt64
		if at.Compare(snap.Pos) < 0 && age > r.cfg.CatchUpWait {
			rep.Note = fmt.Sprintf("the cdc is behind: its checkpoint %s, saved %s ago, is before the snapshot %s (is it down?); its counters were compared at its checkpoint",
				at, age.Round(time.Millisecond), snap.Pos)
			r.m.cdcBehind.Set(1)
		} else {
			r.m.cdcBehind.Set(0)
		}
		rep.CountersCompared = true
		return r.compareAndFix(ctx, rep, snap, counters, cache, withCache, stamp)
	} else {
		// Without the binlog: wait until the cdc passed the snapshot; a row
		// it changed after the snapshot (stamp > snapshot) cannot compare
		// and waits for a later pass.
		t0 := time.Now()
		cp, caught, err := r.waitCheckpoint(ctx, snap.Pos)
		rep.CatchUpTook = time.Since(t0)
		if err != nil {
			return err
		}
		rep.Checkpoint = cp.Pos
		if !caught {
			rep.Note = fmt.Sprintf("counters not compared: the cdc's checkpoint %s did not reach the snapshot %s within %s (is the cdc down or far behind?)",
				cp.Pos, snap.Pos, r.cfg.CatchUpWait)
			r.m.cdcBehind.Set(1)
			return nil
		}
		c, err := inventory.ReadCounters(ctx, r.db, r.cfg.Checkpoint, withCache)
		if err != nil {
			return err
		}
		counters, cache = c.Rows, c.Templates
		stamp = inventory.Stamp(snap.Pos)
	}
	r.m.cdcBehind.Set(0)
	rep.CountersCompared = true
	return r.compareAndFix(ctx, rep, snap, counters, cache, withCache, stamp)
}

// compareAndFix compares the counters and the template cache with the
// truth (rows with a stamp above `stamp` excepted) and fixes what is safe.
func (r *Reconciler) compareAndFix(ctx context.Context, rep *Report, snap inventory.Snapshot, counters map[inventory.Pair]inventory.Counter,
	cache map[int64]inventory.TemplateCache, withCache bool, stamp int64) error {
	diffs, inFlight := compareCounters(snap.Counts, counters, stamp)
	rep.InFlight = inFlight
	var tdiffs []Difference
	if withCache {
		tdiffs = compareTemplates(snap.Counts, counters, cache, stamp)
	}
	// every difference found is recorded, also when a fix fails: the ones
	// handled with what was done, the others as not handled
	for i := range diffs {
		diffs[i].Action, diffs[i].Reason = ActionInFlight, reasonNotHandled
	}
	for i := range tdiffs {
		tdiffs[i].Action, tdiffs[i].Reason = ActionInFlight, reasonNotHandled
	}
	defer func() { rep.Differences = append(append(rep.Differences, diffs...), tdiffs...) }()
	before, err := r.fixedBefore(ctx, rep.TaskID)
	if err != nil {
		return err
	}
	// counters, a pair at a time
	err = fixByRow(r, diffs, before, func(d Difference) inventory.Pair { return inventory.Pair{Template: d.Template, Channel: d.Channel} },
		func(p inventory.Pair) (bool, error) {
			row, have := counters[p]
			want := inventory.Counts{}
			if t := snap.Counts[p]; t != nil {
				want = *t
			}
			return r.fixCounter(ctx, rep.TaskID, p, row, have, want, min(stamp, inventory.Stamp(rep.Checkpoint)))
		}, "the counter row vanished while we fixed it")
	if err != nil {
		return err
	}
	// the template cache, after the counters
	return fixByRow(r, tdiffs, before, func(d Difference) int64 { return d.Template },
		func(id int64) (bool, error) {
			want := inventory.TemplateCache{}
			for p, c := range snap.Counts {
				if p.Template == id {
					want.Issued += c.Issued()
					want.Used += c.Used
					want.Expired += c.Expired
				}
			}
			return r.fixTemplate(ctx, rep.TaskID, id, cache[id], want)
		}, "the template vanished while we fixed it")
}

// fixByRow handles the differences a row (row names it) at a time: r
// decides a row's differences together, fix corrects a row decided fixed
// (false: the row vanished meanwhile, in flight for the reason vanished),
// and each difference gets the action and reason of its row.
func fixByRow[K comparable](r *Reconciler, diffs []Difference, fixedBefore map[string]bool, row func(Difference) K,
	fix func(K) (bool, error), vanished string) error {
	byRow := map[K][]int{}
	for i, d := range diffs {
		k := row(d)
		byRow[k] = append(byRow[k], i)
	}
	for k, idx := range byRow {
		action, reason := r.decide(diffs, idx, fixedBefore)
		if action == ActionFixed {
			ok, err := fix(k)
			if err != nil {
				return err
			}
			if !ok {
				action, reason = ActionInFlight, vanished
			}
		}
		for _, i := range idx {
			diffs[i].Action, diffs[i].Reason = action, reason
		}
	}
	return nil
}

// decide says what to do with a group of differences of one row.
func (r *Reconciler) decide(diffs []Difference, idx []int, fixedBefore map[string]bool) (string, string) {
	for _, i := range idx {
		d := diffs[i]
		delta := d.Delta()
		if delta < 0 {
			delta = -delta
		}
		if delta > r.cfg.AbsThreshold && float64(delta) > r.cfg.RelThreshold*float64(d.Expected) {
			return ActionNeedsReview, fmt.Sprintf("off by %d, above the thresholds (%d and %.0f%%): too large to fix blindly",
				delta, r.cfg.AbsThreshold, 100*r.cfg.RelThreshold)
		}
		if fixedBefore[d.Store+" "+d.Target] {
			return ActionNeedsReview, "wrong again after the previous pass corrected it: something keeps breaking it"
		}
	}
	if !*r.cfg.AutoFix {
		return ActionReported, "auto-fix is off"
	}
	return ActionFixed, ""
}

// waitCheckpoint waits (bounded) until the cdc's checkpoint reaches pos.
func (r *Reconciler) waitCheckpoint(ctx context.Context, pos canal.Position) (inventory.Checkpoint, bool, error) {
	deadline := time.Now().Add(r.cfg.CatchUpWait)
	for {
		cp, found, err := inventory.LoadCheckpoint(ctx, r.db, r.cfg.Checkpoint)
		if err != nil {
			return cp, false, err
		}
		if found && cp.Pos.File != "" && cp.Pos.Compare(pos) >= 0 {
			return cp, true, nil
		}
		if time.Now().After(deadline) {
			return cp, false, nil
		}
		select {
		case <-ctx.Done():
			return cp, false, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Run runs a pass every interval (the first at once) until ctx ends.
func (r *Reconciler) Run(ctx context.Context, every time.Duration) error {
	return runEvery(ctx, every, r.log, func(ctx context.Context) error {
		_, err := r.Pass(ctx)
		return err
	})
}

// runEvery calls pass every interval (the first at once) until ctx ends;
// a pass that fails is logged, and the next runs all the same.
func runEvery(ctx context.Context, every time.Duration, log *slog.Logger, pass func(context.Context) error) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if err := pass(ctx); err != nil && !errors.Is(err, context.Canceled) {
			log.Error("reconcile pass failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
