package coupon

import (
	"time"

	"github.com/couponlink/couponlink/api"
)

// The decisions of the write path, apart from its SQL: may a claim be
// granted against the user's count and its channel's bucket, may a coupon
// be redeemed by an order. The single path (one request, one transaction)
// and the combiners' group transactions ask these functions and write
// their answers with the same writers (writers.go), so that a rule and its
// message exist once. A grant still has to pass the database's guards when
// it is written: the bucket's conditional UPDATE, the coupon's version.

// newClaim is the coupon a claim of req is granted at now.
func newClaim(req ClaimRequest, rules templateRules, now time.Time) Claim {
	return Claim{TemplateID: req.TemplateID, UserID: req.UserID, Channel: req.Channel, Status: Available.String(),
		ClaimedAt: now, ExpiresAt: now.Add(Seconds(rules.ValidSeconds))}
}

// claimRefusal is why a claim of req is refused (nil: it is granted): the
// per-user limit first, then the bucket. count is the user's claims of the
// template so far (counted: the user has a user_claim row), b the
// channel's bucket (nil: the template has no such channel).
func claimRefusal(req ClaimRequest, rules templateRules, count int64, counted bool, b *bucket) error {
	if err := limitRefusal(req, rules, count, counted); err != nil {
		return err
	}
	return slotRefusal(req, b)
}

// limitRefusal is the per-user limit: a user who has claimed the
// template's per_user_limit coupons claims no more. A user without a
// user_claim row has claimed none.
func limitRefusal(req ClaimRequest, rules templateRules, count int64, counted bool) error {
	if !counted || count < rules.PerUserLimit {
		return nil
	}
	return conflictf(api.CodeLimitReached, "user %s has already claimed %d coupon(s) of template %d, the per-user limit",
		req.UserID, rules.PerUserLimit, req.TemplateID)
}

// bucket is one channel's row of channel_quota as a claim finds it.
type bucket struct {
	quota, claimed int64
	granted        int64 // slots the transaction gives out in this bucket, not yet written
}

// slotRefusal is the bucket rule: a channel the template lacks is an
// invalid argument, a bucket whose slots are all claimed (or given out by
// this transaction) is sold out.
func slotRefusal(req ClaimRequest, b *bucket) error {
	switch {
	case b == nil:
		return Invalid("channel", "template %d has no channel %q", req.TemplateID, req.Channel)
	case b.claimed+b.granted < b.quota:
		return nil
	}
	return conflictf(api.CodeSoldOut, "channel %q of template %d is sold out (%d of %d claimed)",
		req.Channel, req.TemplateID, b.claimed+b.granted, b.quota)
}

// replayAnswer answers a request whose request_id already has coupon c.
func replayAnswer(c couponRow, req ClaimRequest) (Claim, error) {
	if c.TemplateID != req.TemplateID || c.UserID != req.UserID || c.Channel != req.Channel {
		return Claim{}, conflictf(api.CodeIdempotencyConflict,
			"request_id %q was already used for another claim (template %d, user %s, channel %s); use a new request_id",
			req.RequestID, c.TemplateID, c.UserID, c.Channel)
	}
	return Claim{UserCouponID: c.ID, TemplateID: c.TemplateID, UserID: c.UserID, Channel: c.Channel,
		Status: c.Status.String(), ClaimedAt: c.ClaimedAt, ExpiresAt: c.ExpiresAt, Replayed: true}, nil
}

// redemptionDecision answers a redemption of coupon c (nil: no such
// coupon) by req at now. k is the redemption of req's (order, coupon) key
// (nil: none, or not looked up): a key with a redemption is answered as
// that redemption's replay, whatever the coupon's state; else only a
// redeemable coupon is redeemed. write: out is the redemption to write
// (its id to come); else out and err are the answer.
func redemptionDecision(req RedeemRequest, c *couponRow, k *keyedRedemption, now time.Time) (out Redemption, write bool, err error) {
	switch {
	case c == nil:
		return Redemption{}, false, couponNotFound(req.UserCouponID)
	case k != nil:
		out, err = k.replay()
		return out, false, err
	}
	if err := redeemRefusal(*c, now); err != nil {
		return Redemption{}, false, err
	}
	return Redemption{UserCouponID: c.ID, OrderID: req.OrderID, RedeemedAt: now, Status: Used.String()}, true, nil
}

// redeemable is an AVAILABLE coupon before its expiry. Any other coupon is
// answered by its key's redemption if there is one (a replay), else
// refused by redeemRefusal.
func redeemable(c couponRow, now time.Time) bool { return redeemRefusal(c, now) == nil }

// redeemRefusal is why coupon c cannot be redeemed at now (nil: it can).
func redeemRefusal(c couponRow, now time.Time) error {
	switch {
	case c.Status == Used:
		return conflictf(api.CodeAlreadyUsed, "coupon %d was already redeemed by another order", c.ID)
	case c.Status != Available:
		return IllegalTransition(c.Status, Used, ActionRedeem)
	case !now.Before(c.ExpiresAt):
		return conflictf(api.CodeCouponExpired, "coupon %d expired at %s; it can no longer be redeemed",
			c.ID, c.ExpiresAt.Format(time.RFC3339))
	}
	return nil
}

// replay answers a redemption request whose key is taken: with the
// redemption while it is in effect (the coupon USED by it), else refused.
// A refunded redemption is final, so that a late retry of the original
// request never consumes the coupon again.
func (k keyedRedemption) replay() (Redemption, error) {
	switch {
	case k.refund != nil:
		return Redemption{}, conflictf(api.CodeAlreadyRefunded,
			"order %s redeemed coupon %d (redemption %d) and that redemption was refunded with mode %q at %s; "+
				"a refunded redemption is final and is not redeemed again: to redeem the coupon again, use a new order_id",
			k.OrderID, k.UserCouponID, k.RedemptionID, k.refund.Mode, k.refund.RefundedAt.Format(time.RFC3339Nano))
	case k.coupon == Used && k.couponOrder == k.OrderID:
		return k.Redemption, nil
	case k.coupon == Used:
		// no refund row, yet another order holds it: changed outside the API
		return Redemption{}, conflictf(api.CodeAlreadyUsed, "coupon %d is now redeemed by another order", k.UserCouponID)
	}
	return Redemption{}, IllegalTransition(k.coupon, Used, ActionRedeem)
}
