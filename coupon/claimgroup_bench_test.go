package coupon

import (
	"context"
	"database/sql"
	"fmt"
	"testing"

	"github.com/couponlink/couponlink/internal/testenv"
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
				s.claims = newCombiner[int64](s, 256, &s.claimStats, s.runClaimGroup)
			}
			tpl := groupTemplate(b, s, 100_000_000, 1)
			testenv.RunClients(b, "claims/s", func(i int64) {
				_, err := s.Claim(context.Background(), ClaimRequest{TemplateID: tpl, UserID: fmt.Sprintf("u%d", i),
					Channel: "app", RequestID: fmt.Sprintf("b%d", i)})
				if err != nil {
					b.Fatal(err)
				}
			})
			if combine {
				b.ReportMetric(float64(b.N)/float64(max(s.ClaimGroups(), 1)), "claims/group")
			}
		})
	}
}

// BenchmarkRedeem: redemptions of distinct coupons from 64 goroutines per
// CPU, single path vs the combiner with 1, 2, 4 and 8 lanes. A
// measurement, not a test:
//
//	go test ./coupon/ -run '^$' -bench Redeem -benchtime 20000x
func BenchmarkRedeem(b *testing.B) {
	for _, lanes := range []int{0, 1, 2, 4, 8} {
		b.Run(fmt.Sprintf("lanes=%d", lanes), func(b *testing.B) {
			s, db := groupStore(b)
			tpl := groupTemplate(b, s, int64(b.N), int64(b.N))
			ids := seedCoupons(b, db, tpl, b.N)
			if lanes > 0 {
				s.redemptions, s.redeemLanes = newCombiner[int](s, 256, &s.redeemStats, s.runRedeemGroup), lanes
			}
			testenv.RunClients(b, "redemptions/s", func(i int64) {
				if _, err := s.Redeem(context.Background(), RedeemRequest{UserCouponID: ids[i-1], OrderID: fmt.Sprintf("o%d", i-1)}); err != nil {
					b.Fatal(err)
				}
			})
			if lanes > 0 {
				b.ReportMetric(float64(b.N)/float64(max(s.RedemptionGroups(), 1)), "redemptions/group")
			}
		})
	}
}

// seedCoupons inserts n AVAILABLE coupons of tpl (one statement per
// 1,000) and returns their ids.
func seedCoupons(b *testing.B, db *sql.DB, tpl int64, n int) []int64 {
	b.Helper()
	for done := 0; done < n; done += 1000 {
		if _, err := db.Exec(`INSERT INTO user_coupon (template_id, user_id, channel, status, claimed_at, expires_at)
			SELECT ?, CONCAT('u', seq), 'app', 1, '2030-01-01', '2031-01-01' FROM seq_1_to_`+fmt.Sprint(min(1000, n-done)), tpl); err != nil {
			b.Fatal(err)
		}
	}
	var ids []int64
	rows, err := db.Query(`SELECT id FROM user_coupon WHERE template_id = ? ORDER BY id`, tpl)
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			b.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}
