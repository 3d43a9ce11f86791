package sink

import "github.com/couponlink/couponlink/quota"

// newRebalancer wires the channel-quota rule (package quota applies it) to
// the sink: the mirror's buckets, the epoch fence, the webhook outbox and
// the Redis keys of the buckets a transfer changed. The rebalance chore
// runs its passes.
func (s *Sink) newRebalancer() (*quota.Rebalancer, error) {
	return quota.NewRebalancer(quota.RebalancerConfig{DB: s.db, Mirror: quotaMirror{s}, Fence: s.fence, Enqueue: s.enqueue,
		Freshen: s.freshen, Logger: s.cfg.Logger.With("component", "rebalance"), Registerer: s.cfg.Registerer, Now: s.cfg.Now})
}
