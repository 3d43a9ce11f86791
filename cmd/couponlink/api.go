package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"

	"github.com/couponlink/couponlink/console"
	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/coupon/httpapi"
	"github.com/couponlink/couponlink/internal/settings"
)

// apiSettings are couponlink api's flags, by concern.
type apiSettings struct {
	db      settings.Database
	logging settings.Logging
	// the databases: one primary (-dsn) or a list of them, and the pools
	primaries *string
	conns     *int
	// the HTTP server: where, who may call, how it stops
	addr, origins, metricsAddr *string
	hosts                      *string
	pprof                      *bool
	token                      func() string
	tokenFile                  *string
	insecureNoAuth             *bool
	grace                      *time.Duration
	// the work beside the requests: the expiry sweep, the cdc it shows
	sweep               *time.Duration
	cdcMetrics, cdcName *string
	// a legacy shop served read-only: its mapping
	mapping *string
	// the write combiner
	combine, combineRedeem *bool
	combineMax             *int
	soldOutMemory          *bool
}

func apiFlags(stderr io.Writer) (*settings.Flags, *apiSettings) {
	f := newFlags("api", "Serves the HTTP/JSON write API. It writes MySQL only: one transaction per state change, with its ledger row.", stderr)
	o := &apiSettings{}
	f.Add(&o.db, &o.logging)
	o.primaries = f.EnvString("primaries", "COUPONLINK_PRIMARIES", "",
		"YAML file listing several primaries (couponlink-native over several servers; docs/several-primaries.md); -dsn is then not used")
	o.conns = f.EnvInt("mysql-conns", "COUPONLINK_MYSQL_CONNS", 64, "most MySQL connections the API opens")
	o.addr = f.EnvString("addr", "COUPONLINK_API_ADDR", "127.0.0.1:8080", "listen address of the API, its /metrics and the console")
	o.token = f.EnvSecret("token", "COUPONLINK_API_TOKEN", "one admin token (named admin; at least 32 random bytes: couponlink token new): every /v1 route then needs Authorization: Bearer <token>")
	o.tokenFile = f.EnvString("token-file", "COUPONLINK_API_TOKEN_FILE", "",
		"file of named tokens with roles, one \"name viewer|operator|admin sha256:<digest>\" a line (couponlink token new); read again on SIGHUP")
	o.insecureNoAuth = f.EnvBool("insecure-no-auth", "COUPONLINK_API_INSECURE_NO_AUTH", false,
		"serve without any token on an address that is not loopback (anyone who reaches it may void coupons); refused otherwise")
	o.metricsAddr = f.EnvString("metrics-addr", "COUPONLINK_API_METRICS_ADDR", "",
		"serve /metrics on this address of its own instead of -addr (empty: on -addr, beside the API)")
	o.pprof = f.EnvBool("pprof", "COUPONLINK_API_PPROF", false,
		"serve Go's profiler (/debug/pprof/) on the -metrics-addr listener, never on -addr (needs -metrics-addr; docs/performance.md, \"Profiling the api\")")
	o.origins = f.EnvString("allowed-origins", "COUPONLINK_API_ALLOWED_ORIGINS", "",
		"comma-separated browser origins (scheme://host[:port]) besides the API's own that may write, e.g. a console behind a proxy")
	o.hosts = f.EnvString("allowed-hosts", "COUPONLINK_API_ALLOWED_HOSTS", "",
		"comma-separated host names or addresses (no port) besides loopback ones whose requests an API without tokens answers under /v1, "+
			"by their Host header, e.g. a name the API is reached by; others are 403 host_not_allowed (a guard against DNS rebinding)")
	o.grace = f.EnvDuration("shutdown-grace", "COUPONLINK_SHUTDOWN_GRACE", 20*time.Second, "how long in-flight requests may take to finish on SIGTERM")
	o.sweep = f.EnvDuration("expire-interval", "COUPONLINK_EXPIRE_INTERVAL", time.Minute, "how often the API runs the expiry sweep (0: never)")
	o.cdcMetrics = f.EnvRedacted("cdc-metrics-url", "COUPONLINK_CDC_METRICS_URL", "",
		"the cdc's /metrics, which GET /v1/cdc/status (and the console's Health page) reads for the leader and Redis-behind gauges "+
			"(empty: the address the leading cdc recorded in the database when its -metrics-addr listener started)")
	o.cdcName = f.EnvString("cdc-name", "COUPONLINK_CDC_NAME", "default", "checkpoint name of the cdc whose counters GET /v1/templates/{id}/inventory shows as its \"derived\" counts")
	o.mapping = f.EnvString("mapping", "COUPONLINK_MAPPING", "",
		"YAML mapping of a legacy shop (as the cdc's -mapping; with sources:, every source's server): its campaigns are served read-only "+
			"by GET /v1/legacy and the console (couponlink never writes the shop's tables)")
	// On by default: the whole suite passes with it on (issue 15); false
	// gives one transaction per claim again, e.g. to compare in a benchmark.
	o.combine = f.EnvBool("combine-claims", "COUPONLINK_COMBINE_CLAIMS", true,
		"run concurrent claims of one template (over all its channel buckets) in one transaction (the write combiner); false: one transaction per claim")
	o.combineRedeem = f.EnvBool("combine-redemptions", "COUPONLINK_COMBINE_REDEMPTIONS", true,
		"run concurrent redemptions of distinct coupons in one transaction (the write combiner); false: one transaction per redemption")
	o.combineMax = f.EnvInt("combine-max", "COUPONLINK_COMBINE_MAX", 256, "most claims (or redemptions) in one combined transaction")
	o.soldOutMemory = f.EnvBool("sold-out-memory", "COUPONLINK_SOLD_OUT_MEMORY", true,
		"remember the buckets found sold out and refuse their further claims after one read, without a write transaction "+
			"(a bucket with a free slot again is claimed as usual); false: every claim runs its write transaction")
	return f, o
}

func runAPI(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, o := apiFlags(stderr)
	if err := f.Parse(args); err != nil {
		return err
	}
	base := o.logging.Logger(stderr) // httpapi names its components (api, expire)
	log := base.With("component", "api")
	authn := apiAuth{file: *o.tokenFile, envToken: o.token, addr: *o.addr, insecure: *o.insecureNoAuth, log: log}
	tokens, err := authn.load()
	if err != nil {
		return err
	}
	if *o.pprof && *o.metricsAddr == "" {
		return fmt.Errorf("-pprof serves the profiler on the -metrics-addr listener only, never beside the API: set -metrics-addr too")
	}
	allowed, err := httpapi.ParseAllowedOrigins(*o.origins)
	if err != nil {
		return fmt.Errorf("-allowed-origins: %w", err)
	}
	hosts, err := httpapi.ParseAllowedHosts(*o.hosts)
	if err != nil {
		return fmt.Errorf("-allowed-hosts: %w", err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	gatherer := prometheus.Gatherer(reg) // /metrics beside the API, or on -metrics-addr
	if *o.metricsAddr != "" {
		gatherer = nil
	}
	build := apiBuild{cfg: httpapi.Config{Tokens: tokens, AllowedOrigins: allowed, AllowedHosts: hosts, CDCMetricsURL: *o.cdcMetrics, Logger: base, Registerer: reg, Gatherer: gatherer},
		store: coupon.Config{Logger: log, CombineClaims: *o.combine, CombineRedemptions: *o.combineRedeem, CombineMax: *o.combineMax,
			SoldOutMemory: *o.soldOutMemory}, cdcName: *o.cdcName}
	if build.cfg.Legacy, err = legacyShop(*o.mapping); err != nil {
		return err
	}
	api, servers, closeDBs, err := build.handler(ctx, *o.primaries, *o.db.DSN, *o.conns)
	if err != nil {
		return err
	}
	defer closeDBs()
	if *o.primaries != "" {
		log.Info("api over several primaries", "primaries", len(servers), "list", *o.primaries)
	}

	ln, err := net.Listen("tcp", *o.addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", *o.addr, err)
	}
	srv := &http.Server{Handler: console.Mount(api), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 60 * time.Second}
	log.Info("api listening", "addr", ln.Addr().String(), "auth", tokens.Len() > 0, "tokens", tokens.Names(), "legacy_mapping", *o.mapping, "allowed_origins", allowed, "allowed_hosts", hosts, "expire_interval", *o.sweep,
		"combine_claims", *o.combine, "combine_redemptions", *o.combineRedeem, "combine_max", *o.combineMax, "sold_out_memory", *o.soldOutMemory)
	fmt.Fprintf(stdout, "couponlink api listening on http://%s\n", ln.Addr())
	fmt.Fprintf(stdout, "couponlink console on http://%s%s\n", ln.Addr(), console.Prefix)

	// one group: the server and the expiry sweeper; the first that fails
	// stops the other, and the database closes only when both returned
	g, gctx := errgroup.WithContext(ctx)
	for _, server := range servers {
		if *o.sweep > 0 {
			g.Go(func() error { return server.RunSweeps(gctx, *o.sweep) })
		}
	}
	g.Go(func() error { return serveHTTP(gctx, srv, ln, *o.grace, log) })
	g.Go(func() error { return authn.reloadOnHUP(gctx, tokens) })
	if *o.metricsAddr != "" {
		mln, err := net.Listen("tcp", *o.metricsAddr)
		if err != nil {
			return fmt.Errorf("listen on -metrics-addr %s: %w", *o.metricsAddr, err)
		}
		log.Info("metrics listening", "addr", mln.Addr().String(), "pprof", *o.pprof)
		msrv := &http.Server{Handler: opsHandler(reg, *o.pprof), ReadHeaderTimeout: 10 * time.Second}
		g.Go(func() error { return serveHTTP(gctx, msrv, mln, *o.grace, log) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	log.Info("api stopped")
	return nil
}

// legacyShop is the legacy shop of -mapping, served read-only; nil
// without one.
func legacyShop(path string) (*httpapi.Legacy, error) {
	m, err := readMapping(path)
	if err != nil || m == nil {
		return nil, err
	}
	return &httpapi.Legacy{Mapping: m, Open: openSource}, nil
}
