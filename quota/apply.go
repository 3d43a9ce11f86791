package quota

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/couponlink/couponlink/internal/defaults"
	"github.com/couponlink/couponlink/internal/sqltx"
	"github.com/couponlink/couponlink/webhook"
)

// Rebalancing moves unclaimed quota from channels that redeem badly to
// channels that redeem well, by the template's policy (Decide). A pass
// looks at each template with two or more channel buckets, first on the
// cdc's mirror (cheap), and only when the rule would fire, in a
// transaction that:
//
//   - is fenced (RebalancerConfig.Fence: only the leading cdc decides),
//   - locks the template's channel_quota rows, so claims wait and the rule
//     sees the claim guard as it is,
//   - in auto mode moves the quota with a guarded UPDATE that can never
//     leave claimed > quota (and the table's CHECK refuses it besides),
//   - writes one quota_transfer_log row per move, with the rule and the
//     rates seen (mode signal: the rows say what would move; nothing moves),
//   - writes the webhook events (quota.transferred or quota.recommendation).
//
// The channel_quota rows it changes come back through the binlog, like a
// claim's: the cdc's mirror and the Redis stock keys follow from there.

// Mirror is the cdc's in-memory view of the channel buckets at its
// checkpoint: quota, claim guard and derived counts.
type Mirror interface {
	// Buckets is every template's channel buckets, by template.
	Buckets() map[int64][]Channel
	// Counts is one bucket's derived counts (Held to Released; the other
	// fields unset).
	Counts(template int64, channel string) Channel
}

// RebalancerConfig wires a Rebalancer to the cdc that runs it.
type RebalancerConfig struct {
	DB     *sql.DB
	Mirror Mirror
	// Fence, in a decision's transaction, locks what makes this process the
	// writer and fails when it no longer is; the pass stops on its error.
	Fence func(ctx context.Context, tx *sql.Tx) error
	// Enqueue writes a decision's webhook events in its transaction.
	Enqueue func(ctx context.Context, tx *sql.Tx, events []webhook.Event) error
	// Freshen, after an applied move committed, writes the template's
	// derived copies (the Redis stock keys) at once. Optional.
	Freshen func(ctx context.Context, templates []int64)
	// Legacy runs the rule on a legacy shop's campaigns instead
	// (legacypass.go): signal mode only, on the mirror's channels (the
	// shop's per-channel budgets and the cdc's counts); nothing but
	// couponlink's own tables is written.
	Legacy bool
	// Sum, with Legacy over several sources, adds the other sources' counts
	// to the mirror's buckets; its error (a source that cannot be asked)
	// skips the pass: nothing is decided on a partial sum. Optional.
	Sum func(ctx context.Context, buckets map[int64][]Channel) error

	Logger     *slog.Logger
	Registerer prometheus.Registerer
	Now        func() time.Time
}

// Rebalancer runs the rule over every template and applies its decisions.
// Its passes must not overlap.
type Rebalancer struct {
	cfg       RebalancerConfig
	log       *slog.Logger
	m         rebalanceMetrics
	badPolicy map[int64]string // templates whose policy is invalid, with the error last logged
}

type rebalanceMetrics struct {
	transfers       *prometheus.CounterVec
	recommendations *prometheus.CounterVec
	badPolicies     prometheus.Gauge
}

// NewRebalancer checks cfg and registers the rebalancing metrics.
func NewRebalancer(cfg RebalancerConfig) (*Rebalancer, error) {
	if cfg.DB == nil || cfg.Mirror == nil || cfg.Fence == nil || cfg.Enqueue == nil {
		return nil, errors.New("quota: RebalancerConfig needs DB, Mirror, Fence and Enqueue")
	}
	defaults.LogMetricsClock(&cfg.Logger, &cfg.Registerer, &cfg.Now)
	f := promauto.With(cfg.Registerer)
	return &Rebalancer{cfg: cfg, log: cfg.Logger, badPolicy: map[int64]string{}, m: rebalanceMetrics{
		transfers: f.NewCounterVec(prometheus.CounterOpts{
			Name: "couponlink_quota_transfers_total", Help: "Quota moves between channel buckets applied by the rebalancing rule (policy mode auto), by template.",
		}, []string{"template"}),
		recommendations: f.NewCounterVec(prometheus.CounterOpts{
			Name: "couponlink_quota_recommendations_total", Help: "Quota moves the rebalancing rule recommended without applying them (policy mode signal), by template.",
		}, []string{"template"}),
		badPolicies: f.NewGauge(prometheus.GaugeOpts{
			Name: "couponlink_quota_invalid_policies", Help: "Templates the rebalancing rule skips because their effective policy (override over the defaults) is invalid.",
		}),
	}}, nil
}

// fenced is a failed fence: the pass stops.
type fenced struct{ err error }

func (e fenced) Error() string { return e.err.Error() }
func (e fenced) Unwrap() error { return e.err }

// Pass runs the rule over every template. A template whose decision fails
// is named in the error and the others are still decided; a failed fence
// stops the pass with the fence's error.
func (r *Rebalancer) Pass(ctx context.Context) error {
	if r.cfg.Legacy {
		return r.legacyPass(ctx)
	}
	defaults, overrides, err := LoadPolicies(ctx, r.cfg.DB)
	if err != nil {
		return fmt.Errorf("read the quota policies: %w", err)
	}
	now := r.cfg.Now().UTC()
	byTpl := r.cfg.Mirror.Buckets()
	templates := make([]int64, 0, len(byTpl))
	for t, chans := range byTpl {
		if len(chans) >= 2 {
			templates = append(templates, t)
		}
	}
	sort.Slice(templates, func(i, j int) bool { return templates[i] < templates[j] })
	defer func() { r.m.badPolicies.Set(float64(len(r.badPolicy))) }()
	var errs []error
	for _, tpl := range templates {
		p, ok := r.policy(tpl, overrides[tpl].Apply(defaults))
		if !ok {
			continue
		}
		probe := p // the mirror knows neither the campaign's age nor the last move: the transaction checks those
		probe.MinAgeSeconds = 0
		if len(Decide(Input{Template: tpl, Policy: probe, Channels: byTpl[tpl], Now: now}).Moves) == 0 {
			continue
		}
		if err := r.decide(ctx, tpl, p, now); err != nil {
			var f fenced
			if errors.As(err, &f) {
				return f.err
			}
			errs = append(errs, fmt.Errorf("template %d (nothing moved): %w", tpl, err))
		}
	}
	return errors.Join(errs...)
}

// policy is the template's policy p when it is valid and not off. An
// invalid one is logged once per distinct error and counted.
func (r *Rebalancer) policy(tpl int64, p Policy) (Policy, bool) {
	if err := p.Validate(); err != nil {
		if r.badPolicy[tpl] != err.Error() {
			r.badPolicy[tpl] = err.Error()
			r.log.Warn("rebalance: the template's policy is invalid; skipped until it is fixed", "template", tpl, "err", err)
		}
		return p, false
	}
	delete(r.badPolicy, tpl)
	return p, p.Mode != ModeOff
}

// decide runs the rule on the locked rows of one template and applies it.
func (r *Rebalancer) decide(ctx context.Context, tpl int64, p Policy, now time.Time) error {
	var d Decision
	var decision string
	err := sqltx.Run(ctx, r.cfg.DB, nil, func(tx *sql.Tx) error {
		if err := r.cfg.Fence(ctx, tx); err != nil {
			return fenced{err}
		}
		chans, err := r.lockChannels(ctx, tx, tpl)
		if err != nil {
			return err
		}
		in, found, err := ruleInput(ctx, tx, tpl, p, chans, now)
		if err != nil || !found {
			return err
		}
		d = Decide(in)
		if len(d.Moves) == 0 {
			return nil
		}
		decision = webhook.NewID()
		if p.Mode == ModeAuto {
			if err := moveQuota(ctx, tx, tpl, d.Moves); err != nil {
				return err
			}
		}
		if err := logDecision(ctx, tx, tpl, decision, p, d, now); err != nil {
			return err
		}
		return r.cfg.Enqueue(ctx, tx, decisionEvents(tpl, decision, p, d, chans, now))
	})
	if err != nil || len(d.Moves) == 0 {
		return err
	}
	r.report(tpl, decision, p, d)
	if p.Mode == ModeAuto && r.cfg.Freshen != nil {
		r.cfg.Freshen(ctx, []int64{tpl})
	}
	return nil
}

// report counts and logs a committed decision's moves.
func (r *Rebalancer) report(tpl int64, decision string, p Policy, d Decision) {
	label := strconv.FormatInt(tpl, 10)
	for _, m := range d.Moves {
		if p.Mode == ModeAuto {
			r.m.transfers.WithLabelValues(label).Inc()
			r.log.Info("quota moved between channels", "template", tpl, "from", m.From, "to", m.To, "amount", m.Amount, "decision", decision, "why", m.Why)
		} else {
			r.m.recommendations.WithLabelValues(label).Inc()
			r.log.Info("quota move recommended (policy mode signal: nothing moved)", "template", tpl, "from", m.From, "to", m.To, "amount", m.Amount, "decision", decision, "why", m.Why)
		}
	}
}

// lockChannels reads and locks the template's channel buckets, with the
// mirror's counts of each.
func (r *Rebalancer) lockChannels(ctx context.Context, tx *sql.Tx, tpl int64) ([]Channel, error) {
	chans, err := sqltx.List(ctx, tx, `SELECT channel, quota, claimed FROM channel_quota WHERE template_id = ? ORDER BY channel FOR UPDATE`,
		[]any{tpl}, func(rows *sql.Rows) (Channel, error) {
			var name string
			var q, claimed int64
			if err := rows.Scan(&name, &q, &claimed); err != nil {
				return Channel{}, err
			}
			c := r.cfg.Mirror.Counts(tpl, name)
			c.Name, c.Quota, c.Claimed = name, q, claimed
			return c, nil
		})
	if err != nil {
		return nil, fmt.Errorf("lock the channel buckets: %w", err)
	}
	return chans, nil
}

// moveQuota applies the moves. Each giver's UPDATE is guarded: it keeps
// quota >= claimed, or it changes nothing and the whole decision rolls back.
func moveQuota(ctx context.Context, tx *sql.Tx, tpl int64, moves []Move) error {
	for _, m := range moves {
		res, err := tx.ExecContext(ctx, `UPDATE channel_quota SET quota = quota - ?, version = version + 1
			WHERE template_id = ? AND channel = ? AND quota - ? >= claimed`, m.Amount, tpl, m.From, m.Amount)
		if err != nil {
			return fmt.Errorf("take %d from %s: %w", m.Amount, m.From, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("take %d from %s: %w", m.Amount, m.From, err)
		} else if n != 1 {
			return fmt.Errorf("take %d from %s: it would leave claimed above quota; nothing moved", m.Amount, m.From)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE channel_quota SET quota = quota + ?, version = version + 1
			WHERE template_id = ? AND channel = ?`, m.Amount, tpl, m.To); err != nil {
			return fmt.Errorf("give %d to %s: %w", m.Amount, m.To, err)
		}
	}
	return nil
}

// logDecision writes one quota_transfer_log row per move.
func logDecision(ctx context.Context, tx *sql.Tx, tpl int64, decision string, p Policy, d Decision, now time.Time) error {
	for _, m := range d.Moves {
		seen, err := webhook.JSON(map[string]any{"why": m.Why, "policy": p, "channels": d.Seen})
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO quota_transfer_log (template_id, decision, from_channel, to_channel, amount, rule,
			rates_seen, mode, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			tpl, decision, m.From, m.To, m.Amount, d.Rule, string(seen), p.Mode, now); err != nil {
			return fmt.Errorf("write the transfer log: %w", err)
		}
	}
	return nil
}

// decisionEvents: in auto mode one quota.transferred per move, with both
// buckets' quota after it; in signal mode one quota.recommendation.
func decisionEvents(tpl int64, decision string, p Policy, d Decision, before []Channel, now time.Time) []webhook.Event {
	if p.Mode != ModeAuto {
		return []webhook.Event{{Type: webhook.QuotaRecommendation, Time: now, Template: tpl, Data: map[string]any{
			"decision": decision, "moves": d.Moves, "total": d.Total(), "rule": d.Rule, "channels": d.Seen, "policy": p}}}
	}
	after := map[string]int64{}
	for _, c := range before {
		after[c.Name] = c.Quota
	}
	out := make([]webhook.Event, 0, len(d.Moves))
	for _, m := range d.Moves {
		after[m.From] -= m.Amount
		after[m.To] += m.Amount
		out = append(out, webhook.Event{Type: webhook.QuotaTransferred, Time: now, Template: tpl, Channel: m.To, Data: map[string]any{
			"decision": decision, "from": m.From, "to": m.To, "amount": m.Amount,
			"from_quota_after": after[m.From], "to_quota_after": after[m.To], "why": m.Why, "rule": d.Rule}})
	}
	return out
}
