package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/coupon/httpapi"
	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/internal/mysqlconn"
	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/inventory/view"
)

// The API started with a legacy mapping serves the shop's campaigns
// read-only (GET /v1/legacy): as `couponlink status -mapping -json`
// prints them, on one server and summed over two sources, a source down
// named in every sum.

// legacyAPI serves the API on dsn with the legacy shop of mapping, as
// `couponlink api -dsn dsn -mapping mapping` does; it returns its URL.
func legacyAPI(t *testing.T, dsn, mapping string) string {
	t.Helper()
	db, err := mysqlconn.Open(dsn, 4)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	store, err := coupon.New(coupon.Config{DB: db, Logger: testenv.QuietLogger()})
	require.NoError(t, err)
	legacy, err := legacyShop(mapping)
	require.NoError(t, err)
	srv := httptest.NewServer(httpapi.New(httpapi.Config{Store: store, Logger: testenv.QuietLogger(), Legacy: legacy,
		Inventory: view.Reader{Checkpoint: "default"}}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// getJSON is a GET of the API decoded as JSON, with its status.
func getJSON(t *testing.T, url string) (int, map[string]any) {
	t.Helper()
	res, err := http.Get(url)
	require.NoError(t, err)
	defer res.Body.Close()
	var v map[string]any
	require.NoError(t, json.NewDecoder(res.Body).Decode(&v))
	return res.StatusCode, v
}

// withoutSums is a template's JSON without what a sum over sources adds,
// so that the API's and `status -json`'s compare.
func withoutSums(v any) map[string]any {
	out := map[string]any{}
	for k, x := range v.(map[string]any) {
		switch k {
		case "sources", "left_out", "complete", "differ", "parts":
		default:
			out[k] = x
		}
	}
	return out
}

func TestAPIServesALegacyShop(t *testing.T) {
	db, dsn := testenv.MySQL(t)
	s := newShop(t, db)
	s.exec(`INSERT INTO ` + s.tq("t_coupon_tpl") + ` VALUES (1, 'spring-10off', 10, 5, 1, '2099-01-01 00:00:00')`)
	s.claim(1, 0, 0, "u1")
	s.use(s.claim(1, 1, 0, "u2"), "o2")
	startCDC(t, "-dsn", dsn, "-redis", "", "-mapping", s.mapping)
	base := legacyAPI(t, dsn, s.mapping)

	var st map[string]any
	cdctest.WaitFor(t, 30*time.Second, "status shows both coupons", func() bool {
		st = statusJSONOf(t, "-dsn", dsn, "-mapping", s.mapping)
		ts, _ := st["templates"].([]any)
		return len(ts) == 1 && ts[0].(map[string]any)["held"] == 1.0 && ts[0].(map[string]any)["used"] == 1.0
	})
	code, v := getJSON(t, base+"/v1/legacy")
	require.Equal(t, http.StatusOK, code, v)
	assert.Equal(t, []any{true, []any{}}, []any{v["complete"], v["left_out"]})
	require.Len(t, v["sources"], 1)
	assert.Equal(t, "default", v["sources"].([]any)[0].(map[string]any)["name"])
	ts := v["templates"].([]any)
	require.Len(t, ts, 1)
	assert.Equal(t, withoutSums(st["templates"].([]any)[0]), withoutSums(ts[0]), "the API's numbers are status -json's")
	assert.Equal(t, []any{"default"}, ts[0].(map[string]any)["sources"])
	assert.Equal(t, "self-service", ts[0].(map[string]any)["channels"].([]any)[1].(map[string]any)["label"])

	s.claim(1, 1, 0, "u3") // a write in the shop's tables shows within 2 s
	cdctest.WaitFor(t, 2*time.Second, "the shop's claim shows in the API", func() bool {
		_, one := getJSON(t, base+"/v1/legacy/templates/1")
		tpl := one["templates"].([]any)[0].(map[string]any)
		return tpl["held"] == 2.0 && tpl["claimable"] == 7.0
	})
	code, v = getJSON(t, base+"/v1/legacy/templates/9")
	assert.Equal(t, http.StatusNotFound, code, v)

	// without a mapping there is no legacy shop
	_, plainDSN := testenv.MySQL(t)
	code, v = getJSON(t, legacyAPI(t, plainDSN, "")+"/v1/legacy")
	assert.Equal(t, http.StatusNotFound, code)
	assert.Contains(t, fmt.Sprint(v["error"]), "without -mapping")
}

func TestAPIServesALegacyShopOverTwoSources(t *testing.T) {
	s := newSpreadShop(t)
	code, out, errs := cli(t, "migrate", "-mapping", s.mapping)
	require.Equal(t, 0, code, errs+out)
	for u := range int64(8) {
		id := s.claim(1+u%2, "app", u)
		if u%3 == 0 {
			s.use(id, u)
		}
	}
	s.startCDC(s.east)
	s.startCDC(s.west)
	s.east.caughtUp(t)
	s.west.caughtUp(t)
	base := legacyAPI(t, s.east.dsn, s.mapping)

	st := statusJSONOf(t, "-mapping", s.mapping)
	code, v := getJSON(t, base+"/v1/legacy")
	require.Equal(t, http.StatusOK, code, v)
	assert.Equal(t, true, v["complete"])
	ts, want := v["templates"].([]any), st["templates"].([]any)
	require.Len(t, ts, len(want))
	for i := range want {
		assert.Equal(t, withoutSums(want[i]), withoutSums(ts[i]), "template %d: the API's sum is status -json's", i)
		assert.Equal(t, []any{"east", "west"}, ts[i].(map[string]any)["sources"])
		assert.Len(t, ts[i].(map[string]any)["parts"], 2, "each source's part")
	}

	code, v = getJSON(t, base+"/v1/legacy/templates/1")
	require.Equal(t, http.StatusOK, code, v)
	one := v["templates"].([]any)[0].(map[string]any)
	assert.Equal(t, withoutSums(want[0]), withoutSums(one))
	require.Len(t, one["parts"], 2, "each source's part: %v", one)
	assert.Equal(t, []any{"west"}, one["parts"].([]any)[1].(map[string]any)["sources"])

	s.west.maria.Stop(syscall.SIGKILL)
	code, v = getJSON(t, base+"/v1/legacy")
	require.Equal(t, http.StatusOK, code, v)
	assert.Equal(t, []any{false, []any{"west"}}, []any{v["complete"], v["left_out"]})
	srcs := v["sources"].([]any)
	assert.Equal(t, []any{"up", "down"}, []any{srcs[0].(map[string]any)["state"], srcs[1].(map[string]any)["state"]})
	assert.Contains(t, srcs[1].(map[string]any)["error"], "connect: ")
	for _, tpl := range v["templates"].([]any) {
		assert.Equal(t, []any{[]any{"east"}, []any{"west"}}, []any{tpl.(map[string]any)["sources"], tpl.(map[string]any)["left_out"]})
	}
}
