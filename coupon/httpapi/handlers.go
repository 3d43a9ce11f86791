package httpapi

import (
	"net/http"
	"time"

	"github.com/couponlink/couponlink/api"
	"github.com/couponlink/couponlink/coupon"
)

func (s *Server) createTemplate(w http.ResponseWriter, r *http.Request) (int, any, error) {
	var b api.NewTemplate
	if err := decode(w, r, &b); err != nil {
		return 0, nil, err
	}
	nt := coupon.NewTemplate{Name: b.Name, TotalQuota: b.TotalQuota, Channels: b.Channels, ValidSeconds: b.ValidSeconds,
		ExpiryPolicy: b.ExpiryPolicy, ReleaseCooldownSeconds: b.ReleaseCooldownSeconds}
	if b.PerUserLimit != nil {
		if *b.PerUserLimit <= 0 {
			return 0, nil, coupon.Invalid("per_user_limit", "per_user_limit must be at least 1, got %d", *b.PerUserLimit)
		}
		nt.PerUserLimit = *b.PerUserLimit
	}
	t, err := s.store.CreateTemplate(r.Context(), nt)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, t, nil
}

func (s *Server) getTemplate(w http.ResponseWriter, r *http.Request) (int, any, error) {
	return readID(r, s.store.GetTemplate)
}

func (s *Server) claim(w http.ResponseWriter, r *http.Request) (int, any, error) {
	var b api.ClaimRequest
	if err := decode(w, r, &b); err != nil {
		return 0, nil, err
	}
	c, err := s.store.Claim(r.Context(), coupon.ClaimRequest(b))
	if err != nil {
		return 0, nil, err
	}
	return s.created(c.Replayed, coupon.ActionClaim), c, nil
}

func (s *Server) redeem(w http.ResponseWriter, r *http.Request) (int, any, error) {
	var b api.RedeemRequest
	if err := decode(w, r, &b); err != nil {
		return 0, nil, err
	}
	red, err := s.store.Redeem(r.Context(), coupon.RedeemRequest(b))
	if err != nil {
		return 0, nil, err
	}
	return s.created(red.Replayed, coupon.ActionRedeem), red, nil
}

// created is 201 for a new state change (counted), 200 for a replay.
func (s *Server) created(replayed bool, a coupon.Action) int {
	if replayed {
		return http.StatusOK
	}
	s.metrics.transitions.WithLabelValues(string(a)).Inc()
	return http.StatusCreated
}

func (s *Server) refund(w http.ResponseWriter, r *http.Request) (int, any, error) {
	var b api.RefundRequest
	if err := decode(w, r, &b); err != nil {
		return 0, nil, err
	}
	ref, err := s.store.Refund(r.Context(), coupon.RefundRequest(b))
	if err != nil {
		return 0, nil, err
	}
	if !ref.Replayed {
		s.metrics.transitions.WithLabelValues("refund_" + ref.Mode).Inc()
	}
	return http.StatusOK, ref, nil
}

// VoidResponse is the answer of POST /v1/voids.
type VoidResponse = api.VoidResponse

func (s *Server) void(w http.ResponseWriter, r *http.Request) (int, any, error) {
	var b api.VoidRequest
	if err := decode(w, r, &b); err != nil {
		return 0, nil, err
	}
	results, err := s.store.Void(r.Context(), coupon.VoidRequest{UserCouponIDs: b.UserCouponIDs, Reason: b.Reason,
		Operator: b.Operator, RequestID: b.RequestID, Identity: identity(r)})
	if err != nil {
		return 0, nil, err
	}
	resp := VoidResponse{RequestID: b.RequestID, Results: results, Counts: map[string]int{}}
	voided := 0
	for _, res := range results {
		resp.Counts[res.Result]++
		if res.Result == coupon.VoidVoided && !res.Replayed {
			voided++
		}
	}
	s.metrics.transitions.WithLabelValues(string(coupon.ActionVoid)).Add(float64(voided))
	return http.StatusOK, resp, nil
}

// ExpireResponse is the answer of POST /v1/expire.
type ExpireResponse = api.ExpireResult

func (s *Server) expire(w http.ResponseWriter, r *http.Request) (int, any, error) {
	var b api.ExpireRequest
	if r.ContentLength != 0 {
		if err := decode(w, r, &b); err != nil {
			return 0, nil, err
		}
	}
	if b.Limit < 0 {
		return 0, nil, coupon.Invalid("limit", "limit must not be negative, got %d", b.Limit)
	}
	res, err := s.Sweep(r.Context(), b.Limit)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, ExpireResponse{Expired: res.Expired, Transactions: res.Transactions, More: res.More,
		DurationSeconds: res.Duration.Seconds()}, nil
}

func (s *Server) inventory(w http.ResponseWriter, r *http.Request) (int, any, error) {
	return readID(r, s.cfg.Inventory.Inventory)
}

func (s *Server) history(w http.ResponseWriter, r *http.Request) (int, any, error) {
	return readID(r, s.store.History)
}

// healthz is open to anyone: its answer says whether MySQL answers, never
// why not (the error names the server's address), which goes to the log.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) (int, any, error) {
	if err := s.store.DB().PingContext(r.Context()); err != nil {
		s.log.Warn("healthz: MySQL does not answer", "err", err)
		return 0, nil, &coupon.Error{Code: api.CodeUnavailable, Message: "MySQL does not answer; the reason is in the server log"}
	}
	return http.StatusOK, api.Health{Status: "ok", Time: time.Now().UTC(), Legacy: s.cfg.Legacy != nil && s.cfg.Legacy.Mapping != nil}, nil
}
