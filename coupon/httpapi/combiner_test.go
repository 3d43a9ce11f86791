package httpapi_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/internal/testenv"
)

// The claim combiner under HTTP load: the invariants of the single path
// hold, and groups of more than one claim really happen.

func combinedEnv(t *testing.T) *env { return newEnv(t, envConfig{combine: true}) }

// groupSizes is the couponlink_api_claim_group_size histogram: groups run, claims in them.
func (e *env) groupSizes(t testing.TB) (groups uint64, claims float64) {
	return e.histogram(t, "couponlink_api_claim_group_size")
}

// histogram is a histogram's count and sum.
func (e *env) histogram(t testing.TB, name string) (count uint64, sum float64) {
	t.Helper()
	mfs, err := e.reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			h := mf.GetMetric()[0].GetHistogram()
			return h.GetSampleCount(), h.GetSampleSum()
		}
	}
	return 0, 0
}

// assertGrouped checks that some group held more than one claim.
func assertGrouped(t *testing.T, es ...*env) {
	t.Helper()
	for _, e := range es {
		groups, claims := e.groupSizes(t)
		require.Positive(t, groups, "the combiner ran")
		assert.Greater(t, claims, float64(groups), "some group held more than one claim")
		t.Logf("%d claims in %d groups (%.1f per group), %d groups fell back", int(claims), groups, claims/float64(groups),
			e.store.ClaimFallbacks())
	}
}

// 2,000 claims at once for one bucket of 1,000, split over two API
// processes (two stores, two combiners, one database): exactly 1,000
// coupons, claimed = 1,000, every other answer sold_out.
func TestCombinedClaimsOneBucketTwoProcesses(t *testing.T) {
	a := combinedEnv(t)
	b := newEnv(t, envConfig{db: a.db, combine: true})
	tpl := a.template(t, map[string]any{"total_quota": 1000, "channels": map[string]int{"app": 1000}})
	replies := parallel(t, 128, 2000, func(i int) (reply, error) {
		api := []*client{a.api, b.api}[i%2]
		return api.do("POST", "/v1/claims", map[string]any{"template_id": tpl, "user_id": fmt.Sprintf("u%04d", i),
			"channel": "app", "request_id": fmt.Sprintf("r%04d", i)})
	})
	got := tallyClaims(t, a, replies, func(int) string { return "created" })
	assert.Equal(t, map[string]int{"created": 1000, "sold_out": 1000}, got)
	assert.Equal(t, 1000, a.count(t, `SELECT COUNT(*) FROM user_coupon WHERE template_id = ?`, tpl))
	assert.Equal(t, 1000, a.count(t, `SELECT claimed FROM channel_quota WHERE template_id = ?`, tpl))
	assert.Equal(t, 1000, a.count(t, `SELECT COUNT(*) FROM user_claim WHERE template_id = ? AND claimed = 1`, tpl))
	assert.Equal(t, 1000, a.count(t, `SELECT COUNT(*) FROM user_claim WHERE template_id = ?`, tpl))
	assertGrouped(t, a, b)
}

// 2,000 claims at once over 40 buckets of 25 of one template (the
// combiner groups a template's claims across its buckets), split over two
// API processes: every bucket exactly 25, every other answer sold_out.
func TestCombinedClaimsFortyBucketsTwoProcesses(t *testing.T) {
	a := combinedEnv(t)
	b := newEnv(t, envConfig{db: a.db, combine: true})
	channels := map[string]int{}
	for i := range 40 {
		channels[fmt.Sprintf("c%02d", i)] = 25
	}
	tpl := a.template(t, map[string]any{"total_quota": 1000, "channels": channels})
	replies := parallel(t, 128, 2000, func(i int) (reply, error) {
		api := []*client{a.api, b.api}[i%2]
		return api.do("POST", "/v1/claims", map[string]any{"template_id": tpl, "user_id": fmt.Sprintf("u%04d", i),
			"channel": fmt.Sprintf("c%02d", i%40), "request_id": fmt.Sprintf("r%04d", i)})
	})
	got := tallyClaims(t, a, replies, func(int) string { return "created" })
	assert.Equal(t, map[string]int{"created": 1000, "sold_out": 1000}, got)
	assert.Equal(t, 40, a.count(t, `SELECT COUNT(*) FROM channel_quota WHERE template_id = ? AND claimed = 25`, tpl))
	assert.Equal(t, 40, a.count(t, `SELECT COUNT(*) FROM (SELECT channel FROM user_coupon WHERE template_id = ?
		GROUP BY channel HAVING COUNT(*) = 25) c`, tpl))
	assert.Equal(t, 1000, a.count(t, `SELECT COUNT(*) FROM user_claim WHERE template_id = ? AND claimed = 1`, tpl))
	assertGrouped(t, a, b)
}

// The single path's suites, with the combiner on.
func TestCombinedClaimsNeverOverIssue(t *testing.T) {
	e := combinedEnv(t)
	claimsNeverOverIssue(t, e)
	assertGrouped(t, e)
}

func TestCombinedClaimReplays(t *testing.T) { concurrentClaimReplays(t, combinedEnv(t)) }

// One user sends 100 claims at once, per-user limit 1: exactly one coupon,
// 99 limit_reached.
func TestCombinedClaimsPerUserLimit(t *testing.T) {
	e := combinedEnv(t)
	tpl := e.template(t, map[string]any{"total_quota": 1000, "channels": map[string]int{"app": 1000}, "per_user_limit": 1})
	replies := parallel(t, 100, 100, func(i int) (reply, error) {
		return e.api.do("POST", "/v1/claims", map[string]any{"template_id": tpl, "user_id": "u1", "channel": "app",
			"request_id": fmt.Sprintf("r%03d", i)})
	})
	got := map[string]int{}
	for i, r := range replies {
		switch {
		case r.Status == http.StatusCreated:
			got["created"]++
		case r.Status == http.StatusConflict:
			got[r.errCode()]++
		default:
			t.Errorf("claim %d: unexpected reply %s", i, r)
		}
	}
	assert.Equal(t, map[string]int{"created": 1, "limit_reached": 99}, got)
	assert.Equal(t, 1, e.count(t, `SELECT COUNT(*) FROM user_coupon WHERE template_id = ?`, tpl))
	assert.Equal(t, 1, e.count(t, `SELECT claimed FROM channel_quota WHERE template_id = ?`, tpl))
	assert.Equal(t, 1, e.count(t, `SELECT claimed FROM user_claim WHERE template_id = ? AND user_id = 'u1'`, tpl))
}

// BenchmarkHTTPClaims: POST /v1/claims on one bucket and over 40 buckets
// of one template, from 64 goroutines per CPU, single path vs combiner. A
// measurement, not a test:
//
//	go test ./coupon/httpapi/ -run '^$' -bench HTTPClaims -benchtime 3s
func BenchmarkHTTPClaims(b *testing.B) {
	for _, buckets := range []int{1, 40} {
		for _, combine := range []bool{false, true} {
			b.Run(fmt.Sprintf("buckets=%d/combine=%v", buckets, combine), func(b *testing.B) {
				benchClaims(b, newEnv(b, envConfig{combine: combine, realClock: true}), buckets)
			})
		}
	}
}

func benchClaims(b *testing.B, e *env, buckets int) {
	channels := map[string]int{}
	for i := 0; i < buckets; i++ {
		channels[fmt.Sprintf("c%02d", i)] = 10_000_000
	}
	r, err := e.api.do("POST", "/v1/templates", map[string]any{"name": "bench", "total_quota": 10_000_000 * buckets,
		"channels": channels, "valid_seconds": 3600})
	require.NoError(b, err)
	var tpl struct{ ID int64 }
	require.NoError(b, r.decode(&tpl))
	testenv.RunClients(b, "claims/s", func(i int64) {
		r, err := e.api.do("POST", "/v1/claims", map[string]any{"template_id": tpl.ID, "user_id": fmt.Sprintf("u%d", i),
			"channel": fmt.Sprintf("c%02d", int(i)%buckets), "request_id": fmt.Sprintf("b%d", i)})
		if err != nil || r.Status != http.StatusCreated {
			b.Fatalf("claim: %v %s", err, r)
		}
	})
	if groups, _ := e.groupSizes(b); groups > 0 {
		b.ReportMetric(float64(b.N)/float64(groups), "claims/group")
	}
}
