package coupon

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/couponlink/couponlink/api"
	"github.com/couponlink/couponlink/internal/sqltx"
)

// MaxVoidBatch is the most coupons one void request may name.
const MaxVoidBatch = 1000

// VoidRequest is an operator's batch void of AVAILABLE coupons.
type VoidRequest struct {
	UserCouponIDs []int64
	Reason        string
	Operator      string
	RequestID     string
	// Identity is the name of the token that sent the request ("" for
	// none): with one, the rows record it as the operator and Operator,
	// validated as sent, as the one it voids for (OnBehalfOf).
	Identity string
	// OnBehalfOf is set by Void from Operator and Identity (Acting).
	OnBehalfOf string
}

// Results of one coupon in a void batch.
const (
	VoidVoided            = "voided"
	VoidAlreadyVoided     = "already_voided"
	VoidIllegalTransition = "illegal_transition"
	VoidNotFound          = "not_found"
)

// VoidResult is what happened to one coupon of a batch.
type VoidResult = api.VoidResult

// Validate checks the request's fields.
func (r *VoidRequest) Validate() error {
	r.Reason, r.Operator, r.RequestID = strings.TrimSpace(r.Reason), strings.TrimSpace(r.Operator), strings.TrimSpace(r.RequestID)
	switch {
	case len(r.UserCouponIDs) == 0:
		return Invalid("user_coupon_ids", "user_coupon_ids is required: the coupons to void")
	case len(r.UserCouponIDs) > MaxVoidBatch:
		return Invalid("user_coupon_ids", "at most %d coupons per request, got %d", MaxVoidBatch, len(r.UserCouponIDs))
	}
	if err := checkFields(
		textField{Name: "reason", Value: r.Reason, Max: MaxReasonLen, Why: "why the coupons are voided", Free: true},
		textField{Name: "operator", Value: r.Operator, Max: MaxIDLen, Why: "who voids the coupons"},
		textField{Name: "request_id", Value: r.RequestID, Max: MaxRequestLen, Why: "a key unique to this batch"},
	); err != nil {
		return err
	}
	seen := make(map[int64]bool, len(r.UserCouponIDs))
	for _, id := range r.UserCouponIDs {
		if id <= 0 {
			return Invalid("user_coupon_ids", "user coupon id %d is not a positive id", id)
		}
		if seen[id] {
			return Invalid("user_coupon_ids", "user coupon id %d is listed twice", id)
		}
		seen[id] = true
	}
	return nil
}

func (r *VoidRequest) payloadHash() string {
	ids := slices.Clone(r.UserCouponIDs)
	slices.Sort(ids)
	h := sha256.New()
	for _, id := range ids {
		h.Write([]byte(strconv.FormatInt(id, 10) + ","))
	}
	h.Write([]byte("\x00" + r.Reason + "\x00" + r.Operator))
	if r.OnBehalfOf != "" {
		h.Write([]byte("\x00" + r.OnBehalfOf))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Void moves each AVAILABLE coupon of the batch to RETURNED, each in its own
// transaction with its inventory_flow row (kind void, the reason and the
// operator, and the one it voids for). The request is validated as sent,
// before its Identity applies. A replay of the same request_id answers
// the same results.
func (s *Store) Void(ctx context.Context, req VoidRequest) ([]VoidResult, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	req.Operator, req.OnBehalfOf = Acting(req.Operator, req.Identity)
	hash := req.payloadHash()
	if _, err := s.db.ExecContext(ctx, `INSERT IGNORE INTO void_request (request_id, payload_hash, reason, operator, on_behalf_of, created_at)
		VALUES (?, ?, ?, ?, ?, ?)`, req.RequestID, hash, req.Reason, req.Operator, nullString(req.OnBehalfOf), s.clock()); err != nil {
		return nil, fmt.Errorf("record void request: %w", err)
	}
	var stored string
	if err := s.db.QueryRowContext(ctx, `SELECT payload_hash FROM void_request WHERE request_id = ?`, req.RequestID).Scan(&stored); err != nil {
		return nil, fmt.Errorf("read void request: %w", err)
	}
	if stored != hash {
		return nil, conflictf(api.CodeIdempotencyConflict,
			"request_id %q was already used for a void with other coupons, reason or operator; use a new request_id", req.RequestID)
	}
	out := make([]VoidResult, 0, len(req.UserCouponIDs))
	for _, id := range req.UserCouponIDs {
		r, err := s.voidOne(ctx, req, id)
		if err != nil {
			return out, fmt.Errorf("void coupon %d (the %d before it are done; retry the same request to finish): %w", id, len(out), err)
		}
		out = append(out, r)
	}
	return out, nil
}

func (s *Store) voidOne(ctx context.Context, req VoidRequest, id int64) (VoidResult, error) {
	var out VoidResult
	err := s.retry(ctx, "void", func() error {
		out = VoidResult{UserCouponID: id}
		c, err := loadCoupon(ctx, s.db, id)
		if e, ok := AsError(err); ok && e.Code == api.CodeNotFound {
			out.Result, out.Message = VoidNotFound, e.Message
			return nil
		}
		if err != nil {
			return err
		}
		out.Status = c.Status.String()
		if c.Status == Returned {
			var reqID sql.NullString
			err := s.db.QueryRowContext(ctx, `SELECT request_id FROM inventory_flow WHERE user_coupon_id = ? AND kind = ? AND seq = 0`,
				id, FlowVoid).Scan(&reqID)
			switch {
			case err == nil && reqID.String == req.RequestID:
				out.Result, out.Replayed = VoidVoided, true // a replay of this very request
				return nil
			case err == nil:
				out.Result, out.Message = VoidAlreadyVoided, "voided earlier by request "+reqID.String
				return nil
			case !errors.Is(err, sql.ErrNoRows):
				return fmt.Errorf("look up void of coupon %d: %w", id, err)
			}
		}
		if _, err := Check(ActionVoid, c.Status); err != nil {
			e, _ := AsError(err)
			out.Result, out.Message = VoidIllegalTransition, e.Message
			return nil
		}
		err = sqltx.Run(ctx, s.db, nil, func(tx *sql.Tx) error {
			_, err := insertFlow(ctx, tx, flowRow{Coupon: c, Kind: FlowVoid, From: Available, To: Returned,
				Reason: req.Reason, Operator: req.Operator, OnBehalfOf: req.OnBehalfOf, RequestID: req.RequestID, CreatedAt: s.clock()})
			if isDuplicate(err) {
				return errRaceLost
			}
			if err != nil {
				return fmt.Errorf("insert void flow: %w", err)
			}
			return moveCoupons(ctx, tx, Returned, []couponRow{c}, "")
		})
		if err == nil {
			out.Result, out.Status = VoidVoided, Returned.String()
		}
		return err
	})
	return out, err
}
