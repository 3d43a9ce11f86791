package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/couponlink/couponlink/client"
	"github.com/couponlink/couponlink/internal/loopback"
)

// loadResult is one closed-loop run.
type loadResult struct {
	Ops      int
	All      int // operations including the warm-up's: the denominator of Cost
	Took     time.Duration
	Lat      latStats
	Errors   int
	FirstErr string
	// Cost per operation over the whole run: the server's statement
	// counters and the CPU of MariaDB, of the API process and of the
	// load generator (this process), as text and as numbers
	Cost string
	Per  opCost
}

func (l loadResult) rate() float64 {
	if l.Took <= 0 {
		return 0
	}
	return float64(l.Ops) / l.Took.Seconds()
}

// errPoolEmpty stops a client whose work ran out.
var errPoolEmpty = errors.New("pool empty")

// closedLoop runs op from clients goroutines for d; only operations that
// start after the warm-up are counted.
func closedLoop(ctx context.Context, clients int, d time.Duration, op func(ctx context.Context, client, i int) error) loadResult {
	warm := min(time.Second, d/5)
	start := time.Now()
	from, end := start.Add(warm), start.Add(warm+d)
	var mu sync.Mutex
	var res loadResult
	var lats []time.Duration
	var wg sync.WaitGroup
	lastEnd := from
	for c := range clients {
		wg.Go(func() {
			var mine []time.Duration
			var errs, all int
			var first string
			last := from
			for i := 0; ctx.Err() == nil; i++ {
				t0 := time.Now()
				if !t0.Before(end) {
					break
				}
				err := op(ctx, c, i)
				t1 := time.Now()
				if errors.Is(err, errPoolEmpty) {
					break
				}
				all++
				if t0.Before(from) {
					continue
				}
				last = t1
				if err != nil {
					if errs++; first == "" {
						first = err.Error()
					}
					continue
				}
				mine = append(mine, t1.Sub(t0))
			}
			mu.Lock()
			lats = append(lats, mine...)
			res.Errors += errs
			res.All += all
			if res.FirstErr == "" {
				res.FirstErr = first
			}
			if last.After(lastEnd) {
				lastEnd = last
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	res.Ops = len(lats)
	res.Took = lastEnd.Sub(from) // the last counted operation may end after `end`
	res.Lat = summarize(lats)
	return res
}

type apiResult struct {
	ceilBefore, ceilAfter loadResult
	hot, buckets, redeem  combinedRun // the API with its combiners on (the default) and off
	rawHot, rawBuckets    loadResult  // the claim transaction in raw SQL
	floor                 loadResult  // the hot-bucket claims against the HTTP floor (httpfloor.go)
	poolSize              int
	lag                   *lagResult // cdc lag under the combined hot-bucket load
	profile               string     // the combining api's CPU profile during the lag run ("": none)
	pinned                *pinnedRun // nil: not measured
}

func (a apiResult) ceiling() float64 { return (a.ceilBefore.rate() + a.ceilAfter.rate()) / 2 }

// runAPI measures phase 4: the INSERT ceiling before and after, claims
// in raw SQL and through the API (one hot bucket, then 40), redemptions.
func runAPI(ctx context.Context, cfg config, e *env, log *slog.Logger) (apiResult, error) {
	var res apiResult
	log.Info("phase 4: API throughput (couponlink api binary) and the INSERT ceiling", "clients", cfg.clients, "duration", cfg.apiDuration)
	a, err := startAPIBench(ctx, cfg, e, log)
	defer a.close()
	if err != nil {
		return res, err
	}
	hotTpl, bucketTpl, pool, err := a.fixtures(ctx)
	if err != nil {
		return res, err
	}
	res.poolSize = len(pool) / 2 // each redemption run its own half
	res.ceilBefore = a.ceiling(ctx, "before")
	res.rawHot = a.claims(ctx, nil, hotTpl, "rawhot", 1)
	res.floor = a.httpFloor(ctx, hotTpl)
	res.hot = a.combined(ctx, "claim", func(p *apiProc) loadResult { return a.claims(ctx, p, hotTpl, "hot"+p.tag, 1) })
	res.rawBuckets = a.claims(ctx, nil, bucketTpl, "raw40", 40)
	res.buckets = a.combined(ctx, "claim", func(p *apiProc) loadResult { return a.claims(ctx, p, bucketTpl, "b40"+p.tag, 40) })
	res.redeem = a.combined(ctx, "redemption", func(p *apiProc) loadResult {
		if p.combine {
			return a.redemptions(ctx, p, pool[:res.poolSize])
		}
		return a.redemptions(ctx, p, pool[res.poolSize:])
	})
	res.ceilAfter = a.ceiling(ctx, "after")
	lag := func() { res.lag, err = a.lagAtLoad(ctx, hotTpl) }
	if cfg.smoke { // runs too short for a profile, and no pinned runs
		lag()
	} else {
		res.pinned = a.pinned(ctx, hotTpl)
		res.profile = a.profiled(ctx, a.on, filepath.Join(cfg.out, cfg.stamp+"-api-hot.pprof"), lag)
	}
	if err != nil {
		return res, fmt.Errorf("cdc lag at the combined load: %w", err)
	}
	for _, p := range []*apiProc{a.on, a.off} {
		if err := p.child.exited(); err != nil {
			return res, fmt.Errorf("couponlink api %w", err)
		}
	}
	return res, ctx.Err()
}

// apiBench is what the runs of phase 4 share: the two running `couponlink
// api` processes (combiners on, off), the HTTP client of their load, and
// the pools of the two loads that bypass them (the INSERT ceilings in
// benchSchema, the raw claim transaction).
type apiBench struct {
	cfg     config
	e       *env
	log     *slog.Logger
	on, off *apiProc
	client  *http.Client
	ceilDB  *sql.DB
	rawDB   *sql.DB
	seq     atomic.Int64 // rows of the INSERT ceilings
}

// apiProc is one running `couponlink api`.
type apiProc struct {
	child   *child
	base    string // http://127.0.0.1:<port>
	metrics string // its -metrics-addr listener (/metrics, /debug/pprof/), http://127.0.0.1:<port>; the combining one only
	combine bool   // its claim and redemption combiners on
	tag     string // in its request ids and log lines
	api     *client.Client
}

// startAPIBench opens the pools and starts `couponlink api` (expiry sweep
// off), waiting until it answers; close undoes what was done, also after an
// error.
func startAPIBench(ctx context.Context, cfg config, e *env, log *slog.Logger) (*apiBench, error) {
	a := &apiBench{cfg: cfg, e: e, log: log}
	var err error
	if a.ceilDB, err = openMySQL(strings.Replace(e.dsn, "/couponlink", "/"+benchSchema, 1), cfg.clients); err != nil {
		return a, err
	}
	if a.rawDB, err = openMySQL(e.dsn, cfg.clients); err != nil {
		return a, err
	}
	a.client = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        2 * cfg.clients,
		MaxIdleConnsPerHost: 2 * cfg.clients,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}}
	if a.on, err = a.startAPI(ctx, true); err != nil {
		return a, err
	}
	a.off, err = a.startAPI(ctx, false)
	return a, err
}

// startAPI starts `couponlink api` (expiry sweep off), its combiners on or
// off, and waits until it answers.
func (a *apiBench) startAPI(ctx context.Context, combine bool) (*apiProc, error) {
	port, err := loopback.FreePort()
	if err != nil {
		return nil, err
	}
	p := &apiProc{base: fmt.Sprintf("http://127.0.0.1:%d", port), combine: combine, tag: "on"}
	// no retries: a failed call counts as an error of the run
	p.api = client.New(p.base, client.WithHTTPClient(a.client), client.WithRetries(1, 0, 0))
	name := "api"
	if !combine {
		p.tag, name = "off", "api-off"
	}
	args := []string{"-dsn", a.e.appDSN, "-addr", fmt.Sprintf("127.0.0.1:%d", port), "-expire-interval", "0",
		"-log-level", "warn", "-combine-claims=" + strconv.FormatBool(combine), "-combine-redemptions=" + strconv.FormatBool(combine)}
	if combine { // its metrics (group sizes) and profiler on a listener of their own
		mport, err := loopback.FreePort()
		if err != nil {
			return nil, err
		}
		p.metrics = fmt.Sprintf("http://127.0.0.1:%d", mport)
		args = append(args, "-metrics-addr", fmt.Sprintf("127.0.0.1:%d", mport), "-pprof")
	}
	if p.child, err = a.e.startChild(name, append([]string{"api"}, args...)...); err != nil {
		return nil, err
	}
	return p, waitHealthy(ctx, a.client, p.base, p.child)
}

func (a *apiBench) close() {
	if a.client != nil {
		a.client.CloseIdleConnections()
	}
	for _, p := range []*apiProc{a.on, a.off} {
		if p != nil && p.child != nil {
			p.child.stop()
		}
	}
	for _, db := range []*sql.DB{a.rawDB, a.ceilDB} {
		if db != nil {
			db.Close()
		}
	}
}

// fixtures creates, through the API, the hot template (one channel) and
// the one of 40 channels, and the redemption pool in the latter.
func (a *apiBench) fixtures(ctx context.Context) (hotTpl, bucketTpl int64, pool []int64, err error) {
	if hotTpl, err = createTemplate(ctx, a.on.api, "bench api hot", 1); err != nil {
		return 0, 0, nil, err
	}
	if bucketTpl, err = createTemplate(ctx, a.on.api, "bench api 40 buckets", 40); err != nil {
		return 0, 0, nil, err
	}
	if pool, err = couponPool(ctx, a.e, bucketTpl, 2*a.cfg.redeemPool); err != nil {
		return 0, 0, nil, err
	}
	return hotTpl, bucketTpl, pool, nil
}

// load runs op in a closed loop of -clients for -api-duration and adds
// its cost per operation: the server's statement counters and the CPU of
// MariaDB, of the api process p (nil: none) and of this process (the load
// generator).
func (a *apiBench) load(ctx context.Context, p *apiProc, op func(ctx context.Context, client, i int) error) loadResult {
	if ctx.Err() != nil {
		return loadResult{}
	}
	pid := -1
	if p != nil {
		pid = p.child.pid()
	}
	st0, _ := a.e.serverStatus(ctx)
	db0, api0, me0 := a.e.mariadbCPU(), procCPU(pid), cpuTime()
	r := closedLoop(ctx, a.cfg.clients, a.cfg.apiDuration, op)
	st1, _ := a.e.serverStatus(ctx)
	db1, api1, me1 := a.e.mariadbCPU(), procCPU(pid), cpuTime()
	if r.All > 0 {
		n := time.Duration(r.All)
		r.Per = opCost{DB: (db1 - db0) / n, API: (api1 - api0) / n, Gen: (me1 - me0) / n, Statements: statementsPerOp(st0, st1, r.All)}
		r.Cost = fmt.Sprintf("per op: statements %s; CPU MariaDB %s, api process %s, load generator %s",
			perOp(st0, st1, r.All), us(r.Per.DB), us(r.Per.API), us(r.Per.Gen))
	}
	return r
}

// ceiling runs bare single-row autocommit INSERTs into a copy of
// user_coupon.
func (a *apiBench) ceiling(ctx context.Context, tag string) loadResult {
	return a.insertCeiling(ctx, tag, 1)
}

// insertCeiling runs bare autocommit INSERTs of rows rows each into a copy
// of user_coupon: its rate is in statements (transactions) per second.
func (a *apiBench) insertCeiling(ctx context.Context, tag string, rows int) loadResult {
	stmt := `INSERT INTO insert_ceiling (template_id, user_id, channel, status, claimed_at, expires_at, request_id) VALUES ` +
		strings.TrimSuffix(strings.Repeat(`(1, ?, 'c00', 1, NOW(6), NOW(6) + INTERVAL 90 DAY, ?), `, rows), ", ")
	r := a.load(ctx, nil, func(ctx context.Context, _, _ int) error {
		args := make([]any, 0, 2*rows)
		for range rows {
			n := strconv.FormatInt(a.seq.Add(1), 10)
			args = append(args, "u"+n, "r"+n)
		}
		_, err := a.ceilDB.ExecContext(ctx, stmt, args...)
		return err
	})
	a.log.Info("INSERT ceiling", "when", tag, "rows_per_tx", rows, "tx_per_s", int(r.rate()), "rows_per_s", int(r.rate()*float64(rows)),
		"p50", r.Lat.P50, "p99", r.Lat.P99, "errors", r.Errors)
	return r
}

// claims claims coupons of tpl, on its "hot" channel when buckets is 1,
// else over the 40 channels: through POST /v1/claims of p, or (p nil) as
// the claim's own transaction in raw SQL.
func (a *apiBench) claims(ctx context.Context, p *apiProc, tpl int64, tag string, buckets int) loadResult {
	send := func(ctx context.Context, id, ch string) error {
		c, err := p.api.Claim(ctx, client.ClaimRequest{TemplateID: tpl, UserID: id, Channel: ch, RequestID: id})
		return fresh(err, c.Replayed, "claim "+id)
	}
	msg, rateKey := "API claims", "claims_per_s"
	if p == nil {
		send = func(ctx context.Context, id, ch string) error { return rawClaim(ctx, a.rawDB, tpl, id, ch) }
		msg, rateKey = "raw SQL claim transactions", "tx_per_s"
	}
	r := a.load(ctx, p, func(ctx context.Context, cl, i int) error {
		ch := "hot"
		if buckets > 1 {
			ch = channel(cl*7 + i)
		}
		return send(ctx, fmt.Sprintf("%s-%d-%d", tag, cl, i), ch)
	})
	a.log.Info(msg, "buckets", buckets, "run", tag, rateKey, int(r.rate()), "p50", r.Lat.P50, "p99", r.Lat.P99, "errors", r.Errors, "err", r.FirstErr)
	return r
}

// redemptions redeems the pool's coupons, each once, through POST
// /v1/redemptions of p; a client stops when the pool runs out.
func (a *apiBench) redemptions(ctx context.Context, p *apiProc, pool []int64) loadResult {
	var next atomic.Int64
	r := a.load(ctx, p, func(ctx context.Context, _, _ int) error {
		k := int(next.Add(1)) - 1
		if k >= len(pool) {
			return errPoolEmpty
		}
		r, err := p.api.Redeem(ctx, client.RedeemRequest{UserCouponID: pool[k], OrderID: "o-" + strconv.FormatInt(pool[k], 10)})
		return fresh(err, r.Replayed, "redemption of "+strconv.FormatInt(pool[k], 10))
	})
	if next.Load() >= int64(len(pool)) {
		a.log.Warn("the redemption pool ran out before the end of the run; raise -redeem-pool", "pool", len(pool))
	}
	a.log.Info("API redemptions", "api", p.tag, "per_s", int(r.rate()), "p50", r.Lat.P50, "p99", r.Lat.P99, "errors", r.Errors, "err", r.FirstErr)
	return r
}

// rawClaim runs the statements of coupon.Store.Claim's transaction
// directly: the per-user guard, the coupon row, the bucket guard.
func rawClaim(ctx context.Context, db *sql.DB, tpl int64, user, ch string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT INTO user_claim (template_id, user_id, claimed) VALUES (?, ?, 1)
		ON DUPLICATE KEY UPDATE claimed = IF(claimed < ?, claimed + 1, LAST_INSERT_ID(claimed))`, tpl, user, 1); err != nil {
		return err
	}
	now := time.Now().UTC()
	if _, err := tx.ExecContext(ctx, `INSERT INTO user_coupon (template_id, user_id, channel, status, claimed_at, expires_at, request_id)
		VALUES (?, ?, ?, 1, ?, ?, ?)`, tpl, user, ch, now, now.Add(90*24*time.Hour), user); err != nil {
		return err
	}
	res, err := tx.ExecContext(ctx, `UPDATE channel_quota SET claimed = claimed + 1 WHERE template_id = ? AND channel = ? AND claimed < quota`, tpl, ch)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n != 1 {
		return fmt.Errorf("bucket %d/%s: no slot", tpl, ch)
	}
	return tx.Commit()
}

// waitHealthy waits until the api c answers GET /healthz at base with
// 200, for at most 30 s.
func waitHealthy(ctx context.Context, client *http.Client, base string, c *child) error {
	err := poll(ctx, 100*time.Millisecond, 30*time.Second, func() (bool, error) {
		if err := c.exited(); err != nil {
			return false, fmt.Errorf("couponlink api %w", err)
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/healthz", nil)
		resp, err := client.Do(req)
		if err != nil {
			return false, nil
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if errors.Is(err, errTimedOut) {
		return fmt.Errorf("couponlink api did not answer /healthz in 30 s; log:\n%s", tail(c.log, 10))
	}
	return err
}

// fresh is err, or an error when the write was a replay: the load's
// request ids and orders are new, so each write must be new (201).
func fresh(err error, replayed bool, what string) error {
	if err == nil && replayed {
		return fmt.Errorf("%s: answered as a replay (200), not created", what)
	}
	return err
}

// createTemplate creates a template of n channels through the API (one
// "hot" channel when n is 1), with quota to spare.
func createTemplate(ctx context.Context, api *client.Client, name string, n int) (int64, error) {
	ch := map[string]int64{}
	if n == 1 {
		ch["hot"] = 50_000_000
	} else {
		for i := range n {
			ch[channel(i)] = 1_000_000
		}
	}
	var total int64
	for _, q := range ch {
		total += q
	}
	t, err := api.CreateTemplate(ctx, client.NewTemplate{Name: name, TotalQuota: total, Channels: ch, ValidSeconds: 90 * 24 * 3600})
	if err != nil {
		return 0, fmt.Errorf("create template: %w", err)
	}
	return t.ID, nil
}

// couponPool inserts n AVAILABLE coupons of tpl (1,000 per statement) for
// the redemption run, and returns their ids.
func couponPool(ctx context.Context, e *env, tpl int64, n int) ([]int64, error) {
	const per = 1000
	insert := insertCoupons(tpl, "p", per)
	ids := make([]int64, 0, n)
	for len(ids) < n {
		res, err := e.db.ExecContext(ctx, insert)
		if err != nil {
			return nil, fmt.Errorf("create the redemption pool: %w", err)
		}
		first, _ := res.LastInsertId()
		for k := range int64(per) {
			ids = append(ids, first+k)
		}
	}
	return ids[:n], nil
}
