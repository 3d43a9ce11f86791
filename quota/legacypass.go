package quota

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"

	"github.com/couponlink/couponlink/internal/sqltx"
	"github.com/couponlink/couponlink/webhook"
)

// The cdc's pass over a legacy shop's campaigns (legacy.go): the leading
// cdc (with several sources, the judge's) looks at each template with two
// or more channel budgets on its mirror, summed over the sources, with its
// policy as it runs for a legacy campaign (ForLegacy), and when the rule
// recommends moves writes, in one fenced transaction on couponlink's own
// database, one quota_transfer_log row per move (mode signal) and the
// quota.recommendation event. The shop's tables are read through the
// mirror only: nothing there is locked or written.

// legacyPass is Pass for a legacy shop.
func (r *Rebalancer) legacyPass(ctx context.Context) error {
	byTpl := r.cfg.Mirror.Buckets()
	if len(byTpl) == 0 {
		return nil
	}
	defaults, overrides, err := LoadPolicies(ctx, r.cfg.DB)
	if err != nil {
		return fmt.Errorf("read the quota policies: %w", err)
	}
	policies := map[int64]Policy{}
	for tpl, chans := range byTpl {
		if len(chans) < 2 {
			continue
		}
		if p, ok := r.policy(tpl, ForLegacy(overrides[tpl].Apply(defaults))); ok {
			policies[tpl] = p
		}
	}
	r.m.badPolicies.Set(float64(len(r.badPolicy)))
	if len(policies) == 0 {
		return nil
	}
	if r.cfg.Sum != nil {
		if err := r.cfg.Sum(ctx, byTpl); err != nil {
			return fmt.Errorf("the legacy campaigns' recommendations wait for every source's counts: %w", err)
		}
	}
	templates := make([]int64, 0, len(policies))
	for tpl := range policies {
		templates = append(templates, tpl)
	}
	sort.Slice(templates, func(i, j int) bool { return templates[i] < templates[j] })
	now := r.cfg.Now().UTC()
	var errs []error
	for _, tpl := range templates {
		in := Input{Template: tpl, Policy: policies[tpl], Channels: byTpl[tpl], Now: now, AgeUnknown: true}
		if len(Decide(in).Moves) == 0 { // the transaction checks the cooldown
			continue
		}
		if err := r.decideLegacy(ctx, in); err != nil {
			var f fenced
			if errors.As(err, &f) {
				return f.err
			}
			errs = append(errs, fmt.Errorf("legacy template %d (nothing recommended): %w", tpl, err))
		}
	}
	return errors.Join(errs...)
}

// decideLegacy runs the rule on one legacy template's channels, with its
// last recommendation, and records the recommendation.
func (r *Rebalancer) decideLegacy(ctx context.Context, probe Input) error {
	var d Decision
	var decision string
	tpl, p := probe.Template, probe.Policy
	err := sqltx.Run(ctx, r.cfg.DB, nil, func(tx *sql.Tx) error {
		if err := r.cfg.Fence(ctx, tx); err != nil {
			return fenced{err}
		}
		in, err := legacyInput(ctx, tx, tpl, p, LegacyChannels{Channels: probe.Channels}, probe.Now)
		if err != nil {
			return err
		}
		if d = Decide(in); len(d.Moves) == 0 {
			return nil
		}
		decision = webhook.NewID()
		if err := logDecision(ctx, tx, tpl, decision, p, d, probe.Now); err != nil {
			return err
		}
		events := decisionEvents(tpl, decision, p, d, probe.Channels, probe.Now)
		for _, e := range events { // a legacy campaign's: the shop applies it, or not
			if data, ok := e.Data.(map[string]any); ok {
				data["legacy"], data["unknown"] = true, d.Unknown
			}
		}
		return r.cfg.Enqueue(ctx, tx, events)
	})
	if err != nil || len(d.Moves) == 0 {
		return err
	}
	r.report(tpl, decision, p, d)
	return nil
}
