package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/coupon/httpapi"
)

// docRoutes is every operation of the document's paths, as a route
// pattern ("GET /v1/templates/{id}").
func docRoutes(doc *openapi3.T) []string {
	var out []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			out = append(out, method+" "+path)
		}
	}
	slices.Sort(out)
	return out
}

// TestOpenAPIDocumentsEveryRoute fails when a route is registered (New in
// server.go) without its entry in openapi.json, or the reverse.
func TestOpenAPIDocumentsEveryRoute(t *testing.T) {
	e := newEnv(t)
	doc, _ := openAPIDoc(t)
	registered := e.srv.Routes()
	require.NotEmpty(t, registered)
	documented := docRoutes(doc)
	for _, r := range registered {
		if !slices.Contains(documented, r) {
			method, path, _ := strings.Cut(r, " ")
			t.Errorf("route %q is registered (coupon/httpapi/server.go) but coupon/httpapi/openapi.json has no entry for it: "+
				"add paths[%q].%s (with its requestBody and responses; copy an entry of a route like it, e.g. paths[\"/v1/claims\"].post)",
				r, path, strings.ToLower(method))
		}
	}
	for _, d := range documented {
		if !slices.Contains(registered, d) {
			t.Errorf("coupon/httpapi/openapi.json documents %q, which the server does not route: remove the entry or register the route", d)
		}
	}
}

// TestOpenAPIExamplesMatchTheirSchemas checks every example of a request
// body, a parameter and a schema against its schema, and that every
// operation with a body has at least one example.
func TestOpenAPIExamplesMatchTheirSchemas(t *testing.T) {
	doc, _ := openAPIDoc(t)
	opt := openapi3.EnableJSONSchema2020()
	checked := 0
	for _, route := range docRoutes(doc) {
		method, path, _ := strings.Cut(route, " ")
		op := doc.Paths.Value(path).GetOperation(method)
		params := append(slices.Clone(doc.Paths.Value(path).Parameters), op.Parameters...)
		for _, p := range params {
			if p.Value.Example != nil {
				assert.NoError(t, p.Value.Schema.Value.VisitJSON(jsonValue(t, p.Value.Example), opt), "%s parameter %s", route, p.Value.Name)
				checked++
			}
		}
		if op.RequestBody == nil {
			continue
		}
		mt := op.RequestBody.Value.Content.Get("application/json")
		require.NotNil(t, mt, route)
		assert.NotEmpty(t, mt.Examples, "%s has a request body without examples", route)
		for name, ex := range mt.Examples {
			err := mt.Schema.Value.VisitJSON(jsonValue(t, ex.Value.Value), opt)
			assert.NoError(t, err, "%s: example %q", route, name)
			checked++
		}
	}
	for name, s := range doc.Components.Schemas {
		if s.Value.Example != nil {
			assert.NoError(t, s.Value.VisitJSON(jsonValue(t, s.Value.Example), opt), "components.schemas.%s example", name)
			checked++
		}
	}
	assert.Greater(t, checked, 15)
}

// TestOpenAPIExampleRefused proves that the example check can fail: an
// example the schema refuses is refused.
func TestOpenAPIExampleRefused(t *testing.T) {
	doc, _ := openAPIDoc(t)
	claim := doc.Components.Schemas["ClaimRequest"].Value
	for _, bad := range []string{`{"template_id": 1, "user_id": "u", "channel": "app"}`, `{"template_id": "1", "user_id": "u", "channel": "app", "request_id": "r"}`,
		`{"template_id": 1, "user_id": "u", "channel": "app", "request_id": "r", "extra": 1}`} {
		assert.Error(t, claim.VisitJSON(jsonValue(t, json.RawMessage(bad)), openapi3.EnableJSONSchema2020()), bad)
	}
}

// jsonValue is v as encoding/json decodes it into any.
func jsonValue(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	var out any
	require.NoError(t, json.Unmarshal(b, &out))
	return out
}

// TestOpenAPIServedWithoutToken: GET /openapi.json is public documentation,
// the very document of the repository; /v1 still needs the token.
func TestOpenAPIServedWithoutToken(t *testing.T) {
	e := newEnv(t, envConfig{token: "s3cret"})
	anon := newClient(e.url, "")
	t.Cleanup(anon.hc.CloseIdleConnections)
	r, err := anon.do("GET", "/openapi.json", nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, r.Status, "%s", r)
	assert.Equal(t, "application/json", r.Header.Get("Content-Type"))
	assert.JSONEq(t, string(httpapi.OpenAPI), string(r.Body))
	r, err = anon.do("GET", "/v1/templates/1", nil)
	require.NoError(t, err)
	expectError(t, r, http.StatusUnauthorized, "unauthorized")
	r, err = anon.do("POST", "/openapi.json", nil)
	require.NoError(t, err)
	expectError(t, r, http.StatusMethodNotAllowed, "method_not_allowed")
}

// TestConformanceCatchesAnUndocumentedAnswer proves the wrapper fails a
// test: an answer with a field the document does not have is reported.
func TestConformanceCatchesAnUndocumentedAnswer(t *testing.T) {
	rec := &recordingTB{TB: t}
	bad := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httpapi.WriteJSON(w, http.StatusOK, map[string]any{"status": "ok", "time": "2030-01-01T00:00:00Z", "extra": 1})
	})
	h := conform(rec, bad)
	for _, path := range []string{"/healthz", "/nowhere"} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", path, nil))
	}
	require.Len(t, rec.errors, 2, "%q", rec.errors)
	assert.Contains(t, rec.errors[0], "does not describe the answer to GET /healthz")
	assert.Contains(t, rec.errors[1], "GET /nowhere is not in openapi.json")
}

// recordingTB records Errorf instead of failing.
type recordingTB struct {
	testing.TB
	errors []string
}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

// TestConformanceValidatorsAgree: the suite's wrapper validates with
// kin-openapi's native validator (fastValidation); on the 3.1 keywords of
// the document it gives the verdicts of the JSON Schema 2020-12 one.
func TestConformanceValidatorsAgree(t *testing.T) {
	doc, _ := openAPIDoc(t)
	policy := `"effective":{"mode":"off","low":0.2,"high":0.8,"min_claims":1,"max_share":0.5,"reserve":0.1,"cooldown_seconds":1,"min_age_seconds":1},` +
		`"defaults":{"mode":"off","low":0.2,"high":0.8,"min_claims":1,"max_share":0.5,"reserve":0.1,"cooldown_seconds":1,"min_age_seconds":1},` +
		`"override":{},"version":0,"updated_by":"","template":1`
	channel := `"channel":"app","quota":1,"claimed":0,"held":0,"used":0,"expired":0,"returned":0,"released":0,"claimable":1`
	for _, c := range []struct {
		schema, body string
		valid        bool
	}{
		{"PolicyView", `{` + policy + `,"updated_at":null}`, true},
		{"PolicyView", `{` + policy + `,"updated_at":"2030-01-01T00:00:00Z"}`, true},
		{"PolicyView", `{` + policy + `,"updated_at":5}`, false},
		{"PolicyView", `{` + policy + `}`, false},
		{"ChannelView", `{` + channel + `,"redemption_rate":null,"last_transfer":null}`, true},
		{"ChannelView", `{` + channel + `,"redemption_rate":0.5,"last_transfer":{"id":1,"decision":"d","from":"a","to":"b","amount":1,"rule":"r","mode":"auto","at":"2030-01-01T00:00:00Z"}}`, true},
		{"ChannelView", `{` + channel + `,"redemption_rate":"high","last_transfer":null}`, false},
		{"ChannelView", `{` + channel + `,"redemption_rate":null,"last_transfer":"x"}`, false},
		{"ErrorOf409", `{"error":{"code":"sold_out","message":"m"}}`, true},
		{"ErrorOf409", `{"error":{"code":"invalid_argument","message":"m"}}`, false},
		{"ErrorOf409", `{"error":{"code":"sold_out","message":"m","extra":1}}`, false},
		{"ErrorOf400", `{"error":{"code":"invalid_argument","field":"user_id","message":"m"}}`, true},
		{"ErrorOf400", `{"error":{"code":"not_found","message":"m"}}`, false},
		{"Health", `{"status":"ok","time":"2030-01-01T00:00:00Z"}`, true},
		{"Health", `{"status":"down","time":"2030-01-01T00:00:00Z"}`, false},
		{"QuotaPolicyChange", `{"mode":null,"low":0.1,"changed_by":"a","reason":"b"}`, true},
		{"QuotaPolicyChange", `{"mode":3,"changed_by":"a","reason":"b"}`, false},
		{"CreateTemplateRequest", `{"name":"n","total_quota":1,"channels":{"a":1},"valid_seconds":1,"per_user_limit":null}`, true},
		{"CreateTemplateRequest", `{"name":"n","total_quota":1,"channels":{"a":-1},"valid_seconds":1}`, false},
	} {
		s := doc.Components.Schemas[c.schema].Value
		v := jsonValue(t, json.RawMessage(c.body))
		native, v2020 := s.VisitJSON(v), s.VisitJSON(v, openapi3.EnableJSONSchema2020())
		assert.Equal(t, c.valid, native == nil, "native validator, %s %s: %v", c.schema, c.body, native)
		assert.Equal(t, c.valid, v2020 == nil, "2020-12 validator, %s %s: %v", c.schema, c.body, v2020)
	}
}
