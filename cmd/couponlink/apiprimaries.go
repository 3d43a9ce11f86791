package main

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"os"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/coupon/httpapi"
	"github.com/couponlink/couponlink/coupon/httpapi/route"
	"github.com/couponlink/couponlink/coupon/primaries"
	"github.com/couponlink/couponlink/inventory/view"
)

// apiBuild is what every API server of the command shares.
type apiBuild struct {
	cfg     httpapi.Config // without Store and Inventory
	store   coupon.Config  // without DB
	cdcName string
}

// handler is the API: of the primaries listed in the file list when it is
// set, else of the database dsn. closeDBs closes what it opened.
func (b apiBuild) handler(ctx context.Context, list, dsn string, conns int) (http.Handler, []*httpapi.Server, func(), error) {
	if list != "" {
		pools, err := openPrimaries(ctx, list, conns)
		if err != nil {
			return nil, nil, nil, err
		}
		api, servers, err := b.primaries(pools)
		if err != nil {
			primaries.Close(pools)
			return nil, nil, nil, err
		}
		return api, servers, func() { primaries.Close(pools) }, nil
	}
	db, err := openMySQL(dsn, conns)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, nil, nil, fmt.Errorf("connect to MySQL: %w (is it running? run `couponlink migrate` first)", err)
	}
	server, err := b.server(db, b.cfg.Registerer)
	if err != nil {
		db.Close()
		return nil, nil, nil, err
	}
	return server, []*httpapi.Server{server}, func() { db.Close() }, nil
}

// server is the API of one database, its metrics on reg.
func (b apiBuild) server(db *sql.DB, reg prometheus.Registerer) (*httpapi.Server, error) {
	sc := b.store
	sc.DB = db
	store, err := coupon.New(sc)
	if err != nil {
		return nil, err
	}
	cfg := b.cfg
	cfg.Store, cfg.Registerer, cfg.Inventory = store, reg, view.Reader{DB: db, Checkpoint: b.cdcName}
	return httpapi.New(cfg), nil
}

// primaries is one API server per primary, each with its metrics labelled
// primary="<name>", behind the front that routes to them.
func (b apiBuild) primaries(pools []primaries.Pool) (http.Handler, []*httpapi.Server, error) {
	var servers []*httpapi.Server
	var routes []route.Primary
	for _, p := range pools {
		reg := prometheus.WrapRegistererWith(prometheus.Labels{"primary": p.Name}, b.cfg.Registerer)
		sc := b
		sc.cfg.Gatherer = nil // the front serves /metrics
		s, err := sc.server(p.DB, reg)
		if err != nil {
			return nil, nil, err
		}
		servers = append(servers, s)
		routes = append(routes, route.Primary{Name: p.Name, API: s})
	}
	front, err := route.New(route.Config{Primaries: routes, Gatherer: b.cfg.Gatherer, Logger: b.cfg.Logger,
		Place: func(ctx context.Context) (int, error) { return primaries.Place(ctx, pools) }})
	return front, servers, err
}

// openPrimaries loads the list of primaries, opens a pool on each that
// keeps the rule, and checks them (primaries.Check) before anything is
// served.
func openPrimaries(ctx context.Context, file string, conns int) ([]primaries.Pool, error) {
	list, err := primaries.Load(file, os.LookupEnv)
	if err != nil {
		return nil, err
	}
	pools, err := primaries.Open(list, conns)
	if err != nil {
		return nil, err
	}
	if err := primaries.Check(ctx, pools); err != nil {
		primaries.Close(pools)
		return nil, fmt.Errorf("check the primaries of %s: %w", file, err)
	}
	return pools, nil
}
