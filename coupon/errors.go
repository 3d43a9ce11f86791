package coupon

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Code is a machine-readable error code, returned to API clients as-is.
type Code string

// The error codes of the write API.
const (
	CodeInvalidArgument     Code = "invalid_argument"     // 400: the request itself is wrong
	CodeNotFound            Code = "not_found"            // 404: no such template or coupon
	CodeSoldOut             Code = "sold_out"             // 409: the channel bucket has no quota left
	CodeLimitReached        Code = "limit_reached"        // 409: the user has claimed the per-user limit
	CodeAlreadyUsed         Code = "already_used"         // 409: redeemed by another order
	CodeIllegalTransition   Code = "illegal_transition"   // 409: not one of the six legal transitions
	CodeIdempotencyConflict Code = "idempotency_conflict" // 409: a key reused with another payload
	CodeOrderMismatch       Code = "order_mismatch"       // 409: refund by an order that did not redeem it
	CodeAlreadyRefunded     Code = "already_refunded"     // 409: the order's redemption of the coupon was refunded
	CodeCouponExpired       Code = "coupon_expired"       // 409: past expires_at, awaiting the sweep
	CodeConflict            Code = "conflict"             // 409: lost a race too many times; retry
)

// Error is a domain error a client can act on.
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

// AsError returns the *Error inside err, if any.
func AsError(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

// Invalid is a 400 about one input field.
func Invalid(field, format string, args ...any) *Error {
	return &Error{Code: CodeInvalidArgument, Field: field, Message: fmt.Sprintf(format, args...)}
}

// NotFound is a 404 about one kind of thing.
func NotFound(what string, id any) *Error {
	return &Error{Code: CodeNotFound, Message: fmt.Sprintf("%s %v does not exist", what, id)}
}

// IllegalTransition names the from and to states of a refused change.
func IllegalTransition(from, to Status, a Action) *Error {
	return &Error{Code: CodeIllegalTransition, Message: fmt.Sprintf(
		"cannot %s a coupon that is %s: %s -> %s is not a legal transition; nothing was written",
		a, from, from, to)}
}

func conflictf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// CheckText refuses, in input strings given as field name and value
// pairs, what no id or text stored by couponlink may hold: invalid UTF-8
// (or U+FFFD, which encoding/json puts in its place, as for a lone
// surrogate escape), NUL, and any other C0 or C1 control character —
// except, in free text (a reason: free is true), tab, newline and carriage
// return. Ids (user_id, order_id, request_id, channel, operator,
// changed_by) and names are never free text.
func CheckText(free bool, fieldValues ...string) error {
	for i := 0; i+1 < len(fieldValues); i += 2 {
		field, v := fieldValues[i], fieldValues[i+1]
		if !utf8.ValidString(v) || strings.ContainsRune(v, utf8.RuneError) {
			return Invalid(field, "%s is not valid UTF-8 text", field)
		}
		for _, r := range v {
			if unicode.IsControl(r) && !(free && (r == '\t' || r == '\n' || r == '\r')) {
				return Invalid(field, "%s must not hold control characters (it holds %U)", field, r)
			}
		}
	}
	return nil
}
