package route_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/coupon/httpapi"
	"github.com/couponlink/couponlink/coupon/httpapi/route"
	"github.com/couponlink/couponlink/coupon/primaries"
	"github.com/couponlink/couponlink/internal/cdcenv"
	"github.com/couponlink/couponlink/internal/mysqlconn"
	"github.com/couponlink/couponlink/internal/sqltx"
	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/inventory/view"
)

const token = "s3cret-token"

// native is a couponlink-native deployment over two private MariaDB
// servers: one API server per primary (on pools that keep the rule), the
// front over them as an HTTP server, and per primary a cdc environment on
// a plain pool, as `couponlink cdc -dsn <primary>` has.
type native struct {
	t     *testing.T
	ctx   context.Context
	front *httptest.Server
	apis  []*httpapi.Server
	pools []primaries.Pool
	envs  []*cdcenv.Env
	shift atomic.Int64 // the stores' clock runs this far ahead (ns)
}

func newNative(t *testing.T, n int) *native {
	t.Helper()
	e := &native{t: t, ctx: context.Background()}
	var list []primaries.Primary
	for k := range n {
		dsn := testenv.OwnMariaDB(t).Couponlink()
		list = append(list, primaries.Primary{Name: fmt.Sprintf("p%d", k), DSN: dsn})
		plain, err := mysqlconn.Open(dsn, 16)
		require.NoError(t, err)
		t.Cleanup(func() { _ = plain.Close() })
		e.envs = append(e.envs, cdcenv.On(t, plain, dsn))
	}
	pools, err := primaries.Open(list, 32)
	require.NoError(t, err)
	t.Cleanup(func() { primaries.Close(pools) })
	require.NoError(t, primaries.Check(e.ctx, pools))
	e.pools = pools
	var routes []route.Primary
	for _, p := range pools {
		store, err := coupon.New(coupon.Config{DB: p.DB, Logger: testenv.QuietLogger(), CombineClaims: true,
			Now: func() time.Time { return time.Now().Add(time.Duration(e.shift.Load())) }})
		require.NoError(t, err)
		api := httpapi.New(httpapi.Config{Store: store, Token: token, Logger: testenv.QuietLogger(),
			Inventory: view.Reader{DB: p.DB, Checkpoint: "default"}})
		e.apis = append(e.apis, api)
		routes = append(routes, route.Primary{Name: p.Name, API: api})
	}
	front, err := route.New(route.Config{Primaries: routes, Logger: testenv.QuietLogger(),
		Place: func(ctx context.Context) (int, error) { return primaries.Place(ctx, pools) }})
	require.NoError(t, err)
	e.front = httptest.NewServer(front)
	t.Cleanup(e.front.Close)
	return e
}

// request is one API request as a client sends it.
type request struct {
	method, path, body string
	header             map[string]string // besides the token and Content-Type: application/json
	noToken            bool
}

func (r request) build(url string) *http.Request {
	req := httptest.NewRequest(r.method, url+r.path, bytes.NewBufferString(r.body))
	if url != "" {
		req, _ = http.NewRequest(r.method, url+r.path, bytes.NewBufferString(r.body))
	}
	if r.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if !r.noToken {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range r.header {
		req.Header.Set(k, v)
	}
	return req
}

// do sends r to the front and returns the status and the body.
func (e *native) do(r request) (int, []byte) {
	e.t.Helper()
	res, err := e.front.Client().Do(r.build(e.front.URL))
	require.NoError(e.t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(e.t, err)
	return res.StatusCode, body
}

// direct sends r to primary k's API server itself, as to a single server.
func (e *native) direct(k int, r request) (int, []byte) {
	rec := httptest.NewRecorder()
	e.apis[k].ServeHTTP(rec, r.build(""))
	return rec.Code, rec.Body.Bytes()
}

// post sends a JSON body to the front, wants the status and decodes the
// answer into out (when not nil).
func (e *native) post(path string, body any, want int, out any) {
	e.t.Helper()
	b, err := json.Marshal(body)
	require.NoError(e.t, err)
	code, got := e.do(request{method: http.MethodPost, path: path, body: string(b)})
	require.Equal(e.t, want, code, "POST %s %s: %s", path, b, got)
	if out != nil {
		require.NoError(e.t, json.Unmarshal(got, out))
	}
}

// count runs a COUNT query on primary k.
func (e *native) count(k int, query string, args ...any) int64 {
	e.t.Helper()
	var n int64
	require.NoError(e.t, e.envs[k].DB.QueryRowContext(e.ctx, query, args...).Scan(&n))
	return n
}

// ids reads one id column of primary k.
func (e *native) ids(k int, query string, args ...any) []int64 {
	e.t.Helper()
	var out []int64
	require.NoError(e.t, sqltx.EachRow(e.ctx, e.envs[k].DB, query, args, func(rows *sql.Rows) error {
		out = append(out, 0)
		return rows.Scan(&out[len(out)-1])
	}))
	return out
}

// status is a coupon's status on primary k, "" when it is not there.
func (e *native) status(k int, id int64) string {
	var st coupon.Status
	err := e.envs[k].DB.QueryRowContext(e.ctx, "SELECT status FROM user_coupon WHERE id = ?", id).Scan(&st)
	if err == sql.ErrNoRows {
		return ""
	}
	require.NoError(e.t, err)
	return st.String()
}
