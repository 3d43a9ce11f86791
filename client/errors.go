package client

import (
	"errors"
	"fmt"

	"github.com/couponlink/couponlink/api"
)

// Code is the API's machine-readable error code (the "code" of its error
// body); package api has them all, with their HTTP status.
type Code = api.Code

// The API's error codes (see package api).
const (
	CodeInvalidArgument      = api.CodeInvalidArgument      // 400: Field names the input
	CodeUnauthorized         = api.CodeUnauthorized         // 401
	CodeForbiddenOrigin      = api.CodeForbiddenOrigin      // 403
	CodeForbidden            = api.CodeForbidden            // 403
	CodeHostNotAllowed       = api.CodeHostNotAllowed       // 403: an API without tokens, a Host it does not know
	CodeNotFound             = api.CodeNotFound             // 404
	CodeMethodNotAllowed     = api.CodeMethodNotAllowed     // 405
	CodeSoldOut              = api.CodeSoldOut              // 409
	CodeLimitReached         = api.CodeLimitReached         // 409
	CodeAlreadyUsed          = api.CodeAlreadyUsed          // 409
	CodeIllegalTransition    = api.CodeIllegalTransition    // 409
	CodeIdempotencyConflict  = api.CodeIdempotencyConflict  // 409
	CodeOrderMismatch        = api.CodeOrderMismatch        // 409
	CodeAlreadyRefunded      = api.CodeAlreadyRefunded      // 409
	CodeCouponExpired        = api.CodeCouponExpired        // 409
	CodeConflict             = api.CodeConflict             // 409: retried on idempotent calls
	CodeNotOpen              = api.CodeNotOpen              // 409
	CodeLegacyPolicyRefused  = api.CodeLegacyPolicyRefused  // 409: mode auto for a legacy campaign
	CodeUnsupportedMediaType = api.CodeUnsupportedMediaType // 415
	CodeInternal             = api.CodeInternal             // 500
	CodeUnavailable          = api.CodeUnavailable          // 503: retried on idempotent calls
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
