package api

import (
	"fmt"
	"net/http"
)

// Code is the API's machine-readable error code (the "code" of its error
// body); openapi.json lists each (schema ErrorCode) with its HTTP status.
type Code string

// The API's error codes.
const (
	CodeInvalidArgument      Code = "invalid_argument"       // 400: the request itself is wrong; Field names the input
	CodeUnauthorized         Code = "unauthorized"           // 401: no valid bearer token
	CodeForbiddenOrigin      Code = "forbidden_origin"       // 403: a browser's write from another site
	CodeForbidden            Code = "forbidden"              // 403: the token's role may not call the route
	CodeHostNotAllowed       Code = "host_not_allowed"       // 403: an API without tokens asked for a Host that is not loopback nor allowed
	CodeNotFound             Code = "not_found"              // 404: no such template, coupon or route
	CodeMethodNotAllowed     Code = "method_not_allowed"     // 405
	CodeSoldOut              Code = "sold_out"               // 409: the channel bucket has no quota left
	CodeLimitReached         Code = "limit_reached"          // 409: the user has claimed the per-user limit
	CodeAlreadyUsed          Code = "already_used"           // 409: redeemed by another order
	CodeIllegalTransition    Code = "illegal_transition"     // 409: not one of the legal state changes
	CodeIdempotencyConflict  Code = "idempotency_conflict"   // 409: a key reused with another payload
	CodeOrderMismatch        Code = "order_mismatch"         // 409: a refund by an order that did not redeem the coupon
	CodeAlreadyRefunded      Code = "already_refunded"       // 409: the order's redemption of the coupon was refunded
	CodeCouponExpired        Code = "coupon_expired"         // 409: past expires_at, awaiting the sweep
	CodeConflict             Code = "conflict"               // 409: lost a race too many times; retry
	CodeNotOpen              Code = "not_open"               // 409: the reconcile task is not open (missing, not needing review, or resolved)
	CodeLegacyPolicyRefused  Code = "legacy_policy_refused"  // 409: a legacy campaign's policy couponlink cannot honour (mode auto: it never writes the shop's tables)
	CodeUnsupportedMediaType Code = "unsupported_media_type" // 415: the body is not application/json
	CodeInternal             Code = "internal"               // 500: an unexpected failure (see the server log)
	CodeUnavailable          Code = "unavailable"            // 503: cancelled, or MySQL cannot be reached; retry
)

// Codes is every error code of the API, in the order of openapi.json's
// ErrorCode enum (by HTTP status).
var Codes = []Code{
	CodeInvalidArgument, CodeUnauthorized, CodeForbiddenOrigin, CodeForbidden, CodeHostNotAllowed, CodeNotFound, CodeMethodNotAllowed,
	CodeSoldOut, CodeLimitReached, CodeAlreadyUsed, CodeIllegalTransition, CodeIdempotencyConflict,
	CodeOrderMismatch, CodeAlreadyRefunded, CodeCouponExpired, CodeConflict, CodeNotOpen, CodeLegacyPolicyRefused,
	CodeUnsupportedMediaType, CodeInternal, CodeUnavailable,
}

// Status is the HTTP status the API answers the code with: 409 (a
// conflict with the stored state) for every code not named otherwise.
func (c Code) Status() int {
	switch c {
	case CodeInvalidArgument:
		return http.StatusBadRequest
	case CodeNotFound:
		return http.StatusNotFound
	case CodeUnauthorized:
		return http.StatusUnauthorized
	case CodeForbiddenOrigin, CodeForbidden, CodeHostNotAllowed:
		return http.StatusForbidden
	case CodeUnsupportedMediaType:
		return http.StatusUnsupportedMediaType
	case CodeMethodNotAllowed:
		return http.StatusMethodNotAllowed
	case CodeInternal:
		return http.StatusInternalServerError
	case CodeUnavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusConflict
}

// Error is the error of an answer that is not a success: its code, the
// input field at fault when there is one, and a message for a person.
type Error struct {
	Code    Code   `json:"code"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s: %s: %s", e.Code, e.Field, e.Message)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Invalid is an invalid_argument error about one input field.
func Invalid(field, format string, args ...any) *Error {
	return &Error{Code: CodeInvalidArgument, Field: field, Message: fmt.Sprintf(format, args...)}
}

// ErrorBody is the one error shape of every route: {"error": {...}}.
type ErrorBody struct {
	Error *Error `json:"error"`
}
