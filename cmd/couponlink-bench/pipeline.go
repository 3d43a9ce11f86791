package main

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/pprof"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/sink"
)

// meteredSink is the canal.Handler of the in-process pipeline: it hands
// each batch to the real sink.Sink and, once ApplyBatch returned (counters
// and checkpoint committed, Redis written), takes the time: the end of a
// catch-up (target reached) or each claimed coupon's visibility (onBatch).
type meteredSink struct {
	s      *sink.Sink
	target canal.Position
	timer  *redisTimer
	// onBatch gets the batch, when its counters were committed (the start
	// of the sink's Redis write, which follows the COMMIT at once) and
	// when its Redis keys were written.
	onBatch func(b *canal.Batch, counterAt, redisAt time.Time)

	rows      int64
	firstRows int
	first     time.Time
	endAt     time.Time
	done      chan struct{}
	once      sync.Once
	mu        sync.Mutex
	applies   applyTimes
	sql       *sqlTimer // the sink's statements
}

// applyTimes are the sink.ApplyBatch times of the batches with rows: in
// all, up to the start of its Redis write (the MySQL transaction and the
// bookkeeping before it), and of the Redis write.
type applyTimes struct {
	total, mysql, redis []time.Duration
	rows                int64
}

func (a applyTimes) busy() time.Duration {
	var sum time.Duration
	for _, d := range a.total {
		sum += d
	}
	return sum
}

// takeApplies returns the ApplyBatch times since the last call.
func (h *meteredSink) takeApplies() applyTimes {
	h.mu.Lock()
	defer h.mu.Unlock()
	a := h.applies
	h.applies = applyTimes{}
	return a
}

func (h *meteredSink) ApplyBatch(ctx context.Context, b *canal.Batch) error {
	if b.Rows > 0 && h.first.IsZero() {
		h.first, h.firstRows = time.Now(), b.Rows
	}
	h.timer.reset()
	t0 := time.Now()
	if err := h.s.ApplyBatch(ctx, b); err != nil {
		return err
	}
	now := time.Now()
	c, r := h.timer.times(now)
	if b.Rows > 0 {
		h.mu.Lock()
		h.applies.total = append(h.applies.total, now.Sub(t0))
		h.applies.mysql = append(h.applies.mysql, c.Sub(t0))
		h.applies.redis = append(h.applies.redis, r.Sub(c))
		h.applies.rows += int64(b.Rows)
		h.mu.Unlock()
	}
	h.rows += int64(b.Rows)
	if h.onBatch != nil {
		h.onBatch(b, c, r)
	}
	if !h.target.IsZero() && b.End.Compare(h.target) >= 0 {
		h.once.Do(func() {
			h.endAt = now
			close(h.done)
		})
	}
	return nil
}

// redisTimer is a go-redis hook that notes when the sink's pipelined
// stock write started and ended.
type redisTimer struct {
	mu         sync.Mutex
	start, end time.Time
}

func (t *redisTimer) reset() {
	t.mu.Lock()
	t.start, t.end = time.Time{}, time.Time{}
	t.mu.Unlock()
}

// times returns the start and end of the first pipelined write since
// reset; both are def when there was none.
func (t *redisTimer) times(def time.Time) (time.Time, time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.start.IsZero() {
		return def, def
	}
	return t.start, t.end
}

func (t *redisTimer) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (t *redisTimer) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (t *redisTimer) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		t0 := time.Now()
		err := next(ctx, cmds)
		t1 := time.Now()
		t.mu.Lock()
		if t.start.IsZero() {
			t.start, t.end = t0, t1
		}
		t.mu.Unlock()
		return err
	}
}

// pipeline is a running in-process cdc: sink.Sink (as `couponlink cdc`
// configures it: 8 MySQL connections, Redis owner mode, default batching)
// fed by canal.Tailer.
type pipeline struct {
	h      *meteredSink
	cancel context.CancelFunc
	errc   chan error
	close  func()
	from   canal.Position
	stop   func() error // ends the tailer (the batch in flight is applied) and closes the pools; idempotent
}

// startPipeline starts the sink from the checkpoint and the tailer at from
// (zero: the position the sink returns).
func startPipeline(ctx context.Context, cfg config, e *env, from canal.Position, h *meteredSink, log *slog.Logger) (*pipeline, error) {
	h.sql = &sqlTimer{}
	db, err := openTimedMySQL(e.appDSN, 8, h.sql)
	if err != nil {
		return nil, err
	}
	h.timer = &redisTimer{}
	h.done = make(chan struct{})
	rdb := redis.NewClient(&redis.Options{Addr: e.redisAddr, DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second})
	rdb.AddHook(h.timer)
	closeAll := func() { db.Close(); rdb.Close() }
	quiet := quietLogger(log)
	s, err := sink.New(sink.Config{DB: db, Name: "default", Redis: rdb, Logger: quiet, Registerer: prometheus.NewRegistry()})
	if err != nil {
		closeAll()
		return nil, err
	}
	h.s = s
	cp, err := s.Start(ctx, false)
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("start sink: %w", err)
	}
	if from.IsZero() {
		from = cp
	}
	tcfg, err := canal.ConfigFromDSN(e.dsn)
	if err != nil {
		closeAll()
		return nil, err
	}
	tcfg.Logger = quiet
	if cfg.batchRows > 0 {
		tcfg.BatchRows = cfg.batchRows
	}
	if cfg.batchWait >= 0 {
		tcfg.BatchWait = cfg.batchWait
	}
	t, err := canal.New(tcfg)
	if err != nil {
		closeAll()
		return nil, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	p := &pipeline{h: h, cancel: cancel, errc: make(chan error, 1), close: closeAll, from: from}
	p.stop = sync.OnceValue(func() error {
		p.cancel()
		err := <-p.errc
		p.close()
		return err
	})
	go pprof.Do(runCtx, pprof.Labels("part", "cdc"), func(ctx context.Context) { p.errc <- t.Run(ctx, from, h) })
	return p, nil
}

// wait blocks until the target is reached, the tailer fails, or ctx ends.
func (p *pipeline) wait(ctx context.Context, limit time.Duration) error {
	select {
	case <-p.h.done:
		return nil
	case err := <-p.errc:
		p.errc <- err // for stop
		if err == nil {
			err = fmt.Errorf("tailer stopped")
		}
		return fmt.Errorf("tailer: %w", err)
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(limit):
		return fmt.Errorf("pipeline did not reach %s in %s", p.h.target, limit)
	}
}

// timePipeline replays [from, to] through the pipeline, the derived state
// having been reset to from.
func timePipeline(ctx context.Context, cfg config, e *env, from, to canal.Position, log *slog.Logger) (readerRun, error) {
	h := &meteredSink{target: to}
	st0, _ := e.serverStatus(ctx)
	mark, t0 := e.cpuMark(), time.Now()
	p, err := startPipeline(ctx, cfg, e, from, h, log)
	if err != nil {
		return readerRun{}, err
	}
	werr := p.wait(ctx, 15*time.Minute)
	cpu, dbCPU := mark.since()
	if err := p.stop(); err != nil && werr == nil {
		werr = fmt.Errorf("tailer: %w", err)
	}
	if werr != nil {
		return readerRun{}, werr
	}
	st1, _ := e.serverStatus(ctx)
	applies := h.takeApplies()
	r := readerRun{rows: h.rows, wall: h.endAt.Sub(t0), skipped: int64(h.firstRows), batches: len(applies.total)}
	r.rate = float64(h.rows-int64(h.firstRows)) / h.endAt.Sub(h.first).Seconds()
	r.costs(cpu, dbCPU)
	r.applyBusy = applies.busy().Seconds() / h.endAt.Sub(h.first).Seconds()
	r.apply, r.applyMySQL, r.applyRedis = summarize(applies.total), summarize(applies.mysql), summarize(applies.redis)
	r.perBatch = perOp(st0, st1, r.batches)
	r.sqlTimes = h.sql.take()
	return r, nil
}

// cpuTime is the process's user+system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
