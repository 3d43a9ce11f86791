package client_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/couponlink/couponlink/client"
)

// The client's own cost per call, against a server that answers a canned
// claim: BenchmarkClaim through the client, BenchmarkClaimHandWritten as
// cmd/couponlink-bench sent claims before it used the client (a formatted
// body, the answer discarded).

const cannedClaim = `{"user_coupon_id":1,"template_id":1,"user_id":"u","channel":"hot","status":"AVAILABLE",` +
	`"claimed_at":"2030-01-01T00:00:00Z","expires_at":"2030-01-02T00:00:00Z","replayed":false}` + "\n"

func cannedServer(b *testing.B) (*httptest.Server, *http.Client) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, cannedClaim)
	}))
	b.Cleanup(ts.Close)
	return ts, ts.Client()
}

func BenchmarkClaim(b *testing.B) {
	ts, hc := cannedServer(b)
	c := client.New(ts.URL, client.WithHTTPClient(hc), client.WithRetries(1, 0, 0))
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		id := fmt.Sprintf("b-%d", i)
		if _, err := c.Claim(ctx, client.ClaimRequest{TemplateID: 1, UserID: id, Channel: "hot", RequestID: id}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkClaimHandWritten(b *testing.B) {
	ts, hc := cannedServer(b)
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		id := fmt.Sprintf("b-%d", i)
		body := fmt.Sprintf(`{"template_id":%d,"user_id":%q,"channel":%q,"request_id":%q}`, 1, id, "hot", id)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+"/v1/claims", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			b.Fatal(resp.Status)
		}
	}
}
