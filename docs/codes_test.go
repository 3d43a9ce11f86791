package docs_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/api"
)

// TestErrorTableIsAPICodes: docs/api.md's table of error codes lists
// each of api.Codes once, and nothing else, each with the HTTP status the server
// answers it with (openapi.json is checked against api.Codes by
// coupon/httpapi's TestOpenAPIErrorCodesAreAPICodes).
func TestErrorTableIsAPICodes(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "docs", "api.md"))
	require.NoError(t, err)
	var codes []api.Code
	status := map[api.Code]int{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\| ([0-9]{3}) \\|").FindAllStringSubmatch(string(b), -1) {
		c := api.Code(m[1])
		codes = append(codes, c)
		status[c], _ = strconv.Atoi(m[2])
	}
	require.ElementsMatch(t, api.Codes, codes, "docs/api.md's error table must list each of api.Codes (api/errors.go) once")
	for _, c := range api.Codes {
		assert.Equal(t, c.Status(), status[c], "HTTP status of %s in docs/api.md", c)
	}
}
