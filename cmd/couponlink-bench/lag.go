package main

import (
	"context"
	"fmt"
	"log/slog"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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
	return pacedRun(ctx, rate, d, writers, func(i int) (int64, error) {
		n := strconv.Itoa(i)
		c, err := e.store.Claim(ctx, coupon.ClaimRequest{TemplateID: tpl, UserID: tag + "-" + n, Channel: channel(i), RequestID: tag + "-" + n})
		return c.UserCouponID, err
	})
}

// pacedInserts writes coupons of tpl at rate per second for d from
// writers goroutines, each one autocommit INSERT of one user_coupon row
// (a 1-row source transaction, one round trip), spread over the 40
// channels.
func pacedInserts(ctx context.Context, e *env, tpl int64, rate int, d time.Duration, writers int, tag string) pacedLoad {
	return pacedRun(ctx, rate, d, writers, func(i int) (int64, error) {
		res, err := e.storeDB.ExecContext(ctx, insertOne, tpl, tag+"-"+strconv.Itoa(i), channel(i))
		if err != nil {
			return 0, err
		}
		return res.LastInsertId()
	})
}

// pacedMultiInserts is pacedInserts with per rows in each autocommit
// INSERT (a per-row source transaction): rate rows per second, rate/per
// statements. InnoDB gives a multi-row INSERT consecutive ids
// (innodb_autoinc_lock_mode 0 or 1), so each row's id is known.
func pacedMultiInserts(ctx context.Context, e *env, tpl int64, rate int, d time.Duration, writers int, tag string, per int) pacedLoad {
	out := pacedRun(ctx, max(rate/per, 1), d, writers, func(i int) (int64, error) {
		res, err := e.storeDB.ExecContext(ctx, insertCoupons(tpl, tag+"-"+strconv.Itoa(i)+"-", per))
		if err != nil {
			return 0, err
		}
		return res.LastInsertId()
	})
	rows := make([]commit, 0, len(out.commits)*per)
	for _, c := range out.commits {
		for k := range int64(per) {
			rows = append(rows, commit{c.id + k, c.at})
		}
	}
	out.commits = rows
	return out
}

// pacedRun runs job 0, 1, … at rate per second for d from writers
// goroutines; a job returns the id it committed. When the writers fall
// behind, the rate drops: the achieved rate is what counts.
func pacedRun(ctx context.Context, rate int, d time.Duration, writers int, job func(i int) (int64, error)) pacedLoad {
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
				id, err := job(i)
				at := time.Now()
				if err != nil {
					if errs.Add(1) == 1 {
						mu.Lock()
						out.firstErr = err
						mu.Unlock()
					}
					continue
				}
				mine = append(mine, commit{id, at})
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
	rows                          int64         // row changes the pipeline applied during the load
	profile                       string        // the CPU profile of the load ("": none)
	cdcCPU, noopCPU               time.Duration // CPU of the pipeline's and the no-op reader's goroutines, from the profile's labels
	apply, applyMySQL, applyRedis latStats
	sqlTimes                      string
	benchCores, dbCores           float64
}

// runLag runs claims at rate while the pipeline (resumed from its
// checkpoint) and a no-op reader follow the binlog, and measures both lags.
func runLag(ctx context.Context, cfg config, e *env, rate int, log *slog.Logger) (lagResult, error) {
	res := lagResult{target: rate, warm: min(time.Second, cfg.lagDuration/4),
		profile: filepath.Join(cfg.out, fmt.Sprintf("%s-lag-%d.pprof", cfg.stamp, rate))}
	log.Info("phase 3: steady-state lag", "rate", rate, "duration", cfg.lagDuration, "load", cfg.lagLoad, "writers", cfg.lagWriters(rate))
	tag := fmt.Sprintf("lag%d.%d", rate, time.Now().UnixMilli())
	paced := pacedInserts
	switch {
	case cfg.lagLoad == "claims":
		paced = pacedClaims
	case cfg.lagTxRows > 1:
		paced = func(ctx context.Context, e *env, tpl int64, rate int, d time.Duration, writers int, tag string) pacedLoad {
			return pacedMultiInserts(ctx, e, tpl, rate, d, writers, tag, cfg.lagTxRows)
		}
	}
	err := followLag(ctx, cfg, e, e.lagTpl, &res, log, func() pacedLoad {
		return paced(ctx, e, e.lagTpl, rate, cfg.lagDuration, cfg.lagWriters(rate), tag)
	})
	if err != nil {
		return res, err
	}
	if err := res.labelCPU(ctx); err != nil {
		log.Warn("could not read the lag run's CPU profile", "err", err)
	}
	log.Info("lag", "target_rate", rate, "achieved_rate", int(res.load.rate()), "samples", res.counter.N, "missing", res.missing,
		"counter_p50", res.counter.P50, "counter_p99", res.counter.P99, "redis_p99", res.redis.P99, "noop_p50", res.noop.P50, "noop_p99", res.noop.P99,
		"batches", res.batches, "rows_per_batch", fmt.Sprintf("%.1f", res.rowsPerBatch), "cdc_cpu_per_row", perRow(res.cdcCPU, res.rows),
		"apply_p50", res.apply.P50, "apply_p99", res.apply.P99, "bench_cores", fmt.Sprintf("%.2f", res.benchCores),
		"mariadb_cores", fmt.Sprintf("%.2f", res.dbCores))
	return res, nil
}

// followLag runs load while the pipeline (resumed from its checkpoint) and
// a no-op reader follow the binlog, and sets res's lags of the coupons of
// tpl that load created.
func followLag(ctx context.Context, cfg config, e *env, tpl int64, res *lagResult, log *slog.Logger, load func() pacedLoad) error {
	now, err := canal.CurrentPosition(ctx, e.db)
	if err != nil {
		return err
	}
	seen := &lagSeen{pipe: map[int64]pipeSeen{}, noop: map[int64]time.Time{}}
	h := &meteredSink{target: now, onBatch: seen.batch(tpl)}
	p, err := startPipeline(ctx, cfg, e, canal.Position{}, h, log)
	if err != nil {
		return err
	}
	defer p.stop()
	res.startPos = p.from.String()
	nr := &noopReader{stamp: seen.stamp, ucTable: "couponlink.user_coupon"}
	stopNoop, err := startNoop(e, []string{sourceRegex()}, nr, modeStart(now, "file"))
	if err != nil {
		return err
	}
	defer stopNoop()
	if err := p.wait(ctx, time.Minute); err != nil {
		return fmt.Errorf("pipeline catching up to %s: %w", now, err)
	}

	res.measure(e, h, load)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if res.load.errors > 0 {
		log.Warn("claims failed", "errors", res.load.errors, "err", res.load.firstErr)
	}
	seen.drain(ctx, res.load.commits, 15*time.Second)
	res.batchStats(h)
	if err := p.stop(); err != nil {
		return fmt.Errorf("pipeline: %w", err)
	}
	stopNoop()
	if nr.runErr != nil && len(seen.noop) == 0 {
		return fmt.Errorf("no-op canal: %w", nr.runErr)
	}
	seen.lags(res)
	return nil
}

// measure runs load, with the pipeline's batch and SQL times and the CPU
// of this process and of MariaDB counted from its start.
func (res *lagResult) measure(e *env, h *meteredSink, load func() pacedLoad) {
	h.takeApplies()
	h.sql.take()
	mark := e.cpuMark()
	stopProf := func() {}
	if res.profile != "" {
		var err error
		if stopProf, err = startProfile(res.profile); err != nil { // in cfg.out, which bench made
			slog.Warn("no CPU profile of the lag run", "err", err)
			res.profile, stopProf = "", func() {}
		}
	}
	res.load = load()
	stopProf()
	self, db := mark.since()
	res.benchCores, res.dbCores = coresOver(self, res.load.took), coresOver(db, res.load.took)
}

// batchStats takes the pipeline's batches and SQL times since measure.
func (res *lagResult) batchStats(h *meteredSink) {
	applies := h.takeApplies()
	res.sqlTimes = h.sql.take()
	res.batches = len(applies.total)
	res.apply, res.applyMySQL, res.applyRedis = summarize(applies.total), summarize(applies.mysql), summarize(applies.redis)
	res.rows = applies.rows
	if res.batches > 0 {
		res.rowsPerBatch = float64(applies.rows) / float64(res.batches)
	}
}

// lagSeen is when each claimed coupon showed: in the pipeline's committed
// counters and written Redis keys, and at the no-op reader.
type lagSeen struct {
	mu   sync.Mutex
	pipe map[int64]pipeSeen
	noop map[int64]time.Time
}

type pipeSeen struct{ counter, redis time.Time }

// batch is the meteredSink's onBatch: it notes the new coupons of tpl.
func (s *lagSeen) batch(tpl int64) func(b *canal.Batch, counterAt, redisAt time.Time) {
	return func(b *canal.Batch, counterAt, redisAt time.Time) {
		s.mu.Lock()
		defer s.mu.Unlock()
		for i := range b.Transitions {
			if t := &b.Transitions[i]; t.From == coupon.None && t.Template == tpl {
				s.pipe[t.Coupon] = pipeSeen{counterAt, redisAt}
			}
		}
	}
}

// stamp is the no-op reader's.
func (s *lagSeen) stamp(ids []int64, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		s.noop[id] = at
	}
}

// drain waits, for at most limit, until both followers have shown every
// commit.
func (s *lagSeen) drain(ctx context.Context, commits []commit, limit time.Duration) {
	_ = poll(ctx, 20*time.Millisecond, limit, func() (bool, error) { return s.showedAll(commits), nil })
}

func (s *lagSeen) showedAll(commits []commit) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range commits {
		if _, ok := s.pipe[c.id]; !ok {
			return false
		}
		if _, ok := s.noop[c.id]; !ok {
			return false
		}
	}
	return true
}

// lags sets res's three lags over the commits after the warm-up, and the
// commits either follower never showed.
func (s *lagSeen) lags(res *lagResult) {
	var cl, rl, nl []time.Duration
	from := res.load.start.Add(res.warm)
	for _, c := range res.load.commits {
		ps, ok1 := s.pipe[c.id]
		ns, ok2 := s.noop[c.id]
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
}

// labelCPU reads, from the run's CPU profile, the CPU of the pipeline's
// goroutines (label part=cdc: the tailer, the sink, their MySQL and Redis
// calls) and of the no-op reader's (part=noop). The runtime's background
// work (GC workers) carries no label and counts in neither.
func (res *lagResult) labelCPU(ctx context.Context) error {
	if res.profile == "" {
		return nil
	}
	out, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-tags", res.profile).Output()
	if err != nil {
		return fmt.Errorf("go tool pprof -tags: %w", err)
	}
	tags := parseTags(string(out), "part")
	res.cdcCPU, res.noopCPU = tags["cdc"], tags["noop"]
	return nil
}

// parseTags reads the values of one label from `go tool pprof -tags`:
//
//	part: Total 2.3s
//	      1.8s (78.26%): cdc
//	      500ms (21.74%): noop
func parseTags(out, key string) map[string]time.Duration {
	got := map[string]time.Duration{}
	in := false
	for _, line := range strings.Split(out, "\n") {
		t := strings.TrimSpace(line)
		if strings.HasPrefix(t, key+": Total") {
			in = true
			continue
		}
		if !in {
			continue
		}
		amount, value, ok := strings.Cut(t, ": ")
		if !ok || strings.Contains(t, ": Total") {
			if t != "" {
				in = false
			}
			continue
		}
		d, err := time.ParseDuration(strings.Fields(amount)[0])
		if err == nil {
			got[value] = d
		}
	}
	return got
}
