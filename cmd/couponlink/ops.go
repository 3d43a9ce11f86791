package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/inventory"
	"github.com/couponlink/couponlink/sink"
)

// opsServer serves /metrics, /healthz and /status (the checkpoint name's
// status as JSON, as `couponlink status -json` prints it) for operators.
type opsServer struct {
	srv *http.Server
	ln  net.Listener
	log *slog.Logger
}

// listenOps listens on addr, so that a taken address fails the command
// before anything starts; Run serves. m is the legacy mapping /status
// shows the templates of (nil: the reference schema). stalled, when not
// nil, fails /healthz while it returns an error (the cdc's
// sink.Daemon.Stalled).
func listenOps(addr string, reg *prometheus.Registry, db *sql.DB, name string, m *canal.Mapping, stalled func() error,
	log *slog.Logger) (*opsServer, error) {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if err := db.PingContext(r.Context()); err != nil {
			log.Warn("healthz: MySQL does not answer", "err", err) // the answer is unauthenticated: no address in it
			http.Error(w, "MySQL does not answer; the reason is in the log", http.StatusServiceUnavailable)
			return
		}
		if stalled != nil {
			if err := stalled(); err != nil {
				log.Warn("healthz: the cdc is stalled", "err", err)
				http.Error(w, "the cdc is stalled: its checkpoint is behind the server's binlog and not moving; the reason is in the log", http.StatusServiceUnavailable)
				return
			}
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		var buf bytes.Buffer
		if err := writeStatusJSON(r.Context(), &buf, db, name, m); err != nil {
			log.Warn("status: cannot read the cdc's status", "err", err)
			http.Error(w, "the status cannot be read now; the reason is in the log", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(buf.Bytes())
	})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	log.Info("metrics listening", "addr", ln.Addr().String())
	return &opsServer{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}, ln: ln, log: log}, nil
}

// record writes where this cdc's metrics are (cdc_process), for the API's
// Health page; a failure is logged: the metrics are served regardless.
func (o *opsServer) record(ctx context.Context, db *sql.DB, checkpoint string) {
	url, err := inventory.MetricsURL(o.ln.Addr().String())
	if err == nil {
		err = inventory.RecordCDCProcess(ctx, db, sink.LeaderName(), checkpoint, url)
	}
	if err != nil {
		o.log.Warn("the API's Health page will not find this cdc's metrics by itself (set COUPONLINK_CDC_METRICS_URL there)", "err", err)
	}
}

// Run serves until ctx ends (then it returns nil); a failure to serve is
// returned.
func (o *opsServer) Run(ctx context.Context) error {
	if err := serveHTTP(ctx, o.srv, o.ln, 5*time.Second, o.log); err != nil {
		return fmt.Errorf("ops server: %w", err)
	}
	return nil
}

// serveHTTP serves srv on ln until ctx ends, then shuts it down, giving
// requests in flight up to grace to finish. A Serve failure is returned at
// once, and so is a shutdown that did not finish in time.
func serveHTTP(ctx context.Context, srv *http.Server, ln net.Listener, grace time.Duration, log *slog.Logger) error {
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down: finishing in-flight requests", "grace", grace)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	err := srv.Shutdown(sctx)
	if serr := <-served; !errors.Is(serr, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", serr)
	}
	if err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}
