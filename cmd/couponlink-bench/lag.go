package main

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/coupon"
)

// commit is one claim, with the time its COMMIT returned to the client.
type commit struct {
	id int64
	at time.Time
}

// pacedLoad is what a paced claim load did.
type pacedLoad struct {
	commits  []commit
	start    time.Time
	took     time.Duration
	errors   int64
	firstErr error
}

func (l pacedLoad) rate() float64 { return float64(len(l.commits)) / l.took.Seconds() }

// pacedClaims claims coupons of tpl through coupon.Store.Claim (what POST
// /v1/claims runs) at rate per second for d, from writers goroutines,
// spread over the 40 channels. When the writers fall behind, the rate
// drops: the achieved rate is what counts.
func pacedClaims(ctx context.Context, e *env, tpl int64, rate int, d time.Duration, writers int, tag string) pacedLoad {
	jobs := make(chan int, writers)
	var mu sync.Mutex
	var out pacedLoad
	out.start = time.Now()
	var errs atomic.Int64
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			var mine []commit
			for i := range jobs {
				n := strconv.Itoa(i)
				c, err := e.store.Claim(ctx, coupon.ClaimRequest{TemplateID: tpl, UserID: tag + "-" + n, Channel: channel(i), RequestID: tag + "-" + n})
				at := time.Now()
				if err != nil {
					if errs.Add(1) == 1 {
						mu.Lock()
						out.firstErr = err
						mu.Unlock()
					}
					continue
				}
				mine = append(mine, commit{c.UserCouponID, at})
			}
			mu.Lock()
			out.commits = append(out.commits, mine...)
			mu.Unlock()
		})
	}
	period := time.Second / time.Duration(rate)
	end := out.start.Add(d)
	for i := 0; ctx.Err() == nil; i++ {
		due := out.start.Add(time.Duration(i) * period)
		if !due.Before(end) || !time.Now().Before(end) { // behind schedule: the run still ends on time
			break
		}
		if w := time.Until(due); w > 0 {
			time.Sleep(w)
		}
		select {
		case jobs <- i:
		case <-time.After(time.Until(end)):
		}
	}
	close(jobs)
	wg.Wait()
	out.took = time.Since(out.start)
	out.errors = errs.Load()
	return out
}

// latStats summarises lags.
type latStats struct {
	N             int
	P50, P99, Max time.Duration
	Negative      int // seen before the client's COMMIT returned (clamped to 0)
}

func summarize(ds []time.Duration) latStats {
	s := latStats{N: len(ds)}
	if len(ds) == 0 {
		return s
	}
	for i, d := range ds {
		if d < 0 {
			ds[i] = 0
			s.Negative++
		}
	}
	slices.Sort(ds)
	s.P50, s.P99, s.Max = pct(ds, 0.50), pct(ds, 0.99), ds[len(ds)-1]
	return s
}

// pct is the p-quantile of sorted ds (nearest rank).
func pct(ds []time.Duration, p float64) time.Duration {
	i := int(float64(len(ds))*p+0.5) - 1
	return ds[min(max(i, 0), len(ds)-1)]
}

type lagResult struct {
	target   int
	load     pacedLoad
	counter  latStats // commit → counters committed by the sink
	redis    latStats // commit → Redis keys written
	noop     latStats // commit → no-op reader saw the transaction end
	missing  int      // commits the pipeline or the reader never showed within the drain
	warm     time.Duration
	startPos string
	// during the load: the pipeline's batches (with rows), their mean
	// size and ApplyBatch times; CPU cores used by this process (writers,
	// pipeline, no-op reader) and by MariaDB
	batches                       int
	rowsPerBatch                  float64
	apply, applyMySQL, applyRedis latStats
	sqlTimes                      string
	benchCores, dbCores           float64
}

// runLag runs claims at rate while the pipeline (resumed from its
// checkpoint) and a no-op reader follow the binlog, and measures both lags.
func runLag(ctx context.Context, cfg config, e *env, rate int, log *slog.Logger) (lagResult, error) {
	res := lagResult{target: rate, warm: min(time.Second, cfg.lagDuration/4)}
	log.Info("phase 3: steady-state lag", "rate", rate, "duration", cfg.lagDuration)
	now, err := canal.CurrentPosition(ctx, e.db)
	if err != nil {
		return res, err
	}
	type seen struct{ counter, redis time.Time }
	var mu sync.Mutex
	pipeSeen := map[int64]seen{}
	noopSeen := map[int64]time.Time{}

	h := &meteredSink{target: now, onBatch: func(b *canal.Batch, counterAt, redisAt time.Time) {
		mu.Lock()
		defer mu.Unlock()
		for i := range b.Transitions {
			if t := &b.Transitions[i]; t.From == coupon.None && t.Template == e.lagTpl {
				pipeSeen[t.Coupon] = seen{counterAt, redisAt}
			}
		}
	}}
	p, err := startPipeline(ctx, cfg, e, canal.Position{}, h, log)
	if err != nil {
		return res, err
	}
	defer p.stop()
	res.startPos = p.from.String()
	nr := &noopReader{stamp: func(ids []int64, at time.Time) {
		mu.Lock()
		defer mu.Unlock()
		for _, id := range ids {
			noopSeen[id] = at
		}
	}}
	stopNoop, err := startNoop(e, nr, modeStart(now, "file"), log)
	if err != nil {
		return res, err
	}
	defer stopNoop()
	if err := p.wait(ctx, time.Minute); err != nil {
		return res, fmt.Errorf("pipeline catching up to %s: %w", now, err)
	}

	h.takeApplies()
	h.sql.take()
	cpu0, db0 := cpuTime(), e.mariadbCPU()
	res.load = pacedClaims(ctx, e, e.lagTpl, rate, cfg.lagDuration, cfg.writers, fmt.Sprintf("lag%d.%d", rate, time.Now().UnixMilli()))
	res.benchCores = (cpuTime() - cpu0).Seconds() / res.load.took.Seconds()
	res.dbCores = (e.mariadbCPU() - db0).Seconds() / res.load.took.Seconds()
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	if res.load.errors > 0 {
		log.Warn("claims failed", "errors", res.load.errors, "err", res.load.firstErr)
	}
	// Drain: wait until both followers have shown every commit.
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		mu.Lock()
		all := true
		for _, c := range res.load.commits {
			if _, ok := pipeSeen[c.id]; !ok {
				all = false
				break
			}
			if _, ok := noopSeen[c.id]; !ok {
				all = false
				break
			}
		}
		mu.Unlock()
		if all {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	applies := h.takeApplies()
	res.sqlTimes = h.sql.take()
	if err := p.stop(); err != nil {
		return res, fmt.Errorf("pipeline: %w", err)
	}
	res.batches = len(applies.total)
	res.apply, res.applyMySQL, res.applyRedis = summarize(applies.total), summarize(applies.mysql), summarize(applies.redis)
	if res.batches > 0 {
		res.rowsPerBatch = float64(applies.rows) / float64(res.batches)
	}
	stopNoop()
	if nr.runErr != nil && len(noopSeen) == 0 {
		return res, fmt.Errorf("no-op canal: %w", nr.runErr)
	}

	var cl, rl, nl []time.Duration
	from := res.load.start.Add(res.warm)
	for _, c := range res.load.commits {
		ps, ok1 := pipeSeen[c.id]
		ns, ok2 := noopSeen[c.id]
		if !ok1 || !ok2 {
			res.missing++
			continue
		}
		if c.at.Before(from) {
			continue
		}
		cl = append(cl, ps.counter.Sub(c.at))
		rl = append(rl, ps.redis.Sub(c.at))
		nl = append(nl, ns.Sub(c.at))
	}
	res.counter, res.redis, res.noop = summarize(cl), summarize(rl), summarize(nl)
	log.Info("lag", "target_rate", rate, "achieved_rate", int(res.load.rate()), "samples", res.counter.N, "missing", res.missing,
		"counter_p50", res.counter.P50, "counter_p99", res.counter.P99, "redis_p99", res.redis.P99, "noop_p99", res.noop.P99,
		"batches", res.batches, "apply_p50", res.apply.P50, "apply_p99", res.apply.P99, "bench_cores", fmt.Sprintf("%.2f", res.benchCores),
		"mariadb_cores", fmt.Sprintf("%.2f", res.dbCores))
	return res, nil
}
