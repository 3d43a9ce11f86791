package coupon

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/couponlink/couponlink/internal/sqltx"
)

// ExpireBatch is how many coupons one sweep transaction expires.
const ExpireBatch = 500

// ExpireResult says what a sweep did (the API answers it as an
// api.ExpireResult).
type ExpireResult struct {
	Expired      int
	Transactions int
	Duration     time.Duration
	More         bool // stopped at the limit with more due
}

// ExpireDue moves AVAILABLE coupons past expires_at to EXPIRED, at most
// limit of them (0: all that are due), in transactions of ExpireBatch
// coupons; each coupon gets its inventory_flow row in the transaction that
// expires it. Rows another transaction holds are skipped, not waited for:
// a concurrent redemption wins and the sweep moves on.
func (s *Store) ExpireDue(ctx context.Context, limit int) (ExpireResult, error) {
	start := time.Now()
	var res ExpireResult
	for limit == 0 || res.Expired < limit {
		n := ExpireBatch
		if limit > 0 && limit-res.Expired < n {
			n = limit - res.Expired
		}
		got, err := s.expireBatch(ctx, n)
		if err != nil {
			return res, err
		}
		if got == 0 {
			break
		}
		res.Expired += got
		res.Transactions++
		if got < n {
			break
		}
	}
	if limit > 0 && res.Expired >= limit {
		var one int
		err := s.db.QueryRowContext(ctx, `SELECT 1 FROM user_coupon WHERE status = ? AND expires_at <= ? LIMIT 1`,
			Available, s.clock()).Scan(&one)
		res.More = err == nil
	}
	res.Duration = time.Since(start)
	return res, nil
}

func (s *Store) expireBatch(ctx context.Context, n int) (int, error) {
	var got int
	err := s.retry(ctx, "expiry sweep", func() error {
		got = 0
		now := s.clock()
		return sqltx.Run(ctx, s.db, nil, func(tx *sql.Tx) error {
			due, err := couponsWhere(ctx, tx, `status = ? AND expires_at <= ? ORDER BY expires_at LIMIT ? FOR UPDATE SKIP LOCKED`,
				Available, now, n)
			if err != nil {
				return fmt.Errorf("find due coupons: %w", err)
			}
			if len(due) == 0 {
				return nil
			}
			flows := make([]flowRow, len(due))
			for i, c := range due {
				// seq = the version it expires from: once per state change, even
				// for a coupon a legacy writer revived after an earlier expiry
				flows[i] = flowRow{Coupon: c, Kind: FlowExpire, Seq: c.Version, From: Available, To: Expired, CreatedAt: now}
			}
			if _, err := insertFlows(ctx, tx, flows...); err != nil {
				return fmt.Errorf("insert expiry flows: %w", err)
			}
			// the guards cannot refuse under FOR UPDATE; if they did, nothing is half-applied
			if err := moveCoupons(ctx, tx, Expired, due, ""); err != nil {
				return err
			}
			got = len(due)
			return nil
		})
	})
	return got, err
}
