// Package route is the front of a couponlink-native deployment over several
// primaries (coupon/primaries): one http.Handler that sends each request to
// the API server (httpapi.Server) of the primary that owns what it names,
// so the handlers stay as they are and every state change stays in one
// primary's transaction.
//
//   - /v1/templates/{id}/...: the template's owner; /v1/user-coupons/{id}/...:
//     the coupon's owner (primaries.Owner);
//   - POST /v1/claims: template_id of the body; POST /v1/redemptions and
//     /v1/refunds: user_coupon_id of the body;
//   - POST /v1/templates: the primary named by ?primary=NAME, else the one
//     Config.Place picks (primaries.Place: the fewest templates); the
//     template lives there for good;
//   - POST /v1/voids: split by owner (voids.go); POST /v1/expire and
//     /healthz: every primary, the answers summed;
//   - anything else, and every request the front cannot read (no token, a
//     malformed id or body), goes to the first primary, which answers it as
//     a single server does.
//
// The body is read once (at most httpapi.MaxBodyBytes) and its very bytes
// are passed on.
package route

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/couponlink/couponlink/api"
	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/coupon/httpapi"
	"github.com/couponlink/couponlink/coupon/primaries"
)

// API is one primary's API server (an *httpapi.Server).
type API interface {
	http.Handler
	Authorized(r *http.Request) bool
}

// Primary is one primary of the list, in the list's order.
type Primary struct {
	Name string
	API  API
}

// Config wires the front.
type Config struct {
	Primaries []Primary
	// Place picks the primary (its index) of a template created without
	// ?primary=; primaries.Place in the command.
	Place    func(ctx context.Context) (int, error)
	Gatherer prometheus.Gatherer // served on /metrics; nil: no /metrics
	Logger   *slog.Logger
}

// Router is the front's http.Handler.
type Router struct {
	cfg Config
	log *slog.Logger
	mux *http.ServeMux
}

// New builds the front's routes.
func New(cfg Config) (*Router, error) {
	if len(cfg.Primaries) == 0 {
		return nil, errors.New("route: no primaries")
	}
	if cfg.Place == nil {
		return nil, errors.New("route: Config.Place is nil")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	rt := &Router{cfg: cfg, log: cfg.Logger.With("component", "api"), mux: http.NewServeMux()}
	rt.mux.HandleFunc("GET /healthz", rt.healthz)
	if cfg.Gatherer != nil {
		rt.mux.Handle("GET /metrics", promhttp.HandlerFor(cfg.Gatherer, promhttp.HandlerOpts{}))
	}
	rt.mux.HandleFunc("POST /v1/templates", rt.create)
	for _, p := range []string{"/v1/templates/{id}", "/v1/templates/{id}/{rest...}", "/v1/user-coupons/{id}", "/v1/user-coupons/{id}/{rest...}"} {
		rt.mux.HandleFunc(p, rt.byPath)
	}
	rt.mux.HandleFunc("POST /v1/claims", rt.byBody(func(b idFields) int64 { return b.TemplateID }))
	rt.mux.HandleFunc("POST /v1/redemptions", rt.byBody(func(b idFields) int64 { return b.UserCouponID }))
	rt.mux.HandleFunc("POST /v1/refunds", rt.byBody(func(b idFields) int64 { return b.UserCouponID }))
	rt.mux.HandleFunc("POST /v1/voids", rt.voids)
	rt.mux.HandleFunc("POST /v1/expire", rt.expire)
	rt.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { rt.forward(w, r, 0, nil) })
	return rt, nil
}

// ServeHTTP implements http.Handler. A request under /v1 without the token
// goes to the first primary before anything is read: it answers 401 and
// the caller learns nothing of the routes, as from a single server.
func (rt *Router) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if (r.URL.Path == "/v1" || strings.HasPrefix(r.URL.Path, "/v1/")) && !rt.cfg.Primaries[0].API.Authorized(r) {
		rt.forward(w, r, 0, nil)
		return
	}
	rt.mux.ServeHTTP(w, r)
}

// owner is the index of the primary that owns id; the first primary for
// an id below 1 (it answers the 400 or 404 a single server gives).
func (rt *Router) owner(id int64) int {
	return max(primaries.Owner(id, len(rt.cfg.Primaries)), 0)
}

// byPath routes by the id in the path: a template's, a coupon's.
func (rt *Router) byPath(w http.ResponseWriter, r *http.Request) {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64) // as httpapi reads it
	rt.forward(w, r, rt.owner(id), nil)
}

// idFields are the ids a body may be routed by. A body the server will
// refuse may read as anything here: any primary refuses it alike.
type idFields struct {
	TemplateID   int64 `json:"template_id"`
	UserCouponID int64 `json:"user_coupon_id"`
}

// byBody routes by an id of the body.
func (rt *Router) byBody(id func(idFields) int64) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, ok := rt.read(w, r)
		if !ok {
			return
		}
		var b idFields
		_ = json.Unmarshal(body, &b)
		rt.forward(w, r, rt.owner(id(b)), body)
	}
}

// create places a new template: on the primary named by ?primary=, else
// on the one Place picks.
func (rt *Router) create(w http.ResponseWriter, r *http.Request) {
	k := -1
	if name := r.URL.Query().Get("primary"); name != "" {
		var names []string
		for i, p := range rt.cfg.Primaries {
			if p.Name == name {
				k = i
			}
			names = append(names, p.Name)
		}
		if k < 0 {
			httpapi.WriteError(w, coupon.Invalid("primary", "unknown primary %q; the primaries are %s", name, strings.Join(names, ", ")))
			return
		}
	} else {
		var err error
		if k, err = rt.cfg.Place(r.Context()); err != nil {
			rt.log.Error("place a new template", "err", err)
			httpapi.WriteError(w, &coupon.Error{Code: api.CodeUnavailable, Message: "no primary answers; nothing was written; the reason is in the server log"})
			return
		}
	}
	rt.forward(w, r, k, nil)
}

// read reads r's body once (readBody); a body it cannot read goes on to
// the first primary, and ok is false.
func (rt *Router) read(w http.ResponseWriter, r *http.Request) (body []byte, ok bool) {
	if body, ok = readBody(r); !ok {
		rt.forward(w, r, 0, nil)
	}
	return body, ok
}

// readBody reads r's body once. ok is false when it is larger than
// httpapi.MaxBodyBytes or cannot be read: r's body is then what was read
// followed by the rest, for the first primary to refuse as a single server
// does.
func readBody(r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(io.LimitReader(r.Body, httpapi.MaxBodyBytes+1))
	if err != nil || len(body) > httpapi.MaxBodyBytes {
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
		return nil, false
	}
	return body, true
}

// forward serves r by primary k; a non-nil body replaces r's (read before),
// with r's Content-Length as the caller sent it.
func (rt *Router) forward(w http.ResponseWriter, r *http.Request, k int, body []byte) {
	if body != nil {
		r = withBody(r, body, r.ContentLength)
	}
	rt.cfg.Primaries[k].API.ServeHTTP(w, r)
}

func withBody(r *http.Request, body []byte, length int64) *http.Request {
	r = r.Clone(r.Context())
	r.Body, r.ContentLength, r.GetBody = io.NopCloser(bytes.NewReader(body)), length, nil
	return r
}

// answer is one primary's answer to a request of a fan-out.
type answer struct {
	status int
	header http.Header
	body   bytes.Buffer
}

func (a *answer) Header() http.Header { return a.header }

func (a *answer) WriteHeader(code int) {
	if a.status == 0 {
		a.status = code
	}
}

func (a *answer) Write(b []byte) (int, error) {
	a.WriteHeader(http.StatusOK)
	return a.body.Write(b)
}

// relay writes the answer to the caller as it is.
func (a *answer) relay(w http.ResponseWriter) {
	for k, v := range a.header {
		w.Header()[k] = v
	}
	w.WriteHeader(a.status)
	_, _ = w.Write(a.body.Bytes())
}

// decode reads a 200 answer's body into v; an answer that does not read
// is the front's internal error.
func (a *answer) decode(v any) error {
	if err := json.Unmarshal(a.body.Bytes(), v); err != nil {
		return fmt.Errorf("read an answer of a primary: %w", err)
	}
	return nil
}

// call serves r by primary k with the given body and keeps the answer.
func (rt *Router) call(r *http.Request, k int, body []byte, length int64) *answer {
	a := &answer{header: http.Header{}}
	rt.cfg.Primaries[k].API.ServeHTTP(a, withBody(r, body, length))
	return a
}

// fanOut runs call for each index in ks at once and returns the answers
// in the order of ks.
func fanOut(ks []int, call func(k int) *answer) []*answer {
	out := make([]*answer, len(ks))
	var wg sync.WaitGroup
	for i, k := range ks {
		wg.Go(func() { out[i] = call(k) })
	}
	wg.Wait()
	return out
}

// failed relays the first answer that is not 200 and says whether there
// was one.
func failed(w http.ResponseWriter, answers []*answer) bool {
	for _, a := range answers {
		if a.status != http.StatusOK {
			a.relay(w)
			return true
		}
	}
	return false
}

// internal answers 500 for an error of the front itself, logged.
func (rt *Router) internal(w http.ResponseWriter, r *http.Request, err error) {
	rt.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	httpapi.WriteError(w, &coupon.Error{Code: api.CodeInternal, Message: "internal error; retry the request; see the server log"})
}
