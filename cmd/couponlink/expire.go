package main

import (
	"context"
	"fmt"
	"io"

	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/internal/settings"
)

// expireSettings are couponlink expire's flags.
type expireSettings struct {
	db      settings.Database
	logging settings.Logging
	limit   *int
}

func expireFlags(stderr io.Writer) (*settings.Flags, *expireSettings) {
	f := newFlags("expire", "Runs one expiry sweep now: every AVAILABLE coupon past its expires_at becomes EXPIRED, with its inventory_flow row.", stderr)
	o := &expireSettings{}
	f.Add(&o.db, &o.logging)
	o.limit = f.EnvInt("limit", "COUPONLINK_EXPIRE_LIMIT", 0, "expire at most this many coupons (0: all that are due)")
	return f, o
}

func runExpire(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, o := expireFlags(stderr)
	if err := f.Parse(args); err != nil {
		return err
	}
	if *o.limit < 0 {
		return fmt.Errorf("-limit must not be negative, got %d", *o.limit)
	}
	db, err := openMySQL(*o.db.DSN, 4)
	if err != nil {
		return err
	}
	defer db.Close()
	store, err := coupon.New(coupon.Config{DB: db, Logger: o.logging.Logger(stderr).With("component", "expire")})
	if err != nil {
		return err
	}
	res, err := store.ExpireDue(ctx, *o.limit)
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
