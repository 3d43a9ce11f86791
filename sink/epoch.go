package sink

// LeaderEpoch is the checkpoint's epoch this sink leads under, 0 while it
// does not lead (a standby, or between a lost lead and the next start). It
// is safe to call from any goroutine: the event sinks' leases follow it
// (webhook.Config.Epoch, webhook.RelayConfig.Epoch).
func (s *Sink) LeaderEpoch() int64 {
	if p := s.prog.Load(); p != nil {
		return p.epoch
	}
	return 0
}
