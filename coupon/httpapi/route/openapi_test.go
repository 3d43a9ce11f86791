package route_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/coupon/httpapi"
)

// TestOpenAPIThroughTheFront: the front passes GET /openapi.json to the
// first primary, without the token, as a single server answers it.
func TestOpenAPIThroughTheFront(t *testing.T) {
	e := newNative(t, 2)
	code, body := e.do(request{method: http.MethodGet, path: "/openapi.json", noToken: true})
	require.Equal(t, http.StatusOK, code, "%s", body)
	assert.JSONEq(t, string(httpapi.OpenAPI), string(body))
}
