package coupon

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/couponlink/couponlink/api"
	"github.com/couponlink/couponlink/internal/sqltx"
)

// ClaimRequest asks for one coupon of a template for a user, from a channel's bucket.
type ClaimRequest struct {
	TemplateID int64
	UserID     string
	Channel    string
	RequestID  string // idempotency key of the claim; required
}

// Claim is a claimed coupon.
type Claim = api.Claim

// Validate checks the request's fields.
func (r *ClaimRequest) Validate() error {
	r.UserID, r.Channel, r.RequestID = strings.TrimSpace(r.UserID), strings.TrimSpace(r.Channel), strings.TrimSpace(r.RequestID)
	if r.TemplateID <= 0 {
		return Invalid("template_id", "template_id is required and must be a positive id")
	}
	if err := checkFields(
		textField{Name: "user_id", Value: r.UserID, Max: MaxIDLen},
		textField{Name: "request_id", Value: r.RequestID, Max: MaxRequestLen,
			Why: "a key unique to this claim, so that a retry does not claim twice"},
	); err != nil {
		return err
	}
	if r.Channel == "" {
		return Invalid("channel", "channel is required")
	}
	return validChannel(r.Channel, "channel")
}

// Claim reserves one slot of the channel's bucket and creates the user's
// coupon, in one transaction. The bucket guard `claimed < quota` is checked
// by the UPDATE itself, so no concurrency can over-issue.
func (s *Store) Claim(ctx context.Context, req ClaimRequest) (Claim, error) {
	if err := req.Validate(); err != nil {
		return Claim{}, err
	}
	// No look-up of request_id first: a replay fails the transaction on the
	// unique key (or the per-user limit) and is answered below; the usual
	// claim pays no extra round trip.
	rules, err := s.templateRules(ctx, req.TemplateID)
	if err != nil {
		return Claim{}, err
	}
	if err := s.soldOut.refusal(ctx, req, rules); err != nil {
		return Claim{}, err
	}
	var out Claim
	if s.claims != nil {
		out, err = s.claimCombined(ctx, req, rules)
	} else {
		out, err = s.claimOne(ctx, req, rules)
	}
	s.soldOut.learn(req, err)
	return out, err
}

// claimOne is the single path: one claim, one transaction, written as a
// group of one. The user's count is raised and read in one statement (the
// row lock of (template, user) serialises the user's claims); the bucket's
// guard comes last, so that the hot row is locked for the shortest time.
func (s *Store) claimOne(ctx context.Context, req ClaimRequest, rules templateRules) (Claim, error) {
	c := &claimCall{req: req, rules: rules}
	err := s.retry(ctx, "claim", func() error {
		c.out = newClaim(req, rules, s.clock())
		return sqltx.Run(ctx, s.db, nil, func(tx *sql.Tx) error {
			if err := countClaim(ctx, tx, req, rules); err != nil {
				return err
			}
			err := writeGrants(ctx, tx, req.TemplateID, []*claimCall{c}, map[string]*bucket{req.Channel: {granted: 1}})
			if errors.Is(err, errSlotGuard) {
				return s.noSlot(ctx, tx, req)
			}
			return err
		})
	})
	if err != nil {
		// A concurrent request with the same request_id may have won: its
		// coupon then fails ours with a duplicate key, or counts against the
		// per-user limit or the bucket first. Answer with that coupon.
		if r, found, rerr := s.claimReplay(ctx, req); found || rerr != nil {
			return r, rerr
		}
		return Claim{}, err
	}
	return c.out, nil
}

// countClaim counts the claim against the user's per-user limit: the
// count is raised, and the count it had before decides; a refusal rolls
// the raise back with the transaction. The raise changes the row that
// existed (2 rows affected, whether or not the pool counts found rows) or
// inserts it (1).
func countClaim(ctx context.Context, tx *sql.Tx, req ClaimRequest, rules templateRules) error {
	res, err := addUserClaims(ctx, tx, req.TemplateID, []string{req.UserID}, []int64{1}, false)
	if err != nil {
		return err
	}
	before, err := res.LastInsertId()
	if err != nil {
		return fmt.Errorf("count the user's claims: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("count the user's claims: %w", err)
	}
	return limitRefusal(req, rules, before, n == 2)
}

// writeGrants writes granted claims, once their per-user counts are: the
// coupons, then the buckets' guards (errSlotGuard if one refuses).
func writeGrants(ctx context.Context, tx *sql.Tx, template int64, granted []*claimCall, buckets map[string]*bucket) error {
	if err := insertCoupons(ctx, tx, granted); err != nil {
		return err
	}
	return reserveSlots(ctx, tx, template, buckets)
}

// noSlot tells "no such channel" from "sold out" once the bucket's guard
// refused the slot.
func (s *Store) noSlot(ctx context.Context, tx *sql.Tx, req ClaimRequest) error {
	b := &bucket{}
	err := tx.QueryRowContext(ctx, `SELECT quota, claimed FROM channel_quota WHERE template_id = ? AND channel = ?`,
		req.TemplateID, req.Channel).Scan(&b.quota, &b.claimed)
	if errors.Is(err, sql.ErrNoRows) {
		b = nil
	} else if err != nil {
		return fmt.Errorf("read channel quota: %w", err)
	}
	if err := slotRefusal(req, b); err != nil {
		return err
	}
	return errRaceLost // a slot came free since the guard: claim again
}

// claimReplay finds an earlier claim with the same request_id.
func (s *Store) claimReplay(ctx context.Context, req ClaimRequest) (Claim, bool, error) {
	cs, err := couponsByRequest(ctx, s.db, []any{req.RequestID})
	if err != nil {
		return Claim{}, false, err
	}
	c, found := cs[req.RequestID]
	if !found {
		return Claim{}, false, nil
	}
	out, err := replayAnswer(c, req)
	return out, true, err
}
