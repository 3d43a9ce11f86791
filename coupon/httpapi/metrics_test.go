package httpapi_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/internal/cdctest"
)

// A small scripted sequence: requests are counted by route and code, and
// transitions by kind — once per state change written, never for a replay
// or a refusal.
func TestMetrics(t *testing.T) {
	e := newEnv(t)
	tpl := e.template(t, map[string]any{"total_quota": 2, "channels": map[string]int{"app": 2}, "valid_seconds": 10})
	claimBody := map[string]any{"template_id": tpl, "user_id": "u1", "channel": "app", "request_id": "r-1"}
	var c1 claimReply
	e.expect(t, 201, "POST", "/v1/claims", claimBody, &c1)
	e.expect(t, 200, "POST", "/v1/claims", claimBody, nil) // replay
	c2 := e.claim(t, tpl, "u2", "app")
	e.expect(t, 409, "POST", "/v1/claims", map[string]any{"template_id": tpl, "user_id": "u3", "channel": "app", "request_id": "r-3"}, nil)
	e.expect(t, 400, "POST", "/v1/claims", map[string]any{"template_id": tpl}, nil)

	e.redeem(t, c1.UserCouponID, "o1")
	e.expect(t, 200, "POST", "/v1/redemptions", map[string]any{"user_coupon_id": c1.UserCouponID, "order_id": "o1"}, nil)
	e.expect(t, 409, "POST", "/v1/redemptions", map[string]any{"user_coupon_id": c1.UserCouponID, "order_id": "o2"}, nil)

	e.refund(t, c1.UserCouponID, "o1", "restore")
	e.expect(t, 200, "POST", "/v1/refunds", map[string]any{"user_coupon_id": c1.UserCouponID, "order_id": "o1", "mode": "restore"}, nil)

	e.void(t, "v-1", c2.UserCouponID)
	replay := e.void(t, "v-1", c2.UserCouponID)
	assert.True(t, replay.Results[0].Replayed)

	e.clock.Advance(11 * time.Second)
	assert.Equal(t, 1, e.expire(t, map[string]any{}).Expired)
	e.inventory(t, tpl)
	e.expect(t, 404, "GET", "/v1/templates/77/inventory", nil, nil)

	require.NoError(t, testutil.GatherAndCompare(e.reg, strings.NewReader(`
# HELP couponlink_api_transitions_total Coupon state changes written by the API, by action (claim, redeem, refund_restore, refund_recycle, void, expire).
# TYPE couponlink_api_transitions_total counter
couponlink_api_transitions_total{kind="claim"} 2
couponlink_api_transitions_total{kind="expire"} 1
couponlink_api_transitions_total{kind="redeem"} 1
couponlink_api_transitions_total{kind="refund_restore"} 1
couponlink_api_transitions_total{kind="void"} 1
# HELP couponlink_api_requests_total API requests by route and HTTP status code.
# TYPE couponlink_api_requests_total counter
couponlink_api_requests_total{code="200",route="GET /v1/templates/{id}/inventory"} 1
couponlink_api_requests_total{code="404",route="GET /v1/templates/{id}/inventory"} 1
couponlink_api_requests_total{code="201",route="POST /v1/templates"} 1
couponlink_api_requests_total{code="200",route="POST /v1/claims"} 1
couponlink_api_requests_total{code="201",route="POST /v1/claims"} 2
couponlink_api_requests_total{code="400",route="POST /v1/claims"} 1
couponlink_api_requests_total{code="409",route="POST /v1/claims"} 1
couponlink_api_requests_total{code="200",route="POST /v1/redemptions"} 1
couponlink_api_requests_total{code="201",route="POST /v1/redemptions"} 1
couponlink_api_requests_total{code="409",route="POST /v1/redemptions"} 1
couponlink_api_requests_total{code="200",route="POST /v1/refunds"} 2
couponlink_api_requests_total{code="200",route="POST /v1/voids"} 2
couponlink_api_requests_total{code="200",route="POST /v1/expire"} 1
# HELP couponlink_api_expiry_sweeps_total Expiry sweeps run by the API, by result (ok, error).
# TYPE couponlink_api_expiry_sweeps_total counter
couponlink_api_expiry_sweeps_total{result="ok"} 1
`), "couponlink_api_transitions_total", "couponlink_api_requests_total", "couponlink_api_expiry_sweeps_total"))
	cdctest.NoDefaultMetrics(t)
	assert.Len(t, series(t, e, "couponlink_api_request_duration_seconds"), 7, "one latency series per route used")

	// the same numbers on /metrics, in the text format
	r := e.must(t, "GET", "/metrics", nil)
	require.Equal(t, 200, r.Status)
	text := string(r.Body)
	for _, line := range []string{
		`couponlink_api_transitions_total{kind="claim"} 2`,
		`couponlink_api_transitions_total{kind="void"} 1`,
		`couponlink_api_requests_total{code="201",route="POST /v1/claims"} 2`,
		`couponlink_api_requests_total{code="409",route="POST /v1/redemptions"} 1`,
		fmt.Sprintf(`couponlink_api_request_duration_seconds_count{route="POST /v1/claims"} %d`, 5),
	} {
		assert.Contains(t, text, line+"\n")
	}
}

// series is every series of one metric family as `name{labels}` -> value
// (a histogram's value is its sample count).
func series(t *testing.T, e *env, name string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, s := range cdctest.AllSeries(t, e.reg, name) {
		var labels []string
		for _, l := range s.Labels {
			labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
		}
		out[name+"{"+strings.Join(labels, ",")+"}"] = s.Value
	}
	return out
}
