package httpapi

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/couponlink/couponlink/api"
	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/inventory/view"
	"github.com/couponlink/couponlink/quota"
)

// The read routes of the operator console: the templates list, a
// template's policy history, a user's coupons of a template and its
// trends.

// query reads r's query string, refusing a parameter not in allowed or
// given twice; what is left out is "".
func query(r *http.Request, allowed ...string) (url.Values, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, coupon.Invalid("", "the query string is malformed: %v", err)
	}
	for k, vs := range q {
		known := false
		for _, a := range allowed {
			known = known || a == k
		}
		switch {
		case !known && len(allowed) == 0:
			return nil, coupon.Invalid(k, "unknown query parameter %q: this route takes no query parameter", k)
		case !known:
			return nil, coupon.Invalid(k, "unknown query parameter %q: this route takes %s", k, strings.Join(allowed, ", "))
		case len(vs) > 1:
			return nil, coupon.Invalid(k, "%s is given %d times; send it once", k, len(vs))
		}
	}
	return q, nil
}

// intParam is the integer parameter name of q, def when absent; it must
// be in [lo, hi].
func intParam(q url.Values, name string, def, lo, hi int64) (int64, error) {
	s := q.Get(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, coupon.Invalid(name, "%s must be an integer from %d to %d, got %q", name, lo, hi, s)
	}
	return n, nil
}

// queryInt is the integer parameter name of a route that takes no other
// query parameter (intParam of query(r, name)).
func queryInt(r *http.Request, name string, def, lo, hi int64) (int64, error) {
	q, err := query(r, name)
	if err != nil {
		return 0, err
	}
	return intParam(q, name, def, lo, hi)
}

// listTemplates is GET /v1/templates?q=&after=&limit=: a page of
// templates by id, with their four states (see view.Catalog).
func (s *Server) listTemplates(w http.ResponseWriter, r *http.Request) (int, any, error) {
	q, err := query(r, "q", "after", "limit")
	if err != nil {
		return 0, nil, err
	}
	after, err := intParam(q, "after", 0, 0, 1<<62)
	if err != nil {
		return 0, nil, err
	}
	limit, err := intParam(q, "limit", view.DefaultCatalogLimit, 1, view.MaxCatalogLimit)
	if err != nil {
		return 0, nil, err
	}
	if len(q.Get("q")) > 200 {
		return 0, nil, coupon.Invalid("q", "q must be at most 200 bytes, got %d", len(q.Get("q")))
	}
	page, err := view.Catalog(r.Context(), s.store.DB(), view.CatalogQuery{Search: q.Get("q"), After: after, Limit: int(limit)})
	return http.StatusOK, page, err
}

// policyHistory is GET /v1/templates/{id}/quota-policy/history?limit=:
// the template's policy changes, newest first.
func (s *Server) policyHistory(w http.ResponseWriter, r *http.Request) (int, any, error) {
	id, err := pathID(r)
	if err != nil {
		return 0, nil, err
	}
	return policyAudit(r, id, func(ctx context.Context, limit int) ([]quota.AuditEntry, error) {
		return quota.Audit(ctx, s.store.DB(), id, limit)
	})
}

// policyAudit answers a template's policy changes read by audit, newest
// first, at most ?limit= (1 to 1000, default 20).
func policyAudit(r *http.Request, id int64, audit func(context.Context, int) ([]quota.AuditEntry, error)) (int, any, error) {
	limit, err := queryInt(r, "limit", 20, 1, 1000)
	if err != nil {
		return 0, nil, err
	}
	entries, err := audit(r.Context(), int(limit))
	return http.StatusOK, api.PolicyHistory{Template: id, Entries: entries}, err
}

// userCoupons is GET /v1/templates/{id}/user-coupons?user_id=: the life
// of each coupon of the template the user holds or held.
func (s *Server) userCoupons(w http.ResponseWriter, r *http.Request) (int, any, error) {
	id, err := pathID(r)
	if err != nil {
		return 0, nil, err
	}
	q, err := query(r, "user_id")
	if err != nil {
		return 0, nil, err
	}
	user := q.Get("user_id")
	hs, err := s.store.UserCoupons(r.Context(), id, user)
	return http.StatusOK, api.UserCoupons{Template: id, UserID: user, Coupons: hs}, err
}

// trends is GET /v1/templates/{id}/trends?hours=: claims, redemptions and
// releases per minute and channel over the last hours (3 by default, at
// most view.MaxTrendHours).
func (s *Server) trends(w http.ResponseWriter, r *http.Request) (int, any, error) {
	id, err := pathID(r)
	if err != nil {
		return 0, nil, err
	}
	hours, err := queryInt(r, "hours", 3, 1, view.MaxTrendHours)
	if err != nil {
		return 0, nil, err
	}
	t, err := view.Trends(r.Context(), s.store.DB(), id, int(hours), s.store.Now())
	return http.StatusOK, t, err
}
