package httpapi

import (
	"context"
	"time"

	"github.com/couponlink/couponlink/coupon"
)

// Sweep runs one expiry sweep (at most limit coupons; 0: all due) and counts it.
func (s *Server) Sweep(ctx context.Context, limit int) (coupon.ExpireResult, error) {
	res, err := s.store.ExpireDue(ctx, limit)
	if err != nil {
		s.metrics.sweeps.WithLabelValues("error").Inc()
	} else {
		s.metrics.sweeps.WithLabelValues("ok").Inc()
	}
	s.metrics.transitions.WithLabelValues(string(coupon.ActionExpire)).Add(float64(res.Expired))
	return res, err
}

// RunSweeps runs an expiry sweep every interval until ctx ends. A failed
// sweep is logged and tried again at the next tick.
func (s *Server) RunSweeps(ctx context.Context, every time.Duration) error {
	log := s.cfg.Logger.With("component", "expire")
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		res, err := s.Sweep(ctx, 0)
		switch {
		case err != nil && ctx.Err() == nil:
			log.Error("expiry sweep failed", "err", err)
		case res.Expired > 0:
			log.Info("expiry sweep", "expired", res.Expired, "transactions", res.Transactions, "took", res.Duration)
		}
	}
}
