package main

import (
	"context"
	"fmt"
	"io"

	"github.com/couponlink/couponlink/coupon"
)

func runExpire(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newFlags("expire", "Runs one expiry sweep now: every AVAILABLE coupon past its expires_at becomes EXPIRED, with its inventory_flow row.", stderr)
	dsn := f.dsn()
	limit := f.int("limit", "COUPONLINK_EXPIRE_LIMIT", 0, "expire at most this many coupons (0: all that are due)")
	level := f.logLevel()
	if err := f.parse(args); err != nil {
		return err
	}
	if *limit < 0 {
		return fmt.Errorf("-limit must not be negative, got %d", *limit)
	}
	db, err := openMySQL(*dsn, 4)
	if err != nil {
		return err
	}
	defer db.Close()
	store, err := coupon.New(coupon.Config{DB: db, Logger: newLogger(stderr, *level).With("component", "expire")})
	if err != nil {
		return err
	}
	res, err := store.ExpireDue(ctx, *limit)
	if err != nil {
		return fmt.Errorf("expiry sweep (expired %d before the error): %w", res.Expired, err)
	}
	more := ""
	if res.More {
		more = "; more are due, run again"
	}
	fmt.Fprintf(stdout, "expired %d coupon(s) in %d transaction(s), %s%s\n", res.Expired, res.Transactions, res.Duration.Round(1e6), more)
	return nil
}
