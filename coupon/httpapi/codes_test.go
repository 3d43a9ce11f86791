package httpapi_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/api"
)

// TestOpenAPIErrorCodesAreAPICodes: the document's ErrorCode enum is
// api.Codes exactly (the same codes in the same order), and each
// ErrorOfNNN schema lists the codes whose api Status is NNN, in that
// order too.
func TestOpenAPIErrorCodesAreAPICodes(t *testing.T) {
	doc, _ := openAPIDoc(t)
	schemas := doc.Components.Schemas
	require.Contains(t, schemas, "ErrorCode")
	assert.Equal(t, api.Codes, codesOf(schemas["ErrorCode"].Value.Enum),
		"coupon/httpapi/openapi.json components.schemas.ErrorCode.enum must be api.Codes (api/errors.go)")

	byStatus := map[int][]api.Code{}
	for _, c := range api.Codes {
		byStatus[c.Status()] = append(byStatus[c.Status()], c)
	}
	seen := map[int]bool{}
	for name, ref := range schemas {
		s, ok := strings.CutPrefix(name, "ErrorOf")
		if !ok {
			continue
		}
		status, err := strconv.Atoi(s)
		require.NoError(t, err, name)
		seen[status] = true
		require.Len(t, ref.Value.AllOf, 2, name)
		code := ref.Value.AllOf[1].Value.Properties["error"].Value.Properties["code"].Value
		assert.Equal(t, byStatus[status], codesOf(code.Enum), "%s: the codes api answers with HTTP %d", name, status)
	}
	for status := range byStatus {
		assert.True(t, seen[status], "openapi.json has no schema ErrorOf%d for %v", status, byStatus[status])
	}
}

func codesOf(enum []any) []api.Code {
	var out []api.Code
	for _, v := range enum {
		out = append(out, api.Code(v.(string)))
	}
	return out
}
