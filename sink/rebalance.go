package sink

import (
	"context"
	"errors"
	"fmt"

	"github.com/couponlink/couponlink/inventory"
	"github.com/couponlink/couponlink/quota"
)

// newRebalancer wires the channel-quota rule (package quota applies it) to
// the sink: the mirror's buckets, the epoch fence, the webhook outbox and
// the Redis keys of the buckets a transfer changed. The rebalance chore
// runs its passes. On a legacy shop it runs the rule in signal mode only
// (quota/legacypass.go), by the one cdc that decides (legacySignal), over
// the sum of the sources' counts.
func (s *Sink) newRebalancer() (*quota.Rebalancer, error) {
	cfg := quota.RebalancerConfig{DB: s.db, Mirror: quotaMirror{s}, Fence: s.fence, Enqueue: s.enqueue,
		Freshen: s.freshen, Logger: s.cfg.Logger.With("component", "rebalance"), Registerer: s.cfg.Registerer, Now: s.cfg.Now}
	if s.cfg.Mode == ModeLegacy {
		cfg.Freshen, cfg.Legacy = nil, true
		if len(s.peers) > 0 {
			cfg.Sum = s.sumChannels
		}
	}
	return quota.NewRebalancer(cfg)
}

// legacySignal says whether this cdc runs the rule over a legacy shop's
// campaigns: with the shop's per-channel budgets mapped (without them
// there is no quota to move), and with several sources only the judge's
// cdc (the one that decides what only the sum shows, sourcesjudge.go), so
// that exactly one process decides; the leader among its processes, as
// every chore.
func (s *Sink) legacySignal() bool {
	m := s.cfg.Mapping
	return s.cfg.Mode == ModeLegacy && m.ChannelQuota != nil && (m.Source() == "" || m.Source() == m.Judge())
}

// sumChannels adds every other source's counters, at its cdc's checkpoint,
// to the buckets' counts; a source that cannot be asked, or has no
// checkpoint yet, is an error: nothing is decided on a partial sum.
func (s *Sink) sumChannels(ctx context.Context, buckets map[int64][]quota.Channel) error {
	at := map[inventory.Pair]*quota.Channel{}
	for tpl, chans := range buckets {
		for i := range chans {
			at[inventory.Pair{Template: tpl, Channel: chans[i].Name}] = &chans[i]
		}
	}
	var failed error
	complete := s.onEachPeer(ctx, "counters for the quota rule", func(ctx context.Context, p *peer) error {
		cs, err := inventory.ReadCounters(ctx, p.DB, p.Name, false)
		if err == nil && cs.At.File == "" {
			err = errors.New("it has no checkpoint yet: its cdc has not counted its coupons")
		}
		if err != nil {
			failed = fmt.Errorf("source %s: %w", p.Name, err)
			return err
		}
		for pair, r := range cs.Rows {
			if c := at[pair]; c != nil {
				c.AddCounts(r.Counts)
			}
		}
		return nil
	})
	if !complete {
		return failed
	}
	return nil
}
