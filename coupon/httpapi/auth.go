package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"github.com/couponlink/couponlink/api"
	"github.com/couponlink/couponlink/auth"
	"github.com/couponlink/couponlink/coupon"
)

// Who may call which route. Every route under /v1 has a role: a GET is a
// viewer's; any other method must be in writeRoles, or New panics, so a
// new write route declares its role here, in one place.
//
// viewer: every GET. operator: the services' writes (claims, redemptions,
// refunds) and the people's (voids, the expiry sweep, the quota policy,
// resolving a reconcile item, acknowledging, closing and reopening a
// finding). A policy preview writes nothing and is a viewer's.
// admin: creating templates (and so where they live, with several
// primaries), and everything the others may do.
var writeRoles = map[string]auth.Role{
	"POST /v1/templates":                     auth.Admin,
	"POST /v1/claims":                        auth.Operator,
	"POST /v1/redemptions":                   auth.Operator,
	"POST /v1/refunds":                       auth.Operator,
	"POST /v1/voids":                         auth.Operator,
	"POST /v1/expire":                        auth.Operator,
	"PUT /v1/templates/{id}/quota-policy":    auth.Operator,
	"DELETE /v1/templates/{id}/quota-policy": auth.Operator,
	"POST /v1/reconcile/tasks/{id}/resolve":  auth.Operator,
	"POST /v1/findings/{fingerprint}/ack":    auth.Operator,
	"POST /v1/findings/{fingerprint}/close":  auth.Operator,
	"POST /v1/findings/{fingerprint}/reopen": auth.Operator,
	// a legacy campaign's policy, in couponlink's own database (signal mode)
	"PUT /v1/legacy/templates/{id}/quota-policy":    auth.Operator,
	"DELETE /v1/legacy/templates/{id}/quota-policy": auth.Operator,
	// the previews write nothing: what a viewer may see
	"POST /v1/templates/{id}/quota-policy/preview":        auth.Viewer,
	"POST /v1/legacy/templates/{id}/quota-policy/preview": auth.Viewer,
}

// RoleOf is the role a route's pattern ("POST /v1/claims") needs.
func RoleOf(pattern string) auth.Role {
	method, _, _ := strings.Cut(pattern, " ")
	if method == http.MethodGet {
		return auth.Viewer
	}
	role, ok := writeRoles[pattern]
	if !ok {
		panic("httpapi: the write route " + pattern + " has no role in writeRoles (coupon/httpapi/auth.go)")
	}
	return role
}

type identityKey struct{}

// caller is who sent the request: the identity of its token, or, when the
// server has no token (it is open), none.
func caller(ctx context.Context) (auth.Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(auth.Identity)
	return id, ok
}

// identity is the name of r's token, "" on an open server (no token).
// A write's store function checks the body's operator or changed_by as
// sent, by one rule with or without a token, and then records this name
// as the actor and the body's, when another, as the one it acts for
// (on_behalf_of; coupon.Acting). Free text (a reason, a note) is kept as
// the caller wrote it.
func identity(r *http.Request) string {
	id, _ := caller(r.Context())
	return id.Name
}

// authenticate is the identity of r's bearer token ("Bearer <token>" with
// the scheme name in any case and one or more spaces, RFC 9110 and RFC
// 6750); open is true when the server has no token at all.
func (s *Server) authenticate(r *http.Request) (id auth.Identity, ok, open bool) {
	if s.tokens.Len() == 0 {
		return auth.Identity{}, true, true
	}
	scheme, got, found := strings.Cut(r.Header.Get("Authorization"), " ")
	if !found || !strings.EqualFold(scheme, "Bearer") {
		return auth.Identity{}, false, false
	}
	id, ok = s.tokens.Lookup(strings.TrimLeft(got, " "))
	return id, ok, false
}

// Authorized reports whether r may use its route under /v1: it carries a
// token whose role may call the route, or the server has none and r's
// Host is one it knows. A front
// that routes requests over several servers asks it before it reads a
// body.
func (s *Server) Authorized(r *http.Request) bool {
	_, err := s.authorize(r)
	return err == nil
}

// authorize checks r's token and its role for the route r goes to, and
// returns r with the token's identity in its context (see caller); the
// error is 401 unauthorized (checked first, for any path under /v1, so
// that a caller without a token learns nothing of the routes) or 403
// forbidden. An unknown path or a wrong method needs only a valid token.
// Without tokens, r's Host must be one the API knows (checkHost, hosts.go):
// else 403 host_not_allowed.
func (s *Server) authorize(r *http.Request) (*http.Request, error) {
	id, ok, open := s.authenticate(r)
	switch {
	case !ok:
		return r, &coupon.Error{Code: api.CodeUnauthorized, Message: "a valid Authorization: Bearer <token> header is required"}
	case open:
		return r, s.checkHost(r)
	}
	if _, pattern := s.mux.Handler(r); s.isRoute[pattern] {
		if need := RoleOf(pattern); id.Role < need {
			return r, &coupon.Error{Code: api.CodeForbidden, Message: "the token " + strconv.Quote(id.Name) + " has the role " + id.Role.String() +
				"; " + pattern + " needs " + need.String() + " or above; nothing was written"}
		}
	}
	return r.WithContext(context.WithValue(r.Context(), identityKey{}, id)), nil
}
