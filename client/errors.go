package client

import (
	"errors"
	"fmt"
)

// Code is the API's machine-readable error code (the "code" of its error
// body); openapi.json lists each with its HTTP status.
type Code string

// The API's error codes.
const (
	CodeInvalidArgument      Code = "invalid_argument"       // 400: the request itself is wrong; Field names the input
	CodeUnauthorized         Code = "unauthorized"           // 401: no valid bearer token
	CodeForbiddenOrigin      Code = "forbidden_origin"       // 403: a browser's write from another site
	CodeNotFound             Code = "not_found"              // 404: no such template, coupon or route
	CodeMethodNotAllowed     Code = "method_not_allowed"     // 405
	CodeSoldOut              Code = "sold_out"               // 409: the channel bucket has no quota left
	CodeLimitReached         Code = "limit_reached"          // 409: the user has claimed the per-user limit
	CodeAlreadyUsed          Code = "already_used"           // 409: redeemed by another order
	CodeIllegalTransition    Code = "illegal_transition"     // 409: not a legal state change
	CodeIdempotencyConflict  Code = "idempotency_conflict"   // 409: a key reused with another payload
	CodeOrderMismatch        Code = "order_mismatch"         // 409: a refund by an order that did not redeem the coupon
	CodeAlreadyRefunded      Code = "already_refunded"       // 409: the order's redemption was refunded
	CodeCouponExpired        Code = "coupon_expired"         // 409: past expires_at, awaiting the sweep
	CodeConflict             Code = "conflict"               // 409: lost a race too many times (retried on idempotent calls)
	CodeNotOpen              Code = "not_open"               // 409: the reconcile task is not open (missing, not needing review, or resolved)
	CodeUnsupportedMediaType Code = "unsupported_media_type" // 415
	CodeInternal             Code = "internal"               // 500
	CodeUnavailable          Code = "unavailable"            // 503 (retried on idempotent calls)
)

// Error is an answer of the API that is not a success: its HTTP status and
// the error body's code, field and message. Code is empty when the body
// was not the API's error shape (e.g. a proxy's 502 page).
type Error struct {
	Status  int
	Code    Code
	Field   string
	Message string
}

func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("couponlink: HTTP %d %s: %s: %s", e.Status, e.Code, e.Field, e.Message)
	}
	return fmt.Sprintf("couponlink: HTTP %d %s: %s", e.Status, e.Code, e.Message)
}

// ErrorCode is the API's code inside err ("" when err is not an *Error).
func ErrorCode(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// IsCode reports whether err is an API error with the code.
func IsCode(err error, code Code) bool { return ErrorCode(err) == code }
