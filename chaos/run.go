// Package chaos is couponlink's seeded, process-level fault-injection soak:
// a private MariaDB and Redis, the real couponlink binary as processes (api,
// two cdcs, the reconciler), a webhook receiver, concurrent API clients and
// faults drawn from one seed, and a checker of the invariants of
// docs/design.md at checkpoints and after quiescence. `make chaos` runs it.
package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"
)

// Config is one run's settings.
type Config struct {
	Duration    time.Duration // of the workload and the faults
	Seed        uint64        // draws the operations and the faults' kinds and moments
	Bin         string        // the couponlink binary
	Repo        string        // the module's root (deploy/legacy's schema)
	Dir         string        // the run's directory: server data, process logs
	Clients     int           // concurrent API clients
	MaxRequests int64         // bound of the API requests
	CheckEvery  int           // a checkpoint every this many faults (0: none)
	Keep        bool          // keep Dir (logs, data) after the run
	Logger      *slog.Logger
	Out         io.Writer // the report
}

// Result is what a run found.
type Result struct {
	Violation string   // the first violated invariant ("" none)
	Rows      []string // its rows
}

// Run runs the soak and prints its report to cfg.Out. An error means the
// harness itself could not run (a server would not start); a violation is
// in the Result.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	t, ch, k := newTally(), newChecks(), newAcks()
	procCtx, stopProcs := context.WithCancel(ctx)
	cl, err := startCluster(procCtx, cfg, t, ch)
	defer func() {
		stopProcs()
		keep := cfg.Keep
		if v, _ := ch.firstViolation(); v != "" {
			keep = true
			fmt.Fprintf(cfg.Out, "the run's logs and data are kept in %s\n", cfg.Dir)
		}
		if err := cl.stop(keep); err != nil {
			cfg.Logger.Warn("stop the run's servers", "err", err)
		}
	}()
	if err != nil {
		return Result{}, err
	}
	if err := cl.apiC.waitHealthy(ctx, 2*time.Minute); err != nil {
		return Result{}, err
	}
	w := &workload{api: cl.apiC, acks: k, tally: t, seed: cfg.Seed, maxReq: cfg.MaxRequests}
	if err := w.createTemplates(ctx); err != nil {
		return Result{}, err
	}
	// The legacy writer starts once the legacy cdc has bootstrapped: a
	// bootstrap reads a snapshot, which shows no transition made before it
	// (a coupon made USED -> EXPIRED before the snapshot is only EXPIRED
	// there), so the writer's anomalies must all come after it.
	if err := cl.legacyCaughtUp(ctx); err != nil {
		return Result{}, fmt.Errorf("the legacy cdc before the legacy writer: %w", err)
	}
	start := time.Now()
	runCtx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	var wg sync.WaitGroup
	var faultErr error
	wg.Add(3)
	go func() { defer wg.Done(); w.run(runCtx, cfg.Clients) }()
	cl.legacy.rng = rand.New(rand.NewPCG(cfg.Seed, 1<<32))
	go func() { defer wg.Done(); cl.legacy.run(runCtx) }()
	go func() {
		defer wg.Done()
		faultErr = cl.injectFaults(runCtx, rand.New(rand.NewPCG(cfg.Seed, 0)), cfg.CheckEvery)
		cancel() // a harness failure stops the workload too
	}()
	wg.Wait()
	if faultErr != nil {
		return Result{}, faultErr
	}
	if ctx.Err() != nil {
		return Result{}, ctx.Err()
	}
	ran := time.Since(start)
	cfg.Logger.Info("workload stopped; waiting for quiescence", "requests", w.requests.Load())
	qStart := time.Now()
	if err := cl.quiesce(ctx); err != nil {
		ch.record(invCaughtUp, []string{err.Error()})
	} else {
		ch.record(invCaughtUp, nil)
	}
	cl.finalChecks(ctx, k)
	quiet := time.Since(qStart)
	cl.checkLegacy(ctx)
	cl.report(ctx, cfg.Seed, ran, quiet).print(cfg.Out)
	var res Result
	res.Violation, res.Rows = ch.firstViolation()
	return res, nil
}

// createTemplates creates the run's campaigns: a large one, one of short
// validity released after a 1 s cooldown, one that sells out, and one
// whose rebalancing policy the workload switches to auto mode.
func (w *workload) createTemplates(ctx context.Context) error {
	specs := []map[string]any{
		{"name": "chaos-large", "total_quota": 4000, "channels": map[string]int64{"app": 3000, "web": 1000},
			"valid_seconds": 3600, "per_user_limit": 100000, "expiry_policy": "freeze"},
		{"name": "chaos-short", "total_quota": 600, "channels": map[string]int64{"app": 300, "web": 300},
			"valid_seconds": 3, "per_user_limit": 100000, "expiry_policy": "release", "release_cooldown_seconds": 1},
		{"name": "chaos-soldout", "total_quota": 120, "channels": map[string]int64{"app": 60, "web": 40, "sms": 20},
			"valid_seconds": 3600, "per_user_limit": 100000, "expiry_policy": "freeze"},
		{"name": "chaos-auto", "total_quota": 800, "channels": map[string]int64{"app": 500, "web": 300},
			"valid_seconds": 5, "per_user_limit": 100000, "expiry_policy": "release", "release_cooldown_seconds": 2},
	}
	for _, s := range specs {
		var out struct {
			ID       int64            `json:"id"`
			Channels map[string]int64 `json:"channels"`
		}
		var a answer
		err := waitFor(ctx, 2*time.Minute, "create template "+s["name"].(string), func() (bool, string) {
			var err error
			a, err = w.api.call(ctx, http.MethodPost, "/v1/templates", s, &out)
			return err == nil && a.status == http.StatusCreated, fmt.Sprintf("%d %s %v", a.status, a.body, err)
		})
		if err != nil {
			return err
		}
		t := tmpl{id: out.ID}
		for _, c := range sortedKeys(out.Channels) {
			t.channels = append(t.channels, c)
		}
		if len(t.channels) == 0 {
			return errors.New("template " + s["name"].(string) + " answered no channels")
		}
		w.templates = append(w.templates, t)
		w.autoTpl = out.ID
	}
	return nil
}

// report gathers the run's table.
func (cl *cluster) report(ctx context.Context, seed uint64, ran, quiet time.Duration) report {
	events, deliveries := cl.eventStats(ctx)
	var restarts []string
	for _, p := range cl.procs {
		p.mu.Lock()
		restarts = append(restarts, fmt.Sprintf("%s %d", p.name, p.exits-p.kills))
		p.mu.Unlock()
	}
	cl.legacy.mu.Lock()
	caused := len(cl.legacy.expected)
	cl.legacy.mu.Unlock()
	return report{seed: seed, ran: ran, quiet: quiet, tally: cl.tally, checks: cl.checks, events: events,
		deliveries: deliveries, restarts: restarts, legacyAnomalies: caused}
}
