package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/coupon/httpapi"
)

// The API's answers checked against its OpenAPI document: every env of
// the suite serves through conformance, which fails the test on a response
// the document does not describe (status, content type, body schema), and
// on a request the document refuses that the server accepted (2xx/3xx).
// A request the document accepts may still be refused by the server: the
// schema cannot say everything (the channels must add up to total_quota).

var (
	docOnce   sync.Once
	docLoaded *openapi3.T
	docRouter routers.Router
	docErr    error
)

// openAPIDoc is the embedded document, loaded and validated once, and its
// router; the servers are dropped so that the router matches any host.
func openAPIDoc(t testing.TB) (*openapi3.T, routers.Router) {
	t.Helper()
	docOnce.Do(func() {
		loader := openapi3.NewLoader()
		if docLoaded, docErr = loader.LoadFromData(httpapi.OpenAPI); docErr != nil {
			return
		}
		if docErr = docLoaded.Validate(context.Background()); docErr != nil {
			return
		}
		docLoaded.Servers = nil
		docRouter, docErr = gorillamux.NewRouter(fastValidation(docLoaded))
	})
	require.NoError(t, docErr, "coupon/httpapi/openapi.json")
	return docLoaded, docRouter
}

// fastValidation is a copy of doc that openapi3filter validates with
// kin-openapi's native validator: for a 3.1 document it would use its JSON
// Schema 2020-12 validator, which compiles the schema again on every call
// (the suite took 4 times as long under -race). The native validator knows
// the 3.1 keywords this document uses (type arrays with "null", const,
// oneOf with {"type": "null"}); TestOpenAPIExamplesMatchTheirSchemas and
// TestConformanceValidatorsAgree use the 2020-12 one.
func fastValidation(doc *openapi3.T) *openapi3.T {
	fast := *doc
	fast.OpenAPI = "3.0.3"
	return &fast
}

// conformance wraps the API's handler; each request is answered into a
// recorder, checked, then copied to the client.
type conformance struct {
	t      testing.TB
	doc    *openapi3.T
	router routers.Router
	next   http.Handler
}

func conform(t testing.TB, next http.Handler) http.Handler {
	doc, router := openAPIDoc(t)
	return &conformance{t: t, doc: doc, router: router, next: next}
}

func (c *conformance) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	rec := httptest.NewRecorder()
	c.next.ServeHTTP(rec, r)
	for k, vs := range rec.Header() {
		w.Header()[k] = vs
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
	if r.Method != http.MethodHead {
		check := r.Clone(context.WithoutCancel(r.Context()))
		check.Body = io.NopCloser(bytes.NewReader(body))
		c.check(check, rec)
	}
}

// check validates one exchange against the document.
func (c *conformance) check(r *http.Request, rec *httptest.ResponseRecorder) {
	ctx := r.Context()
	what := r.Method + " " + r.URL.RequestURI()
	route, params, err := c.router.FindRoute(r)
	if err != nil {
		c.checkUnrouted(what, err, rec)
		return
	}
	in := &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	if err := openapi3filter.ValidateRequest(ctx, in); err != nil && rec.Code < 400 {
		c.t.Errorf("openapi.json refuses the request %s (%v), but the server answered %d: %s", what, err, rec.Code, rec.Body)
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: rec.Code, Header: rec.Header(),
		Body: io.NopCloser(bytes.NewReader(rec.Body.Bytes())), Options: &openapi3filter.Options{IncludeResponseStatus: true}}
	if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
		c.t.Errorf("openapi.json does not describe the answer to %s: %d %s: %v", what, rec.Code, rec.Body, err)
	}
}

// checkUnrouted checks the answer to a path or method the document does
// not have: it must be the error shape, 401 (under /v1 without the token),
// 403 (under /v1, without tokens, a Host the API does not know), 404 (no
// such path) or 405 (no such method).
func (c *conformance) checkUnrouted(what string, routeErr error, rec *httptest.ResponseRecorder) {
	schemas := map[int]string{http.StatusUnauthorized: "ErrorOf401", http.StatusForbidden: "ErrorOf403", http.StatusNotFound: "ErrorOf404",
		http.StatusMethodNotAllowed: "ErrorOf405"}
	name, ok := schemas[rec.Code]
	if !ok {
		c.t.Errorf("%s is not in openapi.json (%v) but the server answered %d: %s", what, routeErr, rec.Code, rec.Body)
		return
	}
	if err := validateJSON(c.doc, name, rec.Body.Bytes()); err != nil {
		c.t.Errorf("the answer to %s (not in openapi.json: %v) is not %s: %s: %v", what, routeErr, name, rec.Body, err)
	}
}

// validateJSON checks a JSON value against a schema of components.
func validateJSON(doc *openapi3.T, schema string, body []byte) error {
	v, err := decodeJSONValue(body)
	if err != nil {
		return err
	}
	return doc.Components.Schemas[schema].Value.VisitJSON(v, openapi3.EnableJSONSchema2020())
}

func decodeJSONValue(body []byte) (any, error) {
	var v any
	err := json.Unmarshal(body, &v)
	return v, err
}
