package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/couponlink/couponlink/api"
	"github.com/couponlink/couponlink/client"
	"github.com/couponlink/couponlink/internal/loopback"
)

// The HTTP floor of the API rows: what a claim costs a Go HTTP server
// that does nothing else. This program, started again with floorEnv set,
// serves POST /v1/claims with Go's net/http and encoding/json: it decodes
// the claim and answers 201 with a claim of the same shape, without a
// database. The hot-bucket load runs against it from the same clients,
// and its process's CPU per request is the part of the api's that HTTP
// and JSON take on this machine; the rest is couponlink's (the combiner,
// the driver's round trips).

// floorEnv holds the address the floor server listens on.
const floorEnv = "COUPONLINK_BENCH_HTTP_FLOOR"

// serveFloor runs the floor server on addr until the process is killed.
func serveFloor(addr string) error {
	var id atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc("POST /v1/claims", func(w http.ResponseWriter, r *http.Request) {
		var req api.ClaimRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		now := time.Now().UTC()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(api.Claim{UserCouponID: id.Add(1), TemplateID: req.TemplateID, UserID: req.UserID,
			Channel: req.Channel, Status: "AVAILABLE", ClaimedAt: now, ExpiresAt: now.Add(24 * time.Hour)})
	})
	return (&http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}).ListenAndServe()
}

// startFloor starts the floor server as a child process of its own (so
// that its CPU is counted apart) and waits until it answers.
func (a *apiBench) startFloor(ctx context.Context) (*apiProc, error) {
	port, err := loopback.FreePort()
	if err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	p := &apiProc{base: fmt.Sprintf("http://127.0.0.1:%d", port), tag: "floor"}
	p.api = client.New(p.base, client.WithHTTPClient(a.client), client.WithRetries(1, 0, 0))
	env := append(cleanEnv(), fmt.Sprintf("%s=127.0.0.1:%d", floorEnv, port))
	if p.child, err = spawn(self, "", env, filepath.Join(a.e.dir, "http-floor.log")); err != nil {
		return nil, fmt.Errorf("start the HTTP floor server: %w", err)
	}
	return p, waitHealthy(ctx, a.client, p.base, p.child)
}

// httpFloor runs the hot-bucket claim load against the floor server.
func (a *apiBench) httpFloor(ctx context.Context, tpl int64) loadResult {
	p, err := a.startFloor(ctx)
	if p != nil && p.child != nil {
		defer p.child.stop()
	}
	if err != nil {
		a.log.Warn("no HTTP floor", "err", err)
		return loadResult{}
	}
	return a.claims(ctx, p, tpl, "floor", 1)
}
