package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/client"
	"github.com/couponlink/couponlink/internal/loopback"
	"github.com/couponlink/couponlink/inventory"
)

// The flash phase: a campaign of -flash-coupons coupons (one channel,
// per-user limit 1) meets -flash-claims claims of distinct users from
// -flash-clients closed-loop HTTP clients at once. Three bursts, one after
// the other, each on its own campaign of the same size:
//
//   - the real `couponlink api` binary (sold-out memory on, the default),
//     with the real `couponlink cdc` following; during the burst the cdc's
//     lag (couponlink_cdc_lag_seconds) and the campaign's Redis stock key
//     are sampled beside MySQL's quota − claimed;
//   - the same binary with -sold-out-memory=false (every refusal runs the
//     write path);
//   - the field's common design, as the peer: an HTTP handler in this
//     process (net/http + go-redis) running a Redis Lua script that checks
//     and decrements a stock key and SADDs the user (the per-user limit),
//     answering granted or sold_out. It keeps no durable ledger and writes
//     no MySQL row: a Redis failover or restart may lose or repeat grants,
//     and nothing reconciles it.
//
// Each burst is checked at the end: couponlink's exactly the campaign's
// coupons (claimed = quota, COUNT(user_coupon) = quota, no over-issue),
// Redis = quota − claimed once the cdc caught up; the peer's stock 0 and
// exactly quota users in its set.

// flashBurst is one burst's answers.
type flashBurst struct {
	took             time.Duration // start → last answer
	soldOut          time.Duration // start → the last grant's answer
	firstRefusal     time.Duration // start → the first sold_out answer
	granted, refused int
	errors           int
	firstErr         string
	grantLat, refLat latStats
	cost             string        // the server's statements per answer, CPU
	apiCPU           time.Duration // of the api process per answer
}

func (b flashBurst) answers() int { return b.granted + b.refused }

func (b flashBurst) answerRate() float64 { return float64(b.answers()) / b.took.Seconds() }

func (b flashBurst) grantRate() float64 {
	if b.soldOut <= 0 {
		return 0
	}
	return float64(b.granted) / b.soldOut.Seconds()
}

// flashSample is one look at the campaign during couponlink's burst.
type flashSample struct {
	at        time.Duration // since the burst's start
	claimable int64         // MySQL: quota − claimed
	redis     int64         // the stock key (-1: missing)
	cdcLag    float64       // couponlink_cdc_lag_seconds (-1: unread)
}

type flashResult struct {
	on, off, peer     flashBurst
	samples           []flashSample
	refusedFromMemory float64       // couponlink_api_claims_refused_from_memory_total of the memory-on api
	redisZero         time.Duration // the burst's start → the first sample of Redis at 0 (-1: none)
	checks            [][2]string   // per burst: what, its verdict ("MISMATCH…" fails the run)
}

// flashAnswer is what one claim got.
type flashAnswer int

const (
	flashGranted flashAnswer = iota
	flashRefused
)

// runFlash runs the flash phase.
func runFlash(ctx context.Context, cfg config, e *env, log *slog.Logger) (flashResult, error) {
	var res flashResult
	log.Info("flash sale: a campaign meets 100× its claims at once", "coupons", cfg.flashCoupons, "claims", cfg.flashClaims, "clients", cfg.flashClients)
	pos, err := canal.CurrentPosition(ctx, e.db)
	if err != nil {
		return res, err
	}
	if err := resetState(ctx, e, pos, false); err != nil { // the cdc follows from here; Redis starts empty
		return res, err
	}
	cdc, err := e.startCDC(cfg, "cdc-flash", "-dsn", e.appDSN, "-redis", e.redisAddr, "-name", "default")
	if err != nil {
		return res, err
	}
	defer cdc.stop()
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		MaxIdleConns: 2 * cfg.flashClients, MaxIdleConnsPerHost: 2 * cfg.flashClients, IdleConnTimeout: 90 * time.Second, DisableCompression: true,
		DialContext: (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
	}}
	defer hc.CloseIdleConnections()
	for _, memory := range []bool{true, false} {
		b, err := flashCouponlink(ctx, cfg, e, hc, cdc, memory, &res, log)
		if err != nil {
			return res, err
		}
		if memory {
			res.on = b
		} else {
			res.off = b
		}
	}
	if res.peer, err = flashPeer(ctx, cfg, e, hc, &res, log); err != nil {
		return res, err
	}
	return res, cdc.exited()
}

// flashCouponlink starts `couponlink api` (sold-out memory on or off),
// creates the campaign through it and runs the burst; with the memory on,
// it samples the cdc and Redis during the burst.
func flashCouponlink(ctx context.Context, cfg config, e *env, hc *http.Client, cdc *child, memory bool, res *flashResult,
	log *slog.Logger) (flashBurst, error) {
	port, err := loopback.FreePort()
	if err != nil {
		return flashBurst{}, err
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	name := "api-flash-" + map[bool]string{true: "memory", false: "no-memory"}[memory]
	p, err := e.startChild(name, "api", "-dsn", e.appDSN, "-addr", fmt.Sprintf("127.0.0.1:%d", port), "-expire-interval", "0",
		"-log-level", "warn", "-sold-out-memory="+strconv.FormatBool(memory))
	if err != nil {
		return flashBurst{}, err
	}
	defer p.stop()
	if err := waitHealthy(ctx, hc, base, p); err != nil {
		return flashBurst{}, err
	}
	api := client.New(base, client.WithHTTPClient(hc), client.WithRetries(1, 0, 0))
	tpl, key, err := createFlashCampaign(ctx, cfg, e, api, cdc, name)
	if err != nil {
		return flashBurst{}, err
	}
	stopSampling := func() {}
	start := time.Now()
	if memory {
		stopSampling = sampleFlash(ctx, e, tpl, key, start, res)
	}
	st0, _ := e.serverStatus(ctx)
	db0, api0, me0 := e.mariadbCPU(), procCPU(p.pid()), cpuTime()
	b := flashRun(ctx, cfg, start, apiFlashClaim(api, tpl, memory))
	st1, _ := e.serverStatus(ctx)
	db1, api1, me1 := e.mariadbCPU(), procCPU(p.pid()), cpuTime()
	if n := b.answers() + b.errors; n > 0 {
		per := func(d time.Duration) string { return us(d / time.Duration(n)) }
		b.apiCPU = (api1 - api0) / time.Duration(n)
		b.cost = fmt.Sprintf("per answer: statements %s; CPU MariaDB %s, api process %s, load generator %s", perOp(st0, st1, n), per(db1-db0), per(api1-api0), per(me1-me0))
	}
	// the cdc catches up: Redis shows the campaign sold out
	err = poll(ctx, 5*time.Millisecond, time.Minute, func() (bool, error) {
		n, err := e.rdb.Get(ctx, key).Int64()
		return err == nil && n == 0, cdc.exited()
	})
	if memory {
		stopSampling()
		res.redisZero = firstRedisZero(res.samples)
		res.refusedFromMemory = scrapeCounter(ctx, hc, base+"/metrics", "couponlink_api_claims_refused_from_memory_total")
	}
	if err != nil && !errors.Is(err, errTimedOut) {
		return b, err
	}
	check, cerr := flashCheck(ctx, e, tpl, key, b)
	if cerr != nil {
		return b, cerr
	}
	res.checks = append(res.checks, [2]string{fmt.Sprintf("couponlink api (sold-out memory %v)", memory), check})
	log.Info("flash burst through couponlink api", "sold_out_memory", memory, "answers_per_s", int(b.answerRate()), "granted", b.granted,
		"refused", b.refused, "errors", b.errors, "sold_out_after", b.soldOut.Round(time.Millisecond), "granted_p99", b.grantLat.P99,
		"refused_p99", b.refLat.P99, "check", check)
	return b, p.exited()
}

// createFlashCampaign creates the burst's campaign through the api (one
// channel "flash" of -flash-coupons coupons, per-user limit 1) and waits
// until the cdc has seen it: its Redis stock key holds the quota. A burst
// started before would race the cdc, not measure the api.
func createFlashCampaign(ctx context.Context, cfg config, e *env, api *client.Client, cdc *child, name string) (tpl int64, key string, err error) {
	one := int64(1)
	q := int64(cfg.flashCoupons)
	t, err := api.CreateTemplate(ctx, client.NewTemplate{Name: name, TotalQuota: q, Channels: map[string]int64{"flash": q},
		ValidSeconds: 90 * 24 * 3600, PerUserLimit: &one})
	if err != nil {
		return 0, "", fmt.Errorf("create the flash campaign: %w", err)
	}
	key = inventory.Keys{Prefix: "couponlink:"}.Stock(t.ID, "flash")
	if err := poll(ctx, 10*time.Millisecond, time.Minute, func() (bool, error) {
		n, err := e.rdb.Get(ctx, key).Int64()
		return err == nil && n == q, cdc.exited()
	}); err != nil {
		return 0, "", fmt.Errorf("the cdc did not write the campaign's Redis stock key %s = %d: %w", key, q, err)
	}
	return t.ID, key, nil
}

// apiFlashClaim is one claim of a new user through couponlink's api; a
// replayed grant is an error, since every user claims once.
func apiFlashClaim(api *client.Client, tpl int64, memory bool) func(ctx context.Context, k int) (flashAnswer, error) {
	return func(ctx context.Context, k int) (flashAnswer, error) {
		id := fmt.Sprintf("f%s-%d", map[bool]string{true: "m", false: "w"}[memory], k)
		c, err := api.Claim(ctx, client.ClaimRequest{TemplateID: tpl, UserID: id, Channel: "flash", RequestID: id})
		switch {
		case err == nil && c.Replayed:
			return 0, fmt.Errorf("claim %s: answered as a replay", id)
		case err == nil:
			return flashGranted, nil
		case client.IsCode(err, client.CodeSoldOut):
			return flashRefused, nil
		}
		return 0, err
	}
}

// firstRedisZero is how long after the burst's start the samples first saw
// the Redis stock key at 0 (-1: never).
func firstRedisZero(samples []flashSample) time.Duration {
	for _, s := range samples {
		if s.redis == 0 {
			return s.at
		}
	}
	return -1
}

// flashRun sends -flash-claims claims, each of a new user, from
// -flash-clients closed-loop clients, and sorts the answers.
func flashRun(ctx context.Context, cfg config, start time.Time, claim func(ctx context.Context, k int) (flashAnswer, error)) flashBurst {
	var next atomic.Int64
	var mu sync.Mutex
	var b flashBurst
	var grants, refusals []time.Duration
	var wg sync.WaitGroup
	for range cfg.flashClients {
		wg.Go(func() {
			var g, r []time.Duration
			var lastGrant, firstRef, last time.Duration
			var errs int
			var first string
			for ctx.Err() == nil {
				k := int(next.Add(1)) - 1
				if k >= cfg.flashClaims {
					break
				}
				t0 := time.Now()
				a, err := claim(ctx, k)
				t1 := time.Now()
				last = t1.Sub(start)
				switch {
				case err != nil:
					if errs++; first == "" {
						first = err.Error()
					}
				case a == flashGranted:
					g = append(g, t1.Sub(t0))
					lastGrant = max(lastGrant, last)
				default:
					r = append(r, t1.Sub(t0))
					if firstRef == 0 {
						firstRef = last
					}
				}
			}
			mu.Lock()
			defer mu.Unlock()
			grants, refusals = append(grants, g...), append(refusals, r...)
			b.errors += errs
			if b.firstErr == "" {
				b.firstErr = first
			}
			b.took, b.soldOut = max(b.took, last), max(b.soldOut, lastGrant)
			if firstRef > 0 && (b.firstRefusal == 0 || firstRef < b.firstRefusal) {
				b.firstRefusal = firstRef
			}
		})
	}
	wg.Wait()
	b.granted, b.refused = len(grants), len(refusals)
	b.grantLat, b.refLat = summarize(grants), summarize(refusals)
	return b
}

// sampleFlash looks at the campaign every 20 ms until the returned stop:
// MySQL's quota − claimed, the Redis stock key, the cdc's lag gauge.
func sampleFlash(ctx context.Context, e *env, tpl int64, key string, start time.Time, res *flashResult) (stop func()) {
	var metricsURL string
	_ = e.db.QueryRowContext(ctx, `SELECT metrics_url FROM cdc_process ORDER BY started_at DESC LIMIT 1`).Scan(&metricsURL)
	hc := &http.Client{Timeout: time.Second}
	return every(20*time.Millisecond, func() {
		s := flashSample{at: time.Since(start), redis: -1, cdcLag: -1}
		_ = e.db.QueryRowContext(ctx, `SELECT quota - claimed FROM channel_quota WHERE template_id = ? AND channel = 'flash'`, tpl).Scan(&s.claimable)
		if n, err := e.rdb.Get(ctx, key).Int64(); err == nil {
			s.redis = n
		}
		if metricsURL != "" {
			s.cdcLag = scrapeCounter(ctx, hc, metricsURL, "couponlink_cdc_lag_seconds")
		}
		res.samples = append(res.samples, s) // read after stop
	})
}

// scrapeCounter reads one unlabelled metric from a /metrics page (-1: not
// there).
func scrapeCounter(ctx context.Context, hc *http.Client, url, name string) float64 {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := hc.Do(req)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for line := range strings.SplitSeq(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
				return f
			}
		}
	}
	return -1
}

// flashCheck checks a couponlink campaign after its burst: exactly quota
// coupons, no over-issue, as many grants answered, Redis = quota − claimed.
func flashCheck(ctx context.Context, e *env, tpl int64, key string, b flashBurst) (string, error) {
	var quota, claimed, coupons, users int64
	if err := e.db.QueryRowContext(ctx, `SELECT quota, claimed FROM channel_quota WHERE template_id = ? AND channel = 'flash'`, tpl).Scan(&quota, &claimed); err != nil {
		return "", err
	}
	if err := e.db.QueryRowContext(ctx, `SELECT COUNT(*), COUNT(DISTINCT user_id) FROM user_coupon WHERE template_id = ?`, tpl).Scan(&coupons, &users); err != nil {
		return "", err
	}
	stock, rerr := e.rdb.Get(ctx, key).Int64()
	var bad []string
	if claimed != quota || coupons != quota || users != quota {
		bad = append(bad, fmt.Sprintf("claimed %d, %d coupons of %d users, quota %d", claimed, coupons, users, quota))
	}
	if int64(b.granted) != coupons {
		bad = append(bad, fmt.Sprintf("%d grants answered, %d coupons", b.granted, coupons))
	}
	if rerr != nil || stock != quota-claimed {
		bad = append(bad, fmt.Sprintf("Redis %s = %d (%v), want quota − claimed = %d", key, stock, rerr, quota-claimed))
	}
	if b.errors > 0 {
		bad = append(bad, fmt.Sprintf("%d claims failed (first: %s)", b.errors, b.firstErr))
	}
	if len(bad) > 0 {
		return "MISMATCH: " + strings.Join(bad, "; "), nil
	}
	return fmt.Sprintf("exactly %d coupons (claimed = quota = COUNT(user_coupon), %d distinct users), Redis = quota − claimed = %d", coupons, users, stock), nil
}

// peerScript is the field's flash-sale claim: check the user, check and
// take one from the stock, remember the user. 1 granted, 0 sold out, 2
// the user's limit.
var peerScript = redis.NewScript(`
if redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 1 then return 2 end
local stock = tonumber(redis.call('GET', KEYS[1]) or '0')
if stock <= 0 then return 0 end
redis.call('DECR', KEYS[1])
redis.call('SADD', KEYS[2], ARGV[1])
return 1`)

// flashPeer runs the burst against the peer: an HTTP handler in this
// process doing the Lua pre-deduct on the bench's Redis.
func flashPeer(ctx context.Context, cfg config, e *env, hc *http.Client, res *flashResult, log *slog.Logger) (flashBurst, error) {
	stockKey, usersKey := "peer:flash:stock", "peer:flash:users"
	if err := e.rdb.Set(ctx, stockKey, cfg.flashCoupons, 0).Err(); err != nil {
		return flashBurst{}, err
	}
	if err := e.rdb.Del(ctx, usersKey).Err(); err != nil {
		return flashBurst{}, err
	}
	rdb := redis.NewClient(&redis.Options{Addr: e.redisAddr, PoolSize: cfg.flashClients})
	defer rdb.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return flashBurst{}, err
	}
	srv := &http.Server{Handler: peerHandler(rdb, stockKey, usersKey), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	url := "http://" + ln.Addr().String() + "/v1/claims"
	st0 := cpuTime()
	start := time.Now()
	b := flashRun(ctx, cfg, start, peerFlashClaim(hc, url))
	if n := b.answers() + b.errors; n > 0 {
		b.cost = fmt.Sprintf("per answer: CPU of this process (peer handler, go-redis and the load generator together) %s", us((cpuTime()-st0)/time.Duration(n)))
	}
	stock, err := e.rdb.Get(ctx, stockKey).Int64()
	if err != nil {
		return b, err
	}
	users, err := e.rdb.SCard(ctx, usersKey).Result()
	if err != nil {
		return b, err
	}
	check := fmt.Sprintf("stock %d, %d users granted, %d grants answered", stock, users, b.granted)
	if stock != 0 || users != int64(cfg.flashCoupons) || b.granted != cfg.flashCoupons || b.errors > 0 {
		check = "MISMATCH: " + check + fmt.Sprintf(", %d errors (first: %s)", b.errors, b.firstErr)
	}
	res.checks = append(res.checks, [2]string{"peer (Redis Lua pre-deduct)", check})
	log.Info("flash burst through the peer (Redis Lua pre-deduct)", "answers_per_s", int(b.answerRate()), "granted", b.granted, "refused", b.refused,
		"errors", b.errors, "sold_out_after", b.soldOut.Round(time.Millisecond), "granted_p99", b.grantLat.P99, "refused_p99", b.refLat.P99)
	return b, nil
}

// peerHandler is the peer's claim endpoint: POST /v1/claims runs
// peerScript on the stock and users keys and answers as couponlink's api
// would (201 granted, 409 sold_out or limit_reached, 503 on a Redis error).
func peerHandler(rdb *redis.Client, stockKey, usersKey string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/claims", func(w http.ResponseWriter, r *http.Request) {
		var req client.ClaimRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.UserID == "" {
			http.Error(w, `{"error":{"code":"invalid_argument","message":"body"}}`, http.StatusBadRequest)
			return
		}
		n, err := peerScript.Run(r.Context(), rdb, []string{stockKey, usersKey}, req.UserID).Int()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case err != nil:
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, `{"error":{"code":"unavailable","message":%q}}`, err.Error())
		case n == 1:
			w.WriteHeader(http.StatusCreated)
			json.NewEncoder(w).Encode(map[string]any{"template_id": req.TemplateID, "user_id": req.UserID, "channel": req.Channel, "status": "AVAILABLE"})
		case n == 2:
			w.WriteHeader(http.StatusConflict)
			io.WriteString(w, `{"error":{"code":"limit_reached","message":"the user has claimed the per-user limit"}}`)
		default:
			w.WriteHeader(http.StatusConflict)
			io.WriteString(w, `{"error":{"code":"sold_out","message":"sold out"}}`)
		}
	})
	return mux
}

// peerFlashClaim is one claim of a new user through the peer's endpoint
// at url.
func peerFlashClaim(hc *http.Client, url string) func(ctx context.Context, k int) (flashAnswer, error) {
	return func(ctx context.Context, k int) (flashAnswer, error) {
		id := fmt.Sprintf("fp-%d", k)
		body, _ := json.Marshal(client.ClaimRequest{TemplateID: 1, UserID: id, Channel: "flash", RequestID: id})
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		switch {
		case resp.StatusCode == http.StatusCreated:
			return flashGranted, nil
		case resp.StatusCode == http.StatusConflict && bytes.Contains(out, []byte(`"sold_out"`)):
			return flashRefused, nil
		}
		return 0, fmt.Errorf("peer claim %s: HTTP %d %s", id, resp.StatusCode, out)
	}
}

// flash adds the flash phase's rows and checks.
func (r *Report) flash(cfg config, f flashResult) {
	burst := func(b flashBurst) string {
		return fmt.Sprintf("%s (%d answers in %s; granted p50 %s, p99 %s; sold_out p50 %s, p99 %s)", rate(b.answerRate(), "answers/s"),
			b.answers(), sec(b.took), msStr(b.grantLat.P50), msStr(b.grantLat.P99), msStr(b.refLat.P50), msStr(b.refLat.P99))
	}
	sold := func(b flashBurst) string {
		return fmt.Sprintf("%s after %s (%s; first sold_out answer at %s)", count(int64(b.granted)), sec(b.soldOut),
			rate(b.grantRate(), "granted claims/s"), sec(b.firstRefusal))
	}
	load := fmt.Sprintf("a campaign of %s coupons (one channel, per-user limit 1) meets %s claims of distinct users from %d closed-loop HTTP/1.1 keep-alive clients at once",
		count(int64(cfg.flashCoupons)), count(int64(cfg.flashClaims)), cfg.flashClients)
	peer := "the peer: an HTTP handler in the bench process (net/http + go-redis) running a Redis Lua script (SISMEMBER user; GET stock; DECR; SADD user) on the same Redis, " +
		"answering 201 or 409 sold_out; it keeps no durable ledger and writes no MySQL row (no coupon row, no history, nothing for a Redis loss to be rebuilt from)"
	r.add(Row{ID: "9", What: "Flash sale: all answers/s, `couponlink api` (sold-out memory on) vs the Redis Lua pre-deduct", Ours: burst(f.on), Peer: burst(f.peer),
		OursNum: f.on.answerRate(), PeerNum: f.peer.answerRate(), Target: "report",
		Settings: fmt.Sprintf("%s; couponlink: the `couponlink api` binary at its defaults (combiners and sold-out memory on), `couponlink cdc` following; "+
			"%.0f claims refused from memory (couponlink_api_claims_refused_from_memory_total); %s; %s", load, f.refusedFromMemory, f.on.cost, peer+"; "+f.peer.cost)})
	r.add(Row{ID: "9", What: "Flash sale: time until sold out, `couponlink api` vs the Redis Lua pre-deduct", Ours: sold(f.on), Peer: sold(f.peer),
		OursNum: f.on.soldOut.Seconds(), PeerNum: f.peer.soldOut.Seconds(), Ratio: fmt.Sprintf("%.2f× the peer's time", ratioDur(f.on.soldOut, f.peer.soldOut)),
		Target: "report", Settings: load + "; the time from the burst's start to the last grant's answer"})
	r.add(Row{ID: "9", What: "Flash sale: all answers/s, sold-out memory on vs off (`-sold-out-memory=false`: every refusal runs the write path)",
		Ours: burst(f.on), Peer: burst(f.off) + "; " + sold(f.off), OursNum: f.on.answerRate(), PeerNum: f.off.answerRate(), Target: "report",
		Settings: load + "; off: " + f.off.cost})
	var lagMax float64
	var behindMax int64
	for _, s := range f.samples {
		lagMax = max(lagMax, s.cdcLag)
		if s.redis >= 0 {
			behindMax = max(behindMax, s.redis-s.claimable)
		}
	}
	r.add(Row{ID: "9", What: "Flash sale: the cdc during the burst (sold-out memory on)",
		Ours: fmt.Sprintf("couponlink_cdc_lag_seconds max %.0f s; Redis stock key at most %d coupons above MySQL quota − claimed; Redis showed 0 at %s, the last grant was answered at %s",
			lagMax, behindMax, sec(f.redisZero), sec(f.on.soldOut)),
		Peer: "—", Ratio: "—", Target: "report", Settings: fmt.Sprintf("%d samples every 20 ms: %s", len(f.samples), flashTrace(f.samples))})
	for _, c := range f.checks {
		r.check("after the flash sale through the "+c[0], c[1])
		r.Notes = append(r.Notes, "flash sale, "+c[0]+": "+c[1])
	}
}

// flashTrace is a few of the samples: at, MySQL claimable, Redis, cdc lag.
func flashTrace(samples []flashSample) string {
	var parts []string
	step := max(1, len(samples)/8)
	for i := 0; i < len(samples); i += step {
		s := samples[i]
		parts = append(parts, fmt.Sprintf("%s: MySQL %d, Redis %d, lag %.0f s", sec(s.at), s.claimable, s.redis, s.cdcLag))
	}
	return strings.Join(parts, "; ")
}
