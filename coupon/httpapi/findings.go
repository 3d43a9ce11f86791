package httpapi

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"

	"github.com/couponlink/couponlink/api"
	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/inventory"
)

// The findings routes: the cdc's anomalies and the reconciler's
// differences left for a person, with their lifecycle (open,
// acknowledged, closed), as `couponlink anomalies list|ack|close` shows
// and moves them.

// listFindings is GET /v1/findings?state=&source=&kind=&template=&limit=:
// the findings, the last seen first, each with what it names and where
// it was last seen.
func (s *Server) listFindings(w http.ResponseWriter, r *http.Request) (int, any, error) {
	q, err := query(r, "state", "source", "kind", "template", "limit")
	if err != nil {
		return 0, nil, err
	}
	limit, err := intParam(q, "limit", 100, 1, 1000)
	if err != nil {
		return 0, nil, err
	}
	tpl, err := intParam(q, "template", 0, 1, 1<<62)
	if err != nil {
		return 0, nil, err
	}
	if len(q.Get("kind")) > 64 {
		return 0, nil, coupon.Invalid("kind", "kind must be at most 64 bytes, got %d", len(q.Get("kind")))
	}
	fq := inventory.FindingsQuery{State: q.Get("state"), Source: q.Get("source"), Kind: q.Get("kind"), Template: tpl, Limit: int(limit)}
	if err := oneOf("state", fq.State, api.FindingOpen, api.FindingAcknowledged, api.FindingClosed); err != nil {
		return 0, nil, err
	}
	if err := oneOf("source", fq.Source, api.FindingFromCDC, api.FindingFromReconcile); err != nil {
		return 0, nil, err
	}
	fs, err := inventory.FindingsOf(r.Context(), s.store.DB(), fq, s.checkpoint())
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, api.Findings{Findings: fs}, nil
}

// oneOf checks that the parameter name, when given, is one of allowed.
func oneOf(name, v string, allowed ...string) error {
	if v == "" {
		return nil
	}
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	return coupon.Invalid(name, "%s must be one of %v, got %q", name, allowed, v)
}

// ackFinding is POST /v1/findings/{fingerprint}/ack: acknowledges an open
// finding, as `couponlink anomalies ack` does.
func (s *Server) ackFinding(w http.ResponseWriter, r *http.Request) (int, any, error) {
	return s.moveFinding(w, r, inventory.AckFinding, "open")
}

// closeFinding is POST /v1/findings/{fingerprint}/close: closes an open or
// acknowledged finding, as `couponlink anomalies close` does.
func (s *Server) closeFinding(w http.ResponseWriter, r *http.Request) (int, any, error) {
	return s.moveFinding(w, r, inventory.CloseFinding, "open or acknowledged")
}

// reopenFinding is POST /v1/findings/{fingerprint}/reopen: opens an
// acknowledged or closed finding again.
func (s *Server) reopenFinding(w http.ResponseWriter, r *http.Request) (int, any, error) {
	return s.moveFinding(w, r, inventory.ReopenFinding, "acknowledged or closed")
}

type findingMove func(ctx context.Context, db *sql.DB, fingerprint, operator, reason, identity string) (inventory.Finding, error)

func (s *Server) moveFinding(w http.ResponseWriter, r *http.Request, move findingMove, from string) (int, any, error) {
	fp := r.PathValue("fingerprint")
	var b api.FindingRequest
	if err := decode(w, r, &b); err != nil {
		return 0, nil, err
	}
	f, err := move(r.Context(), s.store.DB(), fp, b.Operator, b.Reason, identity(r))
	var input *inventory.FindingInputError
	switch {
	case errors.As(err, &input):
		return 0, nil, coupon.Invalid(input.Field, "%s", input.Message)
	case errors.Is(err, inventory.ErrNoFinding):
		return 0, nil, &coupon.Error{Code: api.CodeNotFound, Field: "fingerprint", Message: fmt.Sprintf("no finding has the fingerprint %q", fp)}
	case errors.Is(err, inventory.ErrFindingState):
		return 0, nil, &coupon.Error{Code: api.CodeNotOpen, Field: "fingerprint",
			Message: fmt.Sprintf("finding %s is %s, not %s; nothing was written", fp, f.State, from)}
	case err != nil:
		return 0, nil, err
	}
	return http.StatusOK, f, nil
}
