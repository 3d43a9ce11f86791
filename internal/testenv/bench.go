package testenv

import (
	"sync/atomic"
	"testing"
)

// RunClients runs op b.N times from 64 goroutines per GOMAXPROCS (many
// clients at once, as a flash sale has them), each call with its own
// number from 1, so that every request can be a new user and request id,
// and reports the rate as per (e.g. "claims/s"). The timer starts here.
func RunClients(b *testing.B, per string, op func(i int64)) {
	var seq atomic.Int64
	b.SetParallelism(64)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			op(seq.Add(1))
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), per)
}
