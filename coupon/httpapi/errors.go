package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/couponlink/couponlink/coupon"
)

// MaxBodyBytes is the largest request body accepted.
const MaxBodyBytes = 1 << 20

type errorBody struct {
	Error *coupon.Error `json:"error"`
}

// statusOf maps a domain error code to its HTTP status.
func statusOf(code coupon.Code) int {
	switch code {
	case coupon.CodeInvalidArgument:
		return http.StatusBadRequest
	case coupon.CodeNotFound:
		return http.StatusNotFound
	case "unauthorized":
		return http.StatusUnauthorized
	case "method_not_allowed":
		return http.StatusMethodNotAllowed
	case "internal":
		return http.StatusInternalServerError
	case "unavailable":
		return http.StatusServiceUnavailable
	}
	return http.StatusConflict
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // messages and rules say "->", "<" and ">" as a person reads them
	_ = enc.Encode(v)
}

// decode reads a JSON body into dst strictly: one object, known fields only,
// at most MaxBodyBytes. Its errors name the field when there is one.
func decode(w http.ResponseWriter, r *http.Request, dst any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return jsonError(err)
	}
	if err := dec.Decode(&struct{}{}); !errors.Is(err, io.EOF) {
		return coupon.Invalid("", "the body must hold exactly one JSON object")
	}
	return nil
}

func jsonError(err error) error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var tooBig *http.MaxBytesError
	switch {
	case errors.Is(err, io.EOF):
		return coupon.Invalid("", "the body is empty; a JSON object is required")
	case errors.As(err, &tooBig):
		return coupon.Invalid("", "the body is larger than %d bytes", MaxBodyBytes)
	case errors.As(err, &syntax):
		return coupon.Invalid("", "the body is not valid JSON (at byte %d)", syntax.Offset)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return coupon.Invalid("", "the body is not valid JSON (it ends early)")
	case errors.As(err, &typ):
		if typ.Field == "" {
			return coupon.Invalid("", "the body must be a JSON object, not %s", typ.Value)
		}
		return coupon.Invalid(typ.Field, "%s must be %s, not %s", typ.Field, jsonKind(typ.Type.Kind().String()), typ.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return coupon.Invalid(name, "unknown field %q", name)
	}
	return coupon.Invalid("", "cannot read the body: %v", err)
}

func jsonKind(k string) string {
	switch {
	case strings.HasPrefix(k, "int"), strings.HasPrefix(k, "uint"):
		return "an integer"
	case strings.HasPrefix(k, "float"):
		return "a number"
	case k == "string":
		return "a string"
	case k == "slice":
		return "an array"
	case k == "map", k == "struct":
		return "an object"
	case k == "bool":
		return "true or false"
	}
	return fmt.Sprintf("a %s", k)
}
