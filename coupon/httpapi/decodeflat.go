package httpapi

import (
	jsonv2 "encoding/json/v2"
	"reflect"
	"strings"
	"sync"
)

// The one-pass read of a flat body. decode reads a body twice: once with
// encoding/json, once token by token for the keys encoding/json lets pass
// (case-insensitive, twice). For a flat request (a claim, a redemption:
// string, integer and bool fields only) encoding/json/v2 with unknown
// members refused does both at once: it matches names exactly and
// refuses a name given twice, invalid UTF-8 and trailing data. When it
// accepts a body, the two-pass read accepts it too, with the same
// values; when it refuses one, decode reads it again the two-pass way,
// whose error is the answer. So the answers are the same, the usual body
// costs one pass.

var flatTypes sync.Map // reflect.Type -> bool

// decodeFlat decodes body into dst in one pass when dst is a pointer to a
// flat struct and the body is one that decode accepts; false otherwise
// (dst is then left zero, as it came).
func decodeFlat(body []byte, dst any) bool {
	t := reflect.TypeOf(dst)
	if t.Kind() != reflect.Pointer || !isFlat(t.Elem()) {
		return false
	}
	if err := jsonv2.Unmarshal(body, dst, jsonv2.RejectUnknownMembers(true)); err != nil {
		reflect.ValueOf(dst).Elem().SetZero()
		return false
	}
	return true
}

// isFlat: a struct of exported string, integer or bool fields with plain
// json tags (a name, omitempty at most).
func isFlat(t reflect.Type) bool {
	if v, ok := flatTypes.Load(t); ok {
		return v.(bool)
	}
	flat := t.Kind() == reflect.Struct
	for i := 0; flat && i < t.NumField(); i++ {
		f := t.Field(i)
		_, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case !f.IsExported(), f.Anonymous, opts != "" && opts != "omitempty":
			flat = false
		default:
			switch f.Type.Kind() {
			case reflect.String, reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
				reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			default:
				flat = false
			}
		}
	}
	flatTypes.Store(t, flat)
	return flat
}
