package coupon

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

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
type Claim struct {
	UserCouponID int64     `json:"user_coupon_id"`
	TemplateID   int64     `json:"template_id"`
	UserID       string    `json:"user_id"`
	Channel      string    `json:"channel"`
	Status       string    `json:"status"`
	ClaimedAt    time.Time `json:"claimed_at"`
	ExpiresAt    time.Time `json:"expires_at"`
	// Replayed is true when the request_id was seen before: nothing new was written.
	Replayed bool `json:"replayed"`
}

// Validate checks the request's fields.
func (r *ClaimRequest) Validate() error {
	r.UserID, r.Channel, r.RequestID = strings.TrimSpace(r.UserID), strings.TrimSpace(r.Channel), strings.TrimSpace(r.RequestID)
	switch {
	case r.TemplateID <= 0:
		return Invalid("template_id", "template_id is required and must be a positive id")
	case r.UserID == "":
		return Invalid("user_id", "user_id is required")
	case len(r.UserID) > MaxIDLen:
		return Invalid("user_id", "user_id is longer than %d bytes", MaxIDLen)
	case r.Channel == "":
		return Invalid("channel", "channel is required")
	case r.RequestID == "":
		return Invalid("request_id", "request_id is required: a key unique to this claim, so that a retry does not claim twice")
	case len(r.RequestID) > MaxRequestLen:
		return Invalid("request_id", "request_id is longer than %d bytes", MaxRequestLen)
	}
	if err := CheckText(false, "user_id", r.UserID, "request_id", r.RequestID); err != nil {
		return err
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
	if s.claims != nil {
		return s.claimCombined(ctx, req, rules)
	}
	return s.claimOne(ctx, req, rules)
}

// claimOne is the single path: one claim, one transaction.
func (s *Store) claimOne(ctx context.Context, req ClaimRequest, rules templateRules) (Claim, error) {
	var out Claim
	err := s.retry(ctx, "claim", func() error {
		now := s.clock()
		out = Claim{TemplateID: req.TemplateID, UserID: req.UserID, Channel: req.Channel, Status: Available.String(),
			ClaimedAt: now, ExpiresAt: now.Add(Seconds(rules.ValidSeconds))}
		return sqltx.Run(ctx, s.db, nil, func(tx *sql.Tx) error {
			// The per-user limit: one row lock per (template, user). A refusal
			// leaves the row as it is and marks itself with LAST_INSERT_ID(claimed),
			// which is at least 1; a counted claim (insert or +1) reports 0. Rows
			// affected cannot tell them apart: with clientFoundRows the
			// unchanged row counts 1, like an insert.
			res, err := tx.ExecContext(ctx, `INSERT INTO user_claim (template_id, user_id, claimed) VALUES (?, ?, 1)
				ON DUPLICATE KEY UPDATE claimed = IF(claimed < ?, claimed + 1, LAST_INSERT_ID(claimed))`,
				req.TemplateID, req.UserID, rules.PerUserLimit)
			if err != nil {
				return fmt.Errorf("count the user's claims: %w", err)
			}
			refused, err := res.LastInsertId()
			if err != nil {
				return fmt.Errorf("count the user's claims: %w", err)
			}
			if refused > 0 {
				return limitReached(req, rules)
			}
			res, err = tx.ExecContext(ctx, `INSERT INTO user_coupon
				(template_id, user_id, channel, status, claimed_at, expires_at, request_id) VALUES (?, ?, ?, ?, ?, ?, ?)`,
				req.TemplateID, req.UserID, req.Channel, Available, out.ClaimedAt, out.ExpiresAt, req.RequestID)
			if err != nil {
				return err
			}
			if out.UserCouponID, err = res.LastInsertId(); err != nil {
				return err
			}
			// the bucket guard, last: the hot row is locked for the shortest time
			res, err = tx.ExecContext(ctx, `UPDATE channel_quota SET claimed = claimed + 1
				WHERE template_id = ? AND channel = ? AND claimed < quota`, req.TemplateID, req.Channel)
			if err != nil {
				return fmt.Errorf("reserve a slot: %w", err)
			}
			if n, _ := res.RowsAffected(); n == 0 {
				return s.noSlot(ctx, tx, req)
			}
			return nil
		})
	})
	if err != nil {
		// A concurrent request with the same request_id may have won: its
		// coupon then fails ours with a duplicate key, or counts against the
		// per-user limit or the bucket first. Answer with that coupon.
		if c, found, rerr := s.claimReplay(ctx, req); found || rerr != nil {
			return c, rerr
		}
		return Claim{}, err
	}
	return out, nil
}

// noSlot tells "no such channel" from "sold out".
func (s *Store) noSlot(ctx context.Context, tx *sql.Tx, req ClaimRequest) error {
	var quota, claimed int64
	err := tx.QueryRowContext(ctx, `SELECT quota, claimed FROM channel_quota WHERE template_id = ? AND channel = ?`,
		req.TemplateID, req.Channel).Scan(&quota, &claimed)
	if errors.Is(err, sql.ErrNoRows) {
		return Invalid("channel", "template %d has no channel %q", req.TemplateID, req.Channel)
	}
	if err != nil {
		return fmt.Errorf("read channel quota: %w", err)
	}
	return soldOut(req, claimed, quota)
}

func soldOut(req ClaimRequest, claimed, quota int64) error {
	return conflictf(CodeSoldOut, "channel %q of template %d is sold out (%d of %d claimed)", req.Channel, req.TemplateID, claimed, quota)
}

func limitReached(req ClaimRequest, rules templateRules) error {
	return conflictf(CodeLimitReached, "user %s has already claimed %d coupon(s) of template %d, the per-user limit",
		req.UserID, rules.PerUserLimit, req.TemplateID)
}

// claimReplay finds an earlier claim with the same request_id.
func (s *Store) claimReplay(ctx context.Context, req ClaimRequest) (Claim, bool, error) {
	c, err := scanCoupon(s.db.QueryRowContext(ctx, `SELECT `+couponColumns+` FROM user_coupon WHERE request_id = ?`, req.RequestID))
	if errors.Is(err, sql.ErrNoRows) {
		return Claim{}, false, nil
	}
	if err != nil {
		return Claim{}, false, fmt.Errorf("look up request_id: %w", err)
	}
	out, err := replayAnswer(c, req)
	return out, true, err
}

// replayAnswer answers a request whose request_id already has coupon c.
func replayAnswer(c couponRow, req ClaimRequest) (Claim, error) {
	if c.TemplateID != req.TemplateID || c.UserID != req.UserID || c.Channel != req.Channel {
		return Claim{}, conflictf(CodeIdempotencyConflict,
			"request_id %q was already used for another claim (template %d, user %s, channel %s); use a new request_id",
			req.RequestID, c.TemplateID, c.UserID, c.Channel)
	}
	return Claim{UserCouponID: c.ID, TemplateID: c.TemplateID, UserID: c.UserID, Channel: c.Channel,
		Status: c.Status.String(), ClaimedAt: c.ClaimedAt, ExpiresAt: c.ExpiresAt, Replayed: true}, nil
}
