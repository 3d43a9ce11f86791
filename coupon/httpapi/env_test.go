package httpapi_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/auth"
	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/coupon/httpapi"
	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/inventory/view"
)

// The shared fixtures of the API tests: a fresh migrated database, a store
// on a fake clock, the real handler behind a real HTTP server, and a client.

// fakeClock is a clock the test moves by hand; safe for concurrent use.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *fakeClock) Now() time.Time          { return time.Unix(0, c.ns.Load()).UTC() }
func (c *fakeClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

type env struct {
	db    *sql.DB
	store *coupon.Store
	clock *fakeClock
	reg   *prometheus.Registry
	url   string
	api   *client
	srv   *httpapi.Server
}

type envConfig struct {
	token      string
	tokens     *auth.Tokens     // httpapi.Config.Tokens (the client sends token)
	origins    []string         // httpapi.Config.AllowedOrigins
	hosts      []string         // httpapi.Config.AllowedHosts
	realClock  bool             // time.Now instead of the fake clock
	now        func() time.Time // overrides both
	db         *sql.DB          // share this database (a second API process) instead of a fresh one
	combine    bool             // the claim and redemption combiners on (also on for every env when COUPONLINK_COMBINE_CLAIMS / _REDEMPTIONS=true)
	cdcMetrics string           // httpapi.Config.CDCMetricsURL
	checkpoint string           // httpapi.Config.Inventory.Checkpoint
}

// combineFromEnv runs the whole suite with a combiner on.
func combineFromEnv(name string) bool { return os.Getenv("COUPONLINK_COMBINE_"+name) == "true" }

// newEnv starts the API on a fresh database. The store's clock is e.clock
// unless cfg says otherwise.
func newEnv(t testing.TB, cfgs ...envConfig) *env {
	t.Helper()
	var cfg envConfig
	if len(cfgs) > 0 {
		cfg = cfgs[0]
	}
	db := cfg.db
	if db == nil {
		db, _ = testenv.MySQL(t)
	}
	e := &env{db: db, clock: newFakeClock(), reg: prometheus.NewRegistry()}
	now := e.clock.Now
	if cfg.realClock {
		now = time.Now
	}
	if cfg.now != nil {
		now = cfg.now
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := coupon.New(coupon.Config{DB: db, Now: now, Logger: quiet, CombineClaims: cfg.combine || combineFromEnv("CLAIMS"),
		CombineRedemptions: cfg.combine || combineFromEnv("REDEMPTIONS")})
	require.NoError(t, err)
	e.store = store
	e.srv = httpapi.New(httpapi.Config{Store: store, Token: cfg.token, Tokens: cfg.tokens, AllowedOrigins: cfg.origins, AllowedHosts: cfg.hosts, Logger: quiet,
		Registerer: e.reg, Gatherer: e.reg, CDCMetricsURL: cfg.cdcMetrics, Inventory: view.Reader{Checkpoint: cfg.checkpoint}})
	var h http.Handler = e.srv
	if _, bench := t.(*testing.B); !bench {
		h = conform(t, h) // every exchange checked against openapi.json
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	e.url = srv.URL
	e.api = newClient(srv.URL, cfg.token)
	t.Cleanup(e.api.hc.CloseIdleConnections)
	return e
}

// client speaks JSON to the API. Its methods return errors instead of
// failing the test, so that goroutines can use them.
type client struct {
	base, token string
	hc          *http.Client
}

func newClient(base, token string) *client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 128, 128
	return &client{base: base, token: token, hc: &http.Client{Transport: tr, Timeout: 60 * time.Second}}
}

// reply is an HTTP answer: status, raw body, headers.
type reply struct {
	Status int
	Body   []byte
	Header http.Header
}

// rawBody is sent as it is; any other body is encoded as JSON.
type rawBody string

func (c *client) do(method, path string, body any) (reply, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case rawBody:
		rd = strings.NewReader(string(b))
	case []byte:
		rd = bytes.NewReader(b)
	default:
		buf, err := json.Marshal(b)
		if err != nil {
			return reply{}, err
		}
		rd = bytes.NewReader(buf)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, c.base+path, rd)
	if err != nil {
		return reply{}, err
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	res, err := c.hc.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer res.Body.Close()
	buf, err := io.ReadAll(res.Body)
	return reply{Status: res.StatusCode, Body: buf, Header: res.Header}, err
}

func (r reply) String() string { return fmt.Sprintf("%d %s", r.Status, bytes.TrimSpace(r.Body)) }

// decode reads the body into v.
func (r reply) decode(v any) error {
	if err := json.Unmarshal(r.Body, v); err != nil {
		return fmt.Errorf("decode %s: %w", r, err)
	}
	return nil
}

// apiError is the one error shape.
type apiError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field"`
}

// errCode is the error code of a failed reply ("" for a 2xx).
func (r reply) errCode() string {
	var b struct{ Error apiError }
	if r.Status < 300 || json.Unmarshal(r.Body, &b) != nil {
		return ""
	}
	return b.Error.Code
}

// must sends a request from the test goroutine and fails the test on a
// transport error.
func (e *env) must(t *testing.T, method, path string, body any) reply {
	t.Helper()
	r, err := e.api.do(method, path, body)
	require.NoError(t, err, "%s %s", method, path)
	return r
}

// expect sends a request, checks its status, and decodes a 2xx body into out.
func (e *env) expect(t *testing.T, status int, method, path string, body, out any) reply {
	t.Helper()
	r := e.must(t, method, path, body)
	require.Equal(t, status, r.Status, "%s %s: %s", method, path, r)
	if out != nil {
		require.NoError(t, r.decode(out))
	}
	return r
}

// expectError checks a failed reply: its status, code and the exact shape
// {"error":{"code","message"[,"field"]}}; it returns the error.
func expectError(t *testing.T, r reply, status int, code string) apiError {
	t.Helper()
	require.Equal(t, status, r.Status, "reply %s", r)
	assert.Equal(t, "application/json", r.Header.Get("Content-Type"))
	var outer map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(r.Body, &outer), "reply %s", r)
	require.Len(t, outer, 1, "the error body has exactly one key, error: %s", r)
	var inner map[string]any
	require.NoError(t, json.Unmarshal(outer["error"], &inner), "reply %s", r)
	for k, v := range inner {
		require.Contains(t, []string{"code", "message", "field"}, k, "unexpected key in %s", r)
		s, ok := v.(string)
		require.True(t, ok && s != "", "%s must be a non-empty string in %s", k, r)
	}
	var e apiError
	require.NoError(t, json.Unmarshal(outer["error"], &e))
	require.Equal(t, code, e.Code, "reply %s", r)
	require.NotEmpty(t, e.Message, "reply %s", r)
	return e
}

// Typed answers of the API.

type claimReply struct {
	UserCouponID int64     `json:"user_coupon_id"`
	TemplateID   int64     `json:"template_id"`
	UserID       string    `json:"user_id"`
	Channel      string    `json:"channel"`
	Status       string    `json:"status"`
	ExpiresAt    time.Time `json:"expires_at"`
	Replayed     bool      `json:"replayed"`
}

type redeemReply struct {
	RedemptionID int64  `json:"redemption_id"`
	UserCouponID int64  `json:"user_coupon_id"`
	OrderID      string `json:"order_id"`
	Status       string `json:"status"`
	Replayed     bool   `json:"replayed"`
}

type refundReply struct {
	FlowID       int64  `json:"flow_id"`
	UserCouponID int64  `json:"user_coupon_id"`
	RedemptionID int64  `json:"redemption_id"`
	OrderID      string `json:"order_id"`
	Mode         string `json:"mode"`
	Status       string `json:"status"`
	Replayed     bool   `json:"replayed"`
}

type voidReply struct {
	RequestID string              `json:"request_id"`
	Results   []coupon.VoidResult `json:"results"`
	Counts    map[string]int      `json:"counts"`
}

type expireReply struct {
	Expired int  `json:"expired"`
	More    bool `json:"more"`
}

type inventoryReply struct {
	TemplateID int64 `json:"template_id"`
	TotalQuota int64 `json:"total_quota"`
	view.Counts
	Claimable int64                  `json:"claimable"` // as answered (Counts computes it too)
	Frozen    int64                  `json:"frozen"`
	Channels  map[string]view.Counts `json:"channels"`
	Conserved bool                   `json:"conserved"`
}

// Scripted steps for the test goroutine.

var seq atomic.Int64

// uniq is a name no other call returns.
func uniq(prefix string) string { return fmt.Sprintf("%s-%d", prefix, seq.Add(1)) }

func (e *env) template(t *testing.T, body map[string]any) int64 {
	t.Helper()
	b := map[string]any{"name": "campaign", "total_quota": 100, "channels": map[string]int{"app": 60, "sms": 40}, "valid_seconds": 3600}
	for k, v := range body {
		b[k] = v
	}
	var out struct{ ID int64 }
	e.expect(t, http.StatusCreated, "POST", "/v1/templates", b, &out)
	require.Positive(t, out.ID)
	return out.ID
}

func (e *env) claim(t *testing.T, tpl int64, user, channel string) claimReply {
	t.Helper()
	var out claimReply
	e.expect(t, http.StatusCreated, "POST", "/v1/claims",
		map[string]any{"template_id": tpl, "user_id": user, "channel": channel, "request_id": uniq("claim")}, &out)
	require.Equal(t, "AVAILABLE", out.Status)
	return out
}

func (e *env) redeem(t *testing.T, id int64, order string) redeemReply {
	t.Helper()
	var out redeemReply
	e.expect(t, http.StatusCreated, "POST", "/v1/redemptions", map[string]any{"user_coupon_id": id, "order_id": order}, &out)
	require.Equal(t, "USED", out.Status)
	return out
}

// usedCoupon is a coupon of a new default template claimed by u1 on app
// and redeemed by order o1: where every refund case starts.
func (e *env) usedCoupon(t *testing.T) (tpl int64, c claimReply) {
	t.Helper()
	tpl = e.template(t, nil)
	c = e.claim(t, tpl, "u1", "app")
	e.redeem(t, c.UserCouponID, "o1")
	return tpl, c
}

func (e *env) refund(t *testing.T, id int64, order, mode string) refundReply {
	t.Helper()
	var out refundReply
	e.expect(t, http.StatusOK, "POST", "/v1/refunds", map[string]any{"user_coupon_id": id, "order_id": order, "mode": mode}, &out)
	require.False(t, out.Replayed)
	return out
}

func (e *env) void(t *testing.T, requestID string, ids ...int64) voidReply {
	t.Helper()
	var out voidReply
	e.expect(t, http.StatusOK, "POST", "/v1/voids",
		map[string]any{"user_coupon_ids": ids, "reason": "fraud", "operator": "ops-1", "request_id": requestID}, &out)
	require.Len(t, out.Results, len(ids))
	return out
}

func (e *env) expire(t *testing.T, body any) expireReply {
	t.Helper()
	var out expireReply
	e.expect(t, http.StatusOK, "POST", "/v1/expire", body, &out)
	return out
}

func (e *env) inventory(t *testing.T, tpl int64) inventoryReply {
	t.Helper()
	var out inventoryReply
	e.expect(t, http.StatusOK, "GET", fmt.Sprintf("/v1/templates/%d/inventory", tpl), nil, &out)
	return out
}

// Reading MySQL directly.

// status is the stored status of a coupon.
func (e *env) status(t *testing.T, id int64) coupon.Status {
	t.Helper()
	var s coupon.Status
	require.NoError(t, e.db.QueryRow(`SELECT status FROM user_coupon WHERE id = ?`, id).Scan(&s))
	return s
}

// count runs a COUNT(*) query.
func (e *env) count(t *testing.T, q string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, e.db.QueryRow(q, args...).Scan(&n), q)
	return n
}

// strings is the first column of every row of a query.
func (e *env) strings(t *testing.T, q string, args ...any) []string {
	t.Helper()
	rows, err := e.db.Query(q, args...)
	require.NoError(t, err, q)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s sql.NullString
		require.NoError(t, rows.Scan(&s))
		out = append(out, s.String)
	}
	require.NoError(t, rows.Err())
	return out
}

// dump is every row of a query, each as a string, for before/after comparisons.
func (e *env) dump(t *testing.T, q string, args ...any) []string {
	t.Helper()
	cols, rows := queryRows(t, e.db, q, args...)
	var out []string
	for _, vals := range rows {
		var b strings.Builder
		for i, v := range vals {
			if !v.Valid {
				fmt.Fprintf(&b, "%s=NULL ", cols[i])
			} else {
				fmt.Fprintf(&b, "%s=%s ", cols[i], v.String)
			}
		}
		out = append(out, b.String())
	}
	return out
}

// queryRows is a query's column names and every row, each column a
// sql.NullString (not Valid: NULL).
func queryRows(t *testing.T, db *sql.DB, q string, args ...any) (cols []string, out [][]sql.NullString) {
	t.Helper()
	rows, err := db.Query(q, args...)
	require.NoError(t, err, q)
	defer rows.Close()
	cols, err = rows.Columns()
	require.NoError(t, err)
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		require.NoError(t, rows.Scan(ptrs...))
		out = append(out, vals)
	}
	require.NoError(t, rows.Err())
	return cols, out
}

// ledgers is the whole write-path state: every table the API writes except
// void_request (which records a batch even when it changes nothing).
type ledgers struct {
	Templates, Quotas, Coupons, UserClaims, Redemptions, Flows []string
}

func (e *env) ledgers(t *testing.T) ledgers {
	t.Helper()
	return ledgers{
		Templates:   e.dump(t, `SELECT * FROM coupon_template ORDER BY id`),
		Quotas:      e.dump(t, `SELECT * FROM channel_quota ORDER BY template_id, channel`),
		Coupons:     e.dump(t, `SELECT * FROM user_coupon ORDER BY id`),
		UserClaims:  e.dump(t, `SELECT * FROM user_claim ORDER BY template_id, user_id`),
		Redemptions: e.dump(t, `SELECT * FROM redemption_log ORDER BY id`),
		Flows:       e.dump(t, `SELECT * FROM inventory_flow ORDER BY id`),
	}
}

// writeState is everything a write route can change: the ledgers, the
// quota policies and their audit, the void requests.
func (e *env) writeState(t *testing.T) []any {
	t.Helper()
	return []any{e.ledgers(t), e.dump(t, `SELECT * FROM quota_policy ORDER BY template_id`),
		e.dump(t, `SELECT * FROM quota_policy_audit ORDER BY id`), e.dump(t, `SELECT * FROM void_request ORDER BY request_id`)}
}

// couponLedgers is one coupon's row (all columns, version included) and its
// ledger rows.
type couponLedgers struct {
	Row, Redemptions, Flows []string
}

func (e *env) couponLedgers(t *testing.T, id int64) couponLedgers {
	t.Helper()
	return couponLedgers{
		Row:         e.dump(t, `SELECT * FROM user_coupon WHERE id = ?`, id),
		Redemptions: e.dump(t, `SELECT * FROM redemption_log WHERE user_coupon_id = ? ORDER BY id`, id),
		Flows:       e.dump(t, `SELECT * FROM inventory_flow WHERE user_coupon_id = ? ORDER BY id`, id),
	}
}
