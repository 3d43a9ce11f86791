package httpapi_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/coupon/httpapi"
	"github.com/couponlink/couponlink/internal/mysqlconn"
)

// An API whose MySQL cannot be reached (nothing listens on its port)
// answers 503 unavailable, to reads and writes, with or without the write
// combiners: the caller may retry; 500 is kept for bugs.
func TestUnreachableMySQLIs503(t *testing.T) {
	for _, combine := range []bool{false, true} {
		t.Run(fmt.Sprintf("combine=%v", combine), func(t *testing.T) {
			db, err := mysqlconn.Open("nobody@tcp(127.0.0.1:1)/couponlink?timeout=2s", 4)
			require.NoError(t, err)
			t.Cleanup(func() { db.Close() })
			quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
			store, err := coupon.New(coupon.Config{DB: db, Logger: quiet, CombineClaims: combine, CombineRedemptions: combine, SoldOutMemory: combine})
			require.NoError(t, err)
			srv := httptest.NewServer(conform(t, httpapi.New(httpapi.Config{Store: store, Logger: quiet})))
			t.Cleanup(srv.Close)
			for _, rt := range []writeRoute{
				{"POST", "/v1/claims", `{"template_id":1,"user_id":"u","channel":"app","request_id":"r-1"}`},
				{"POST", "/v1/redemptions", `{"user_coupon_id":1,"order_id":"o-1"}`},
				{"POST", "/v1/expire", ""},
				{"GET", "/v1/templates", ""},
				{"GET", "/v1/templates/1", ""},
				{"GET", "/healthz", ""},
			} {
				r := rawRequest(t, srv.URL, rt.method, rt.path, rt.body, withHeaders(nil, rt.body))
				got := expectError(t, r, http.StatusServiceUnavailable, "unavailable")
				assert.Contains(t, got.Message, "MySQL", "%s %s", rt.method, rt.path)
				assert.NotContains(t, got.Message, "127.0.0.1", "the address goes to the log only")
			}
		})
	}
}
