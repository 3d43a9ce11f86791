package coupon

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
)

// BenchmarkClaimHotBucket: claims of one (template, channel) bucket from
// 64 goroutines per CPU, single path vs the
// combiner, on the same database server. A measurement, not a test:
//
//	go test ./coupon/ -run '^$' -bench ClaimHotBucket -benchtime 3s
func BenchmarkClaimHotBucket(b *testing.B) {
	for _, combine := range []bool{false, true} {
		b.Run(fmt.Sprintf("combine=%v", combine), func(b *testing.B) {
			s, _ := groupStore(b)
			s.claims = nil
			if combine {
				s.claims = newCombiner[bucketKey](256, &s.claimStats, s.runClaimGroup)
			}
			tpl := groupTemplate(b, s, 100_000_000, 1)
			var seq atomic.Int64
			b.SetParallelism(64)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := seq.Add(1)
					_, err := s.Claim(context.Background(), ClaimRequest{TemplateID: tpl, UserID: fmt.Sprintf("u%d", i),
						Channel: "app", RequestID: fmt.Sprintf("b%d", i)})
					if err != nil {
						b.Fatal(err)
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "claims/s")
			if combine {
				b.ReportMetric(float64(b.N)/float64(max(s.ClaimGroups(), 1)), "claims/group")
			}
		})
	}
}
