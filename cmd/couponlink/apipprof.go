package main

import (
	"net/http"
	"net/http/pprof"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// opsHandler is what the api's -metrics-addr listener serves: /metrics
// (every path, as before), and with -pprof Go's profiler under
// /debug/pprof/ (CPU profile, heap, goroutines, mutex and block profiles,
// execution trace). The profiler is never mounted on the API's own
// listener: a profile shows the process's stacks and allocations, which
// only whoever may reach the ops address should read (docs/security.md).
// /debug/pprof/cmdline is left out: a -dsn on the command line may hold a
// password. (Importing net/http/pprof also registers its handlers on
// http.DefaultServeMux, which no listener of couponlink serves.)
func opsHandler(reg prometheus.Gatherer, withPprof bool) http.Handler {
	metrics := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	if !withPprof {
		return metrics
	}
	mux := http.NewServeMux()
	mux.Handle("/", metrics)
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}
