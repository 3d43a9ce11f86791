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
)

func runAPI(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newFlags("api", "Serves the HTTP/JSON write API. It writes MySQL only: one transaction per state change, with its ledger row.", stderr)
	dsn := f.dsn()
	list := f.string("primaries", "COUPONLINK_PRIMARIES", "",
		"YAML file listing several primaries (couponlink-native over several servers; see the README); -dsn is then not used")
	addr := f.string("addr", "COUPONLINK_API_ADDR", "127.0.0.1:8080", "listen address")
	tokenOf := f.secret("token", "COUPONLINK_API_TOKEN", "when set, every /v1 route needs Authorization: Bearer <token>")
	origins := f.string("allowed-origins", "COUPONLINK_API_ALLOWED_ORIGINS", "",
		"comma-separated browser origins (scheme://host[:port]) besides the API's own that may write, e.g. a console behind a proxy")
	sweep := f.duration("expire-interval", "COUPONLINK_EXPIRE_INTERVAL", time.Minute, "how often the API runs the expiry sweep (0: never)")
	conns := f.int("mysql-conns", "COUPONLINK_MYSQL_CONNS", 64, "most MySQL connections the API opens")
	grace := f.duration("shutdown-grace", "COUPONLINK_SHUTDOWN_GRACE", 20*time.Second, "how long in-flight requests may take to finish on SIGTERM")
	cdcMetrics := f.string("cdc-metrics-url", "COUPONLINK_CDC_METRICS_URL", "http://127.0.0.1:9464/metrics",
		"the cdc's /metrics, which GET /v1/cdc/status (and the console's Health page) reads for the leader and Redis-behind gauges (empty: none)")
	cdcName := f.string("cdc-name", "COUPONLINK_CDC_NAME", "default", "checkpoint name of the cdc whose counters the inventory route shows as `derived`")
	// On by default: the whole suite passes with it on (issue 15); false
	// gives one transaction per claim again, e.g. to compare in a benchmark.
	combine := f.bool("combine-claims", "COUPONLINK_COMBINE_CLAIMS", true,
		"run concurrent claims of one (template, channel) bucket in one transaction (the write combiner); false: one transaction per claim")
	combineRedeem := f.bool("combine-redemptions", "COUPONLINK_COMBINE_REDEMPTIONS", true,
		"run concurrent redemptions of distinct coupons in one transaction (the write combiner); false: one transaction per redemption")
	combineMax := f.int("combine-max", "COUPONLINK_COMBINE_MAX", 256, "most claims (or redemptions) in one combined transaction")
	level := f.logLevel()
	if err := f.parse(args); err != nil {
		return err
	}
	base := newLogger(stderr, *level) // httpapi names its components (api, expire)
	log := base.With("component", "api")
	token := tokenOf()
	allowed, err := httpapi.ParseAllowedOrigins(*origins)
	if err != nil {
		return fmt.Errorf("-allowed-origins: %w", err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	build := apiBuild{cfg: httpapi.Config{Token: token, AllowedOrigins: allowed, CDCMetricsURL: *cdcMetrics, Logger: base, Registerer: reg, Gatherer: reg},
		store: coupon.Config{Logger: log, CombineClaims: *combine, CombineRedemptions: *combineRedeem, CombineMax: *combineMax}, cdcName: *cdcName}
	api, servers, closeDBs, err := build.handler(ctx, *list, *dsn, *conns)
	if err != nil {
		return err
	}
	defer closeDBs()
	if *list != "" {
		log.Info("api over several primaries", "primaries", len(servers), "list", *list)
	}

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", *addr, err)
	}
	srv := &http.Server{Handler: console.Mount(api), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 60 * time.Second}
	log.Info("api listening", "addr", ln.Addr().String(), "auth", token != "", "allowed_origins", allowed, "expire_interval", *sweep,
		"combine_claims", *combine, "combine_redemptions", *combineRedeem, "combine_max", *combineMax)
	fmt.Fprintf(stdout, "couponlink api listening on http://%s\n", ln.Addr())
	fmt.Fprintf(stdout, "couponlink console on http://%s%s\n", ln.Addr(), console.Prefix)

	// one group: the server and the expiry sweeper; the first that fails
	// stops the other, and the database closes only when both returned
	g, gctx := errgroup.WithContext(ctx)
	for _, server := range servers {
		if *sweep > 0 {
			g.Go(func() error { return server.RunSweeps(gctx, *sweep) })
		}
	}
	g.Go(func() error { return serveHTTP(gctx, srv, ln, *grace, log) })
	if err := g.Wait(); err != nil {
		return err
	}
	log.Info("api stopped")
	return nil
}
