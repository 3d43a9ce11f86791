package coupon

import (
	"context"
	"fmt"
	"testing"

	"github.com/couponlink/couponlink/internal/testenv"
)

// BenchmarkSoldOutRefusals: claims of new users on a sold-out bucket from
// 64 goroutines per CPU, the store alone (no HTTP), with the sold-out
// memory on and off, on the single path and with the claim combiner. A
// measurement, not a test:
//
//	go test ./coupon/ -run '^$' -bench SoldOutRefusals -benchtime 20000x
func BenchmarkSoldOutRefusals(b *testing.B) {
	for _, combine := range []bool{false, true} {
		for _, memory := range []bool{false, true} {
			b.Run(fmt.Sprintf("combine=%v/memory=%v", combine, memory), func(b *testing.B) {
				s, _ := groupStore(b)
				if combine {
					s.claims = newCombiner[int64](s, 256, &s.claimStats, s.runClaimGroup)
				}
				if memory {
					s.soldOut = newSoldOutMemory(s, 256)
				}
				tpl := groupTemplate(b, s, 1, 1)
				if _, err := s.Claim(context.Background(), ClaimRequest{TemplateID: tpl, UserID: "u", Channel: "app", RequestID: "r"}); err != nil {
					b.Fatal(err)
				}
				testenv.RunClients(b, "refusals/s", func(i int64) {
					_, err := s.Claim(context.Background(), ClaimRequest{TemplateID: tpl, UserID: fmt.Sprintf("u%d", i),
						Channel: "app", RequestID: fmt.Sprintf("b%d", i)})
					if e, ok := AsError(err); !ok || e.Code != "sold_out" {
						b.Fatalf("claim %d: %v, want sold_out", i, err)
					}
				})
			})
		}
	}
}
