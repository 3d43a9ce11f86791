package coupon

import (
	"testing"
	"time"

	"github.com/couponlink/couponlink/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The decisions alone, without a database: the rules both write paths ask.

func TestNewClaim(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	req := ClaimRequest{TemplateID: 7, UserID: "u", Channel: "app", RequestID: "r"}
	assert.Equal(t, Claim{TemplateID: 7, UserID: "u", Channel: "app", Status: "AVAILABLE", ClaimedAt: now,
		ExpiresAt: now.Add(time.Hour)}, newClaim(req, templateRules{ValidSeconds: 3600, PerUserLimit: 1}, now))
}

func TestClaimRefusal(t *testing.T) {
	req := ClaimRequest{TemplateID: 7, UserID: "u1", Channel: "app", RequestID: "r"}
	for _, tc := range []struct {
		name    string
		limit   int64
		count   int64
		counted bool
		b       *bucket
		code    Code // "": granted
		message string
	}{
		{"first claim", 1, 0, false, &bucket{quota: 10}, "", ""},
		{"under the limit", 3, 2, true, &bucket{quota: 10, claimed: 4}, "", ""},
		{"at the limit", 2, 2, true, &bucket{quota: 10}, api.CodeLimitReached,
			"user u1 has already claimed 2 coupon(s) of template 7, the per-user limit"},
		{"over the limit", 1, 5, true, &bucket{quota: 10}, api.CodeLimitReached,
			"user u1 has already claimed 1 coupon(s) of template 7, the per-user limit"},
		{"a limit of 0 and no row: the first claim counts", 0, 0, false, &bucket{quota: 10}, "", ""},
		{"a limit of 0 and a row", 0, 0, true, &bucket{quota: 10}, api.CodeLimitReached,
			"user u1 has already claimed 0 coupon(s) of template 7, the per-user limit"},
		{"the limit before the bucket", 1, 1, true, nil, api.CodeLimitReached,
			"user u1 has already claimed 1 coupon(s) of template 7, the per-user limit"},
		{"no such channel", 1, 0, false, nil, api.CodeInvalidArgument, `template 7 has no channel "app"`},
		{"the last slot", 1, 0, false, &bucket{quota: 10, claimed: 9}, "", ""},
		{"sold out", 1, 0, false, &bucket{quota: 10, claimed: 10}, api.CodeSoldOut,
			`channel "app" of template 7 is sold out (10 of 10 claimed)`},
		{"the last slot given out by the transaction", 1, 0, false, &bucket{quota: 10, claimed: 8, granted: 1}, "", ""},
		{"sold out by the transaction", 1, 0, false, &bucket{quota: 10, claimed: 8, granted: 2}, api.CodeSoldOut,
			`channel "app" of template 7 is sold out (10 of 10 claimed)`},
		{"an empty bucket", 1, 0, false, &bucket{}, api.CodeSoldOut, `channel "app" of template 7 is sold out (0 of 0 claimed)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := claimRefusal(req, templateRules{ValidSeconds: 60, PerUserLimit: tc.limit}, tc.count, tc.counted, tc.b)
			if tc.code == "" {
				require.NoError(t, err)
				return
			}
			e, ok := AsError(err)
			require.True(t, ok, "a domain error: %v", err)
			assert.Equal(t, tc.code, e.Code)
			assert.Equal(t, tc.message, e.Message)
			if tc.code == api.CodeInvalidArgument {
				assert.Equal(t, "channel", e.Field)
			}
		})
	}
}

func TestReplayAnswer(t *testing.T) {
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	c := couponRow{ID: 5, TemplateID: 7, UserID: "u1", Channel: "app", Status: Used, ClaimedAt: at, ExpiresAt: at.Add(time.Hour)}
	got, err := replayAnswer(c, ClaimRequest{TemplateID: 7, UserID: "u1", Channel: "app", RequestID: "r"})
	require.NoError(t, err)
	assert.Equal(t, Claim{UserCouponID: 5, TemplateID: 7, UserID: "u1", Channel: "app", Status: "USED", ClaimedAt: at,
		ExpiresAt: at.Add(time.Hour), Replayed: true}, got)
	for _, req := range []ClaimRequest{
		{TemplateID: 8, UserID: "u1", Channel: "app", RequestID: "r"},
		{TemplateID: 7, UserID: "u2", Channel: "app", RequestID: "r"},
		{TemplateID: 7, UserID: "u1", Channel: "web", RequestID: "r"},
	} {
		_, err := replayAnswer(c, req)
		e, ok := AsError(err)
		require.True(t, ok, "%+v", req)
		assert.Equal(t, api.CodeIdempotencyConflict, e.Code, "%+v", req)
		assert.Equal(t, `request_id "r" was already used for another claim (template 7, user u1, channel app); use a new request_id`, e.Message)
	}
}

func TestRedemptionDecision(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	fresh := couponRow{ID: 5, TemplateID: 7, Channel: "app", Status: Available, Version: 1, ExpiresAt: now.Add(time.Hour)}
	with := func(f func(*couponRow)) *couponRow {
		c := fresh
		f(&c)
		return &c
	}
	mine := keyedRedemption{Redemption: Redemption{RedemptionID: 9, UserCouponID: 5, OrderID: "o1", RedeemedAt: now,
		Status: "USED", Replayed: true}, coupon: Used, couponOrder: "o1"}
	refunded := mine
	refunded.coupon, refunded.couponOrder = Available, ""
	refunded.refund = &Refund{Mode: RefundRestore, RefundedAt: now}
	taken := mine
	taken.couponOrder = "o2"
	voided := mine
	voided.coupon = Returned
	req := RedeemRequest{UserCouponID: 5, OrderID: "o1"}
	for _, tc := range []struct {
		name    string
		c       *couponRow
		k       *keyedRedemption
		write   bool
		code    Code   // "": answered without an error
		message string // the error's
	}{
		{"redeemable", &fresh, nil, true, "", ""},
		{"no such coupon", nil, nil, false, api.CodeNotFound, "user coupon 5 does not exist"},
		{"no such coupon, whatever the key", nil, &mine, false, api.CodeNotFound, "user coupon 5 does not exist"},
		{"used by another order", with(func(c *couponRow) { c.Status = Used }), nil, false, api.CodeAlreadyUsed,
			"coupon 5 was already redeemed by another order"},
		{"expired", with(func(c *couponRow) { c.Status = Expired }), nil, false, api.CodeIllegalTransition,
			"cannot redeem a coupon that is EXPIRED: EXPIRED -> USED is not a legal transition; nothing was written"},
		{"returned", with(func(c *couponRow) { c.Status = Returned }), nil, false, api.CodeIllegalTransition,
			"cannot redeem a coupon that is RETURNED: RETURNED -> USED is not a legal transition; nothing was written"},
		{"past expires_at", with(func(c *couponRow) { c.ExpiresAt = now }), nil, false, api.CodeCouponExpired,
			"coupon 5 expired at 2030-01-01T00:00:00Z; it can no longer be redeemed"},
		{"the same redemption again", with(func(c *couponRow) { c.Status = Used }), &mine, false, "", ""},
		{"the key replays even on a redeemable coupon", &fresh, &refunded, false, api.CodeAlreadyRefunded,
			`order o1 redeemed coupon 5 (redemption 9) and that redemption was refunded with mode "restore" at 2030-01-01T00:00:00Z; ` +
				"a refunded redemption is final and is not redeemed again: to redeem the coupon again, use a new order_id"},
		{"the key's coupon now used by another order", with(func(c *couponRow) { c.Status = Used }), &taken, false, api.CodeAlreadyUsed,
			"coupon 5 is now redeemed by another order"},
		{"the key's coupon voided since", with(func(c *couponRow) { c.Status = Returned }), &voided, false, api.CodeIllegalTransition,
			"cannot redeem a coupon that is RETURNED: RETURNED -> USED is not a legal transition; nothing was written"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, write, err := redemptionDecision(req, tc.c, tc.k, now)
			assert.Equal(t, tc.write, write)
			switch {
			case tc.write:
				require.NoError(t, err)
				assert.Equal(t, Redemption{UserCouponID: 5, OrderID: "o1", RedeemedAt: now, Status: "USED"}, out)
			case tc.code == "":
				require.NoError(t, err)
				assert.Equal(t, tc.k.Redemption, out, "the key's redemption, replayed")
			default:
				e, ok := AsError(err)
				require.True(t, ok, "a domain error: %v", err)
				assert.Equal(t, tc.code, e.Code)
				assert.Equal(t, tc.message, e.Message)
				assert.Zero(t, out)
			}
			if tc.c != nil {
				assert.Equal(t, tc.write, redeemable(*tc.c, now) && tc.k == nil, "redeemable agrees")
			}
		})
	}
}
