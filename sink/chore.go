package sink

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// A Chore is periodic work of the leading cdc beside the batches: giving
// back the slots of expired coupons whose cooldown is over (release),
// rebalancing channel quota (rebalance), and reloading the mirror after a
// correction of the counters (corrections). Each runs its own loop (Run).
//
// A pass takes turns with ApplyBatch — both read and change the mirror and
// the Redis writer — and what it writes is fenced by the checkpoint's
// epoch, like a batch. A failed pass is logged, counted and tried again at
// the next tick: it never fails a batch. The Daemon runs the chores while
// this process leads.
type Chore struct {
	name  string
	s     *Sink
	every time.Duration
	pass  func(ctx context.Context, log *slog.Logger) error
	final bool // one last pass when Run stops
	alone bool // the pass touches neither the mirror nor Redis: it does not wait for the batches
	runs  *prometheus.CounterVec
	log   *slog.Logger
}

// The chores' intervals that are not configured, and the bound of a last
// pass on stop.
const (
	correctionsEvery = time.Second
	finalPassTimeout = 5 * time.Second
)

// newChores makes the sink's chores and the rebalancer they drive.
func (s *Sink) newChores() error {
	var err error
	if s.rebalancer, err = s.newRebalancer(); err != nil {
		return err
	}
	chore := func(name string, every time.Duration, runs *prometheus.CounterVec, pass func(context.Context, *slog.Logger) error) *Chore {
		return &Chore{name: name, s: s, every: every, pass: pass, runs: runs, log: s.cfg.Logger.With("component", name)}
	}
	s.releases = chore("release", s.cfg.ReleaseEvery, s.m.releaseRuns, s.releasePass)
	s.releases.final = true // the slots due go back before the process goes away
	s.rebalance = chore("rebalance", s.cfg.RebalanceEvery, s.m.quotaRuleRuns, func(ctx context.Context, _ *slog.Logger) error {
		return s.rebalancer.Pass(ctx)
	})
	s.correcting = chore("corrections", correctionsEvery, s.m.correctionRuns, s.followCorrections)
	s.mailPrune = chore("sources-mail", mailPruneEvery, s.m.mailRuns, s.pruneMail)
	s.mailPrune.alone = true // a judge's server that is down must not hold the batches up
	return nil
}

// Chores are the chores the Config turns on: corrections always, release
// and rebalance when Releases and Rebalance are set (rebalance in signal
// mode on a legacy shop with per-channel budgets, by the cdc that decides:
// legacySignal), the pruning of the
// mail to the judge when this source mails it (sourcesprune.go).
func (s *Sink) Chores() []*Chore {
	out := []*Chore{s.correcting}
	if s.cfg.Releases {
		out = append(out, s.releases)
	}
	if s.cfg.Rebalance || s.legacySignal() {
		out = append(out, s.rebalance)
	}
	if s.mails() {
		out = append(out, s.mailPrune)
	}
	return out
}

// Releases is the chore that gives back the slots whose release is due.
func (s *Sink) Releases() *Chore { return s.releases }

// Rebalancing is the chore that runs the channel-quota rule.
func (s *Sink) Rebalancing() *Chore { return s.rebalance }

// Corrections is the chore that follows corrections of the counters.
func (s *Sink) Corrections() *Chore { return s.correcting }

// Name is the chore's name, also its logs' component.
func (c *Chore) Name() string { return c.name }

// Run runs a pass at once and then one per interval until ctx ends; then,
// for the release chore, one last pass. It returns nil when ctx ends and
// ErrFenced when another cdc took the checkpoint over.
func (c *Chore) Run(ctx context.Context) error {
	t := time.NewTicker(c.every)
	defer t.Stop()
	for {
		err := c.RunOnce(ctx)
		switch {
		case ctx.Err() != nil:
			return c.stop(ctx)
		case errors.Is(err, ErrFenced):
			return err
		case err != nil:
			c.log.Error("pass failed; tried again at the next tick", "err", err, "retry_in", c.every)
		}
		select {
		case <-ctx.Done():
			return c.stop(ctx)
		case <-t.C:
		}
	}
}

// RunOnce runs one pass now, in turn with the batches (a chore alone:
// beside them), and counts it (a pass cut short by ctx is not counted).
// The sink must have started.
func (c *Chore) RunOnce(ctx context.Context) error {
	if !c.alone {
		c.s.work.Lock()
		defer c.s.work.Unlock()
	}
	err := c.pass(ctx, c.log)
	switch {
	case err == nil:
		c.runs.WithLabelValues("ok").Inc()
	case ctx.Err() == nil:
		c.runs.WithLabelValues("error").Inc()
	}
	return err
}

// stop runs the last pass of a chore that has one, on a context of its own
// (ctx has ended), bounded by finalPassTimeout.
func (c *Chore) stop(ctx context.Context) error {
	if !c.final {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalPassTimeout)
	defer cancel()
	if err := c.RunOnce(ctx); err != nil && !errors.Is(err, ErrFenced) {
		c.log.Warn("last pass on stop failed; the next leader does it", "err", err)
	}
	return nil
}
