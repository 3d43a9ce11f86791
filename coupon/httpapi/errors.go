package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"reflect"
	"regexp"
	"strings"

	"github.com/couponlink/couponlink/api"
	"github.com/couponlink/couponlink/coupon"
)

// MaxBodyBytes is the largest request body accepted.
const MaxBodyBytes = 1 << 20

// WriteError writes e in the API's one error shape, with its HTTP status.
func WriteError(w http.ResponseWriter, e *coupon.Error) {
	writeJSON(w, e.Code.Status(), api.ErrorBody{Error: e})
}

// WriteJSON writes v as the API writes its answers.
func WriteJSON(w http.ResponseWriter, status int, v any) { writeJSON(w, status, v) }

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // messages and rules say "->", "<" and ">" as a person reads them
	_ = enc.Encode(v)
}

// decode reads a JSON body into dst strictly: one object, known fields only,
// each once and spelled exactly (encoding/json would take "USER_ID" for
// user_id, and the last of two), at most MaxBodyBytes. Its errors name the
// field when there is one.
func decode(w http.ResponseWriter, r *http.Request, dst any) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		return jsonError(err)
	}
	if decodeFlat(body, dst) { // the usual claim or redemption, in one pass (decodeflat.go)
		return nil
	}
	return decodeBody(body, dst)
}

// decodeBody is decode's two-pass read of a body read whole.
func decodeBody(body []byte, dst any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return jsonError(err)
	}
	if err := dec.Decode(&struct{}{}); !errors.Is(err, io.EOF) {
		return coupon.Invalid("", "the body must hold exactly one JSON object")
	}
	// the body is one valid JSON value of dst's shape: walk its keys
	if err := checkKeys(json.NewDecoder(bytes.NewReader(body)), reflect.TypeOf(dst), ""); err != nil {
		if _, ok := coupon.AsError(err); ok {
			return err
		}
		return jsonError(err)
	}
	return nil
}

// checkKeys reads one JSON value and refuses, in every object in it, a key
// given twice, and a key of a struct that is not its JSON name exactly.
// The keys of a map (a template's channels) are data: "App" and "app" are
// two channels, as the database compares them (utf8mb4_bin). field is
// where the value is, for the errors.
func checkKeys(dec *json.Decoder, t reflect.Type, field string) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	delim, ok := tok.(json.Delim)
	if !ok {
		return nil // a scalar or null
	}
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var fields map[string]reflect.Type // a struct's JSON names
	var elem reflect.Type              // the values of a map or slice
	switch {
	case t == nil:
	case t.Kind() == reflect.Struct:
		fields = jsonFields(t)
	case t.Kind() == reflect.Map, t.Kind() == reflect.Slice, t.Kind() == reflect.Array:
		elem = t.Elem()
	}
	seen := map[string]bool{}
	for dec.More() {
		if delim == '[' {
			if err := checkKeys(dec, elem, field); err != nil {
				return err
			}
			continue
		}
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key := tok.(string)
		sub, vt := field, elem
		if fields != nil {
			sub = strings.TrimPrefix(field+"."+key, ".")
			if vt, ok = fields[key]; !ok {
				return misspelled(field, key, fields)
			}
		}
		if seen[key] {
			if fields != nil {
				return coupon.Invalid(sub, "%s is given twice; send each field once", sub)
			}
			return coupon.Invalid(field, "%s has the key %q twice; send each key once", field, key)
		}
		seen[key] = true
		if err := checkKeys(dec, vt, sub); err != nil {
			return err
		}
	}
	_, err = dec.Token() // the closing ] or }
	return err
}

// misspelled is the error of a key that encoding/json matched to a field
// without case (it refuses unknown ones before).
func misspelled(field, key string, fields map[string]reflect.Type) error {
	for name := range fields {
		if strings.EqualFold(name, key) {
			name = strings.TrimPrefix(field+"."+name, ".")
			return coupon.Invalid(name, "%q is not a field name: names are case-sensitive; send %s", key, name)
		}
	}
	name := strings.TrimPrefix(field+"."+key, ".")
	return coupon.Invalid(name, "unknown field %q", name)
}

// jsonFields maps the JSON names of a struct's fields to their types, as
// encoding/json names them (tag name, else the Go name; embedded structs
// flattened).
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-" || !f.IsExported() && !f.Anonymous:
			continue
		case f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct:
			maps.Copy(out, jsonFields(f.Type))
			continue
		case name == "":
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

// arrayIndex is an array element's index in a JSON field path.
var arrayIndex = regexp.MustCompile(`\.[0-9]+\b`)

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
		field := arrayIndex.ReplaceAllString(typ.Field, "") // Go 1.27 names the element: user_coupon_ids.0
		return coupon.Invalid(field, "%s must be %s, not %s", field, jsonKind(typ.Type.Kind().String()), typ.Value)
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
