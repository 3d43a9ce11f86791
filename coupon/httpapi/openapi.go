package httpapi

import (
	_ "embed"
	"encoding/json"
	"net/http"
	"slices"
)

// OpenAPI is the OpenAPI 3.1 document of the API (openapi.json next to
// this file), served at GET /openapi.json. A route registered in New needs
// its entry under paths, or TestOpenAPIDocumentsEveryRoute fails.
//
//go:embed openapi.json
var OpenAPI []byte

// openAPI is GET /openapi.json: public, as /healthz and /metrics are
// (outside /v1, no token): it describes the routes and grants nothing.
func (s *Server) openAPI(w http.ResponseWriter, r *http.Request) (int, any, error) {
	w.Header().Set("Cache-Control", "public, max-age=300")
	return http.StatusOK, json.RawMessage(OpenAPI), nil
}

// Routes is every pattern the server routes ("GET /v1/templates/{id}"),
// in the order New registered them: the OpenAPI document must have an
// entry for each, and for no other.
func (s *Server) Routes() []string { return slices.Clone(s.routes) }
