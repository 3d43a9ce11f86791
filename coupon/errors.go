package coupon

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/couponlink/couponlink/api"
)

// Code is a machine-readable error code, returned to API clients as-is;
// package api has every code of the API (api.CodeSoldOut, ...), with its
// HTTP status.
type Code = api.Code

// Error is a domain error a client can act on: the API's error object.
type Error = api.Error

// AsError returns the *Error inside err, if any.
func AsError(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

// Invalid is a 400 about one input field.
func Invalid(field, format string, args ...any) *Error {
	return api.Invalid(field, format, args...)
}

// NotFound is a 404 about one kind of thing.
func NotFound(what string, id any) *Error {
	return &Error{Code: api.CodeNotFound, Message: fmt.Sprintf("%s %v does not exist", what, id)}
}

// IllegalTransition names the from and to states of a refused change.
func IllegalTransition(from, to Status, a Action) *Error {
	return &Error{Code: api.CodeIllegalTransition, Message: fmt.Sprintf(
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

// textField is one text field of a request as Validate checks it: present
// (Why, when set, says what it is for after "is required: "), at most Max
// bytes (0: no limit here), and text by CheckText (Free: free text).
type textField struct {
	Name, Value string
	Max         int
	Why         string
	Free        bool
}

// checkFields checks each field in turn and refuses the first that fails.
func checkFields(fields ...textField) error {
	for _, f := range fields {
		switch {
		case f.Value == "" && f.Why != "":
			return Invalid(f.Name, "%s is required: %s", f.Name, f.Why)
		case f.Value == "":
			return Invalid(f.Name, "%s is required", f.Name)
		case f.Max > 0 && len(f.Value) > f.Max:
			return Invalid(f.Name, "%s is longer than %d bytes", f.Name, f.Max)
		}
		if err := CheckText(f.Free, f.Name, f.Value); err != nil {
			return err
		}
	}
	return nil
}
