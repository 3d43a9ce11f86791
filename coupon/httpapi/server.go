// Package httpapi is couponlink's HTTP/JSON write API: thin handlers over
// coupon.Store. Every error body has one shape:
//
//	{"error": {"code": "sold_out", "field": "...", "message": "..."}}
package httpapi

import (
	"context"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/couponlink/couponlink/api"
	"github.com/couponlink/couponlink/auth"
	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/inventory/view"
)

// Config wires the API.
type Config struct {
	Store *coupon.Store
	// Tokens, when it has any, are required as "Authorization: Bearer
	// <token>" on every path under /v1 (unknown ones included), each
	// route allowing the roles of RoleOf (auth.go); none: the API is open.
	Tokens *auth.Tokens
	// Token, when set and Tokens is nil, is the one admin token (named
	// auth.EnvTokenName), as COUPONLINK_API_TOKEN is.
	Token string
	// AllowedOrigins are the browser origins ("https://console.example")
	// besides the API's own that may write; see ParseAllowedOrigins.
	AllowedOrigins []string
	// AllowedHosts are the host names and addresses (no port) besides
	// loopback ones that an API without tokens answers under /v1, by the
	// request's Host; see ParseAllowedHosts and hosts.go.
	AllowedHosts []string
	Logger       *slog.Logger
	Registerer   prometheus.Registerer
	Gatherer     prometheus.Gatherer // served on /metrics; nil: no /metrics
	// Inventory reads GET /v1/templates/{id}/inventory; its DB defaults to
	// the Store's, and its Checkpoint, when set, adds the cdc's counters.
	Inventory view.Reader
	// CDCMetricsURL is the cdc's /metrics, read by GET /v1/cdc/status for
	// the gauges only the cdc process knows (leader, Redis behind); "": the
	// address the checkpoint's leading cdc recorded (cdc_process).
	CDCMetricsURL string
	// Legacy, when set, is the legacy shop served read-only by GET
	// /v1/legacy (couponlink api -mapping); nil: those routes are 404.
	Legacy *Legacy
}

// Server is the API's http.Handler.
type Server struct {
	cfg     Config
	store   *coupon.Store
	log     *slog.Logger
	metrics *metrics
	mux     *http.ServeMux
	tokens  *auth.Tokens
	origins *http.CrossOriginProtection
	// allowedHost is Config.AllowedHosts, for the Host check (hosts.go)
	allowedHost map[string]bool
	// allowed is the methods routed on each path, for the 405 answers; it
	// is written only while New registers the routes.
	allowed map[string][]string
	routes  []string // the registered patterns, for Routes
	isRoute map[string]bool
}

// New builds the API's routes.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Registerer == nil {
		cfg.Registerer = prometheus.NewRegistry()
	}
	if cfg.Inventory.DB == nil {
		cfg.Inventory.DB = cfg.Store.DB()
	}
	s := &Server{cfg: cfg, store: cfg.Store, log: cfg.Logger.With("component", "api"), metrics: newMetrics(cfg.Registerer), mux: http.NewServeMux(),
		allowed: map[string][]string{}, isRoute: map[string]bool{}, tokens: cfg.Tokens}
	cfg.Store.ObserveClaimGroups(func(n int) { s.metrics.claimGroups.Observe(float64(n)) })
	cfg.Store.ObserveRedemptionGroups(func(n int) { s.metrics.redeemGroups.Observe(float64(n)) })
	promauto.With(cfg.Registerer).NewCounterFunc(prometheus.CounterOpts{
		Name: "couponlink_api_claims_refused_from_memory_total",
		Help: "Claims of a bucket known sold out refused sold_out after one read, without a write transaction (only when -sold-out-memory is on).",
	}, func() float64 { return float64(cfg.Store.ClaimsRefusedFromMemory()) })
	if s.tokens == nil && cfg.Token != "" {
		s.tokens = auth.Static(map[string]auth.Identity{cfg.Token: {Name: auth.EnvTokenName, Role: auth.Admin}})
	}
	s.allowedHost = map[string]bool{}
	for _, h := range cfg.AllowedHosts {
		s.allowedHost[hostOf(h)] = true
	}
	s.origins = http.NewCrossOriginProtection()
	for _, o := range cfg.AllowedOrigins {
		if err := s.origins.AddTrustedOrigin(o); err != nil {
			s.log.Error("allowed origin ignored", "err", err)
		}
	}

	s.route("POST /v1/templates", s.createTemplate)
	s.route("GET /v1/templates/{id}", s.getTemplate)
	s.route("GET /v1/templates/{id}/inventory", s.inventory)
	s.route("POST /v1/claims", s.claim)
	s.route("POST /v1/redemptions", s.redeem)
	s.route("POST /v1/refunds", s.refund)
	s.route("POST /v1/voids", s.void)
	s.route("POST /v1/expire", s.expire)
	s.route("GET /v1/templates/{id}/channels", s.channels)
	s.route("GET /v1/templates/{id}/quota-policy", s.getQuotaPolicy)
	s.route("PUT /v1/templates/{id}/quota-policy", s.setQuotaPolicy)
	s.route("DELETE /v1/templates/{id}/quota-policy", s.resetQuotaPolicy)
	s.route("POST /v1/templates/{id}/quota-policy/preview", s.previewQuotaPolicy)
	s.route("GET /v1/user-coupons/{id}/history", s.history)
	s.route("GET /v1/templates", s.listTemplates)
	s.route("GET /v1/templates/{id}/quota-policy/history", s.policyHistory)
	s.route("GET /v1/templates/{id}/user-coupons", s.userCoupons)
	s.route("GET /v1/templates/{id}/trends", s.trends)
	s.route("GET /v1/reconcile/tasks", s.reconcileTasks)
	s.route("POST /v1/reconcile/tasks/{id}/resolve", s.resolveTask)
	s.route("GET /v1/findings", s.listFindings)
	s.route("POST /v1/findings/{fingerprint}/ack", s.ackFinding)
	s.route("POST /v1/findings/{fingerprint}/close", s.closeFinding)
	s.route("POST /v1/findings/{fingerprint}/reopen", s.reopenFinding)
	s.route("GET /v1/cdc/status", s.cdcStatus)
	s.route("GET /v1/legacy", s.legacyStatus)
	s.route("GET /v1/legacy/templates/{id}", s.legacyTemplate)
	s.route("GET /v1/legacy/templates/{id}/quota-policy", s.getLegacyPolicy)
	s.route("PUT /v1/legacy/templates/{id}/quota-policy", s.setLegacyPolicy)
	s.route("DELETE /v1/legacy/templates/{id}/quota-policy", s.resetLegacyPolicy)
	s.route("POST /v1/legacy/templates/{id}/quota-policy/preview", s.previewLegacyPolicy)
	s.route("GET /v1/legacy/templates/{id}/quota-policy/history", s.legacyPolicyHistory)
	s.route("GET /healthz", s.healthz)
	s.route("GET /openapi.json", s.openAPI)
	if cfg.Gatherer != nil {
		s.mux.Handle("GET /metrics", promhttp.HandlerFor(cfg.Gatherer, promhttp.HandlerOpts{}))
		s.routes = append(s.routes, "GET /metrics")
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, r, &coupon.Error{Code: api.CodeNotFound, Message: "no route " + r.Method + " " + r.URL.Path})
	})
	return s
}

// ParseAllowedOrigins reads a comma-separated list of origins, each
// scheme://host[:port] as a browser sends it in Origin, for
// Config.AllowedOrigins.
func ParseAllowedOrigins(list string) ([]string, error) {
	var out []string
	for o := range strings.SplitSeq(list, ",") {
		if o = strings.TrimSpace(o); o == "" {
			continue
		}
		if err := http.NewCrossOriginProtection().AddTrustedOrigin(o); err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, nil
}

// ServeHTTP implements http.Handler. Everything under /v1 needs a token
// whose role may call the route first (authorize, auth.go), so that a
// caller without one learns nothing of the routes: an unknown path or a
// wrong method is 401 too. Without tokens, it needs a Host the API
// knows instead (checkHost, hosts.go).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/v1" || strings.HasPrefix(r.URL.Path, "/v1/") {
		var err error
		if r, err = s.authorize(r); err != nil {
			_, pattern := s.mux.Handler(r) // one of the registered patterns: a bounded label
			e, _ := coupon.AsError(err)
			s.metrics.requests.WithLabelValues(pattern, strconv.Itoa(e.Code.Status())).Inc()
			s.fail(w, r, err)
			return
		}
	}
	s.mux.ServeHTTP(w, r)
}

type handlerFunc func(w http.ResponseWriter, r *http.Request) (status int, body any, err error)

// route registers a handler with metrics, the write guards and one error
// shape (ServeHTTP has checked the token); and,
// once per path, a 405 for the methods no route of that path has, whose
// Allow header lists the methods that it has.
func (s *Server) route(pattern string, h handlerFunc) {
	method, path, _ := strings.Cut(pattern, " ")
	count, took := s.metrics.route(pattern)
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		defer func() {
			count(rec.status).Inc()
			took().Observe(time.Since(start).Seconds())
		}()
		if err := s.checkWrite(r); err != nil {
			s.fail(rec, r, err)
			return
		}
		status, body, err := h(rec, r)
		if err != nil {
			s.fail(rec, r, err)
			return
		}
		writeJSON(rec, status, body)
	})
	if _, ok := s.allowed[path]; !ok {
		s.mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			allowed := strings.Join(s.allowed[path], ", ")
			w.Header().Set("Allow", allowed)
			s.fail(w, r, &coupon.Error{Code: api.CodeMethodNotAllowed, Message: r.Method + " is not allowed on " + path + "; use " + allowed})
		})
	}
	if strings.HasPrefix(path, "/v1/") {
		RoleOf(pattern) // panics when a write route has no role
	}
	s.isRoute[pattern] = true
	s.allowed[path] = append(s.allowed[path], method)
	s.routes = append(s.routes, pattern)
}

// checkWrite guards the write methods against a browser's cross-site
// requests, which a page can send without a CORS preflight only with a
// text/plain, form or multipart body: a browser's request from an origin
// that is neither the API's own (Sec-Fetch-Site, else Origin against
// Host) nor an allowed one is refused, and so is a body not declared JSON.
// A request without a body (DELETE, a bare POST /v1/expire) needs no
// Content-Type; one from outside a browser (no Origin) passes the first.
func (s *Server) checkWrite(r *http.Request) error {
	if err := s.origins.Check(r); err != nil {
		from := "another site"
		if o := r.Header.Get("Origin"); o != "" {
			from = fmt.Sprintf("origin %q", o)
		}
		return &coupon.Error{Code: api.CodeForbiddenOrigin, Message: "a browser's write from " + from +
			" is refused: only the API's own origin and those of COUPONLINK_API_ALLOWED_ORIGINS may write; nothing was written"}
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return nil
	}
	ct := r.Header.Get("Content-Type")
	if ct == "" && r.ContentLength == 0 {
		return nil
	}
	if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
		return &coupon.Error{Code: api.CodeUnsupportedMediaType, Message: fmt.Sprintf(
			"the body must be sent as Content-Type: application/json, not %q; nothing was written", ct)}
	}
	return nil
}

// fail writes err in the one error shape. Errors that are not domain
// errors are logged and answered without their details: 503 when the
// request was cancelled or MySQL cannot be reached (unreachable), else
// 500.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	e, ok := coupon.AsError(err)
	if !ok {
		e = s.failure(r, err)
	}
	WriteError(w, e)
}

// failure is the answer to an error that is not a domain error.
func (s *Server) failure(r *http.Request, err error) *coupon.Error {
	switch {
	case r.Context().Err() != nil:
		return &coupon.Error{Code: api.CodeUnavailable, Message: "the request was cancelled"}
	case unreachable(err):
		s.log.Warn("MySQL cannot be reached", "method", r.Method, "path", r.URL.Path, "err", err)
		return &coupon.Error{Code: api.CodeUnavailable, Message: "MySQL cannot be reached; nothing was written unless a retry says otherwise; " +
			"retry later; the reason is in the server log"}
	}
	s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	return &coupon.Error{Code: api.CodeInternal, Message: "internal error; nothing was written unless a retry says otherwise; see the server log"}
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

func pathID(r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, coupon.Invalid("id", "the id in the path must be a positive integer, got %q", r.PathValue("id"))
	}
	return id, nil
}

// readID answers a GET route of one thing: read's value of the path's
// {id}.
func readID[T any](r *http.Request, read func(ctx context.Context, id int64) (T, error)) (int, any, error) {
	id, err := pathID(r)
	if err != nil {
		return 0, nil, err
	}
	v, err := read(r.Context(), id)
	return http.StatusOK, v, err
}
