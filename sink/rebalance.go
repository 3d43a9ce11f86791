package sink

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/couponlink/couponlink/internal/sqltx"
	"github.com/couponlink/couponlink/inventory"
	"github.com/couponlink/couponlink/quota"
	"github.com/couponlink/couponlink/webhook"
)

// Rebalancing moves unclaimed quota from channels that redeem badly to
// channels that redeem well, by the template's policy (package quota has
// the rule). Every RebalanceEvery the cdc looks at each template with two
// or more channel buckets, first on its mirror (cheap), and only when the
// rule would fire, in a transaction that:
//
//   - is fenced by the leader epoch,
//   - locks the template's channel_quota rows, so claims wait and the rule
//     sees the claim guard as it is,
//   - in auto mode moves the quota with a guarded UPDATE that can never
//     leave claimed > quota (and the table's CHECK refuses it besides),
//   - writes one quota_transfer_log row per move, with the rule and the
//     rates seen (mode signal: the rows say what would move; nothing moves),
//   - writes the webhook events (quota.transferred or quota.recommendation).
//
// The channel_quota rows it changes come back through the binlog, like a
// claim's: the mirror and the Redis stock keys follow from there.

// rebalance runs the rule over every template; it returns only ErrFenced.
func (s *Sink) rebalance(ctx context.Context) error {
	result := "ok"
	defer func() { s.m.quotaRuleRuns.WithLabelValues(result).Inc() }()
	defaults, overrides, err := quota.LoadPolicies(ctx, s.db)
	if err != nil {
		result = "error"
		s.log.Error("rebalance: cannot read the quota policies; will try again", "err", err)
		return nil
	}
	now := s.cfg.Now().UTC()
	byTpl := s.channelsByTemplate()
	templates := make([]int64, 0, len(byTpl))
	for t, chans := range byTpl {
		if len(chans) >= 2 {
			templates = append(templates, t)
		}
	}
	sort.Slice(templates, func(i, j int) bool { return templates[i] < templates[j] })
	defer func() { s.m.quotaBadPolicies.Set(float64(len(s.badPolicy))) }()
	for _, tpl := range templates {
		p := overrides[tpl].Apply(defaults)
		if err := p.Validate(); err != nil {
			if s.badPolicy[tpl] != err.Error() {
				s.badPolicy[tpl] = err.Error()
				s.log.Warn("rebalance: the template's policy is invalid; skipped until it is fixed", "template", tpl, "err", err)
			}
			continue
		}
		delete(s.badPolicy, tpl)
		if p.Mode == quota.ModeOff {
			continue
		}
		probe := p // the mirror knows neither the campaign's age nor the last move: the transaction checks those
		probe.MinAgeSeconds = 0
		if len(quota.Decide(quota.Input{Template: tpl, Policy: probe, Channels: byTpl[tpl], Now: now}).Moves) == 0 {
			continue
		}
		if err := s.decide(ctx, tpl, p, now); err != nil {
			if errors.Is(err, ErrFenced) {
				return err
			}
			result = "error"
			s.log.Error("rebalance failed; nothing moved, will try again", "template", tpl, "err", err)
		}
	}
	return nil
}

// channelsByTemplate is the mirror's view of every channel bucket.
func (s *Sink) channelsByTemplate() map[int64][]quota.Channel {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := map[int64][]quota.Channel{}
	for p, q := range s.quotas {
		out[p.Template] = append(out[p.Template], s.channel(p, q))
	}
	return out
}

func (s *Sink) channel(p inventory.Pair, q inventory.Quota) quota.Channel {
	c := quota.Channel{Name: p.Channel, Quota: q.Quota, Claimed: q.Claimed}
	if n := s.counts[p]; n != nil {
		c.Held, c.Used, c.Expired, c.Returned, c.Released = n.Held, n.Used, n.Expired, n.Returned, n.Released
	}
	return c
}

// decide runs the rule on the locked rows of one template and applies it.
func (s *Sink) decide(ctx context.Context, tpl int64, p quota.Policy, now time.Time) error {
	var d quota.Decision
	var decision string
	err := sqltx.Run(ctx, s.db, nil, func(tx *sql.Tx) error {
		if err := s.fence(ctx, tx); err != nil {
			return err
		}
		var created time.Time
		err := tx.QueryRowContext(ctx, `SELECT created_at FROM coupon_template WHERE id = ?`, tpl).Scan(&created)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read the template: %w", err)
		}
		var last sql.NullTime
		if err := tx.QueryRowContext(ctx, `SELECT MAX(created_at) FROM quota_transfer_log WHERE template_id = ? AND mode = ?`,
			tpl, p.Mode).Scan(&last); err != nil {
			return fmt.Errorf("read the last decision: %w", err)
		}
		chans, err := s.lockChannels(ctx, tx, tpl)
		if err != nil {
			return err
		}
		d = quota.Decide(quota.Input{Template: tpl, Policy: p, Channels: chans, Age: now.Sub(created), LastMove: last.Time, Now: now})
		if len(d.Moves) == 0 {
			return nil
		}
		decision = webhook.NewID()
		if p.Mode == quota.ModeAuto {
			if err := moveQuota(ctx, tx, tpl, d.Moves); err != nil {
				return err
			}
		}
		if err := logDecision(ctx, tx, tpl, decision, p, d, now); err != nil {
			return err
		}
		return s.enqueue(ctx, tx, decisionEvents(tpl, decision, p, d, chans, now))
	})
	if err != nil || len(d.Moves) == 0 {
		return err
	}
	if p.Mode == quota.ModeAuto {
		s.freshen(ctx, []int64{tpl})
	}
	for _, m := range d.Moves {
		if p.Mode == quota.ModeAuto {
			s.m.quotaTransfers.WithLabelValues(strconv.FormatInt(tpl, 10)).Inc()
			s.log.Info("quota moved between channels", "template", tpl, "from", m.From, "to", m.To, "amount", m.Amount, "decision", decision, "why", m.Why)
		} else {
			s.m.quotaRecommendations.WithLabelValues(strconv.FormatInt(tpl, 10)).Inc()
			s.log.Info("quota move recommended (policy mode signal: nothing moved)", "template", tpl, "from", m.From, "to", m.To, "amount", m.Amount, "decision", decision, "why", m.Why)
		}
	}
	return nil
}

// lockChannels reads and locks the template's channel buckets, with the
// cdc's counters of each.
func (s *Sink) lockChannels(ctx context.Context, tx *sql.Tx, tpl int64) ([]quota.Channel, error) {
	rows, err := tx.QueryContext(ctx, `SELECT channel, quota, claimed FROM channel_quota WHERE template_id = ? ORDER BY channel FOR UPDATE`, tpl)
	if err != nil {
		return nil, fmt.Errorf("lock the channel buckets: %w", err)
	}
	defer rows.Close()
	var chans []quota.Channel
	s.mu.RLock()
	defer s.mu.RUnlock()
	for rows.Next() {
		var ch string
		var q inventory.Quota
		if err := rows.Scan(&ch, &q.Quota, &q.Claimed); err != nil {
			return nil, err
		}
		chans = append(chans, s.channel(inventory.Pair{Template: tpl, Channel: ch}, q))
	}
	return chans, rows.Err()
}

// moveQuota applies the moves. Each giver's UPDATE is guarded: it keeps
// quota >= claimed, or it changes nothing and the whole decision rolls back.
func moveQuota(ctx context.Context, tx *sql.Tx, tpl int64, moves []quota.Move) error {
	for _, m := range moves {
		res, err := tx.ExecContext(ctx, `UPDATE channel_quota SET quota = quota - ?, version = version + 1
			WHERE template_id = ? AND channel = ? AND quota - ? >= claimed`, m.Amount, tpl, m.From, m.Amount)
		if err != nil {
			return fmt.Errorf("take %d from %s: %w", m.Amount, m.From, err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
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
func logDecision(ctx context.Context, tx *sql.Tx, tpl int64, decision string, p quota.Policy, d quota.Decision, now time.Time) error {
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
func decisionEvents(tpl int64, decision string, p quota.Policy, d quota.Decision, before []quota.Channel, now time.Time) []webhook.Event {
	if p.Mode != quota.ModeAuto {
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
