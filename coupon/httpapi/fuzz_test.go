package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/couponlink/couponlink/api"
	"github.com/couponlink/couponlink/coupon"
)

// FuzzRequestBodies: any body of any route's JSON shape is decoded or
// refused with a domain error a client can act on (a 4xx code and a
// message), never a panic or a 5xx; a decoded body encodes again.
func FuzzRequestBodies(f *testing.F) {
	for _, seed := range []string{
		`{"name":"spring","total_quota":1000,"valid_seconds":86400,"channels":{"app":600,"web":400}}`,
		`{"template_id":1,"user_id":"u1","channel":"app","request_id":"r-1"}`,
		`{"user_coupon_id":7,"order_id":"o-1"}`,
		`{"user_coupon_id":7,"order_id":"o-1","mode":"restore","request_id":"r-2"}`,
		`{"user_coupon_ids":[1,2,3],"reason":"fraud","operator":"ops","request_id":"v-1"}`,
		`{"limit":100}`,
		`{"mode":"auto","low":0.1,"high":0.5,"changed_by":"ops","reason":"x"}`,
		`{"template_id":1,"template_id":2}`, `{"USER_ID":"u"}`, `[]`, `null`, `{} {}`, `{"channels":{"a":-1}}`,
		`{"template_id":1e400}`, `{"user_coupon_ids":[` + strings.Repeat("1,", 50) + `1]}`, "\xff",
	} {
		f.Add(seed)
	}
	targets := []func() any{
		func() any { return &api.NewTemplate{} }, func() any { return &api.ClaimRequest{} }, func() any { return &api.RedeemRequest{} },
		func() any { return &api.RefundRequest{} }, func() any { return &api.VoidRequest{} }, func() any { return &api.ExpireRequest{} },
		func() any { return &api.PolicyChange{} },
	}
	f.Fuzz(func(t *testing.T, body string) {
		for _, target := range targets {
			dst := target()
			r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
			err := decode(httptest.NewRecorder(), r, dst)
			if err == nil {
				if _, err := json.Marshal(dst); err != nil {
					t.Fatalf("%T decoded from %q does not encode: %v", dst, body, err)
				}
				continue
			}
			e, ok := coupon.AsError(err)
			if !ok {
				t.Fatalf("%T from %q: not a domain error: %v", dst, body, err)
			}
			if st := e.Code.Status(); st < 400 || st > 499 || e.Message == "" {
				t.Fatalf("%T from %q: %d %q %q", dst, body, st, e.Code, e.Message)
			}
		}
	})
}
