package sink

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	gomysql "github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-sql-driver/mysql"
	"golang.org/x/sync/errgroup"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/internal/sqltx"
)

// Daemon is the cdc: it checks the mapping against the server, waits for
// the leader lock, starts the sink from its checkpoint (bootstrapping when
// there is none), and tails the binlog into it while the sink's chores run
// beside (only while it leads).
//
// It outlives the database: when MySQL is not reachable yet, restarts, or
// the lock's connection fails, it gives the lock up, waits (RetryWait,
// doubling up to MaxRetryWait), takes the lock again — unless a standby
// took it meanwhile, then it is the standby — and resumes from the
// checkpoint under a new epoch. A leader fenced by another one (ErrFenced)
// does the same. Any other failure (the tail's, a batch's) starts over from
// the checkpoint with the lock kept, and so the epoch: one epoch per
// takeover (couponlink_cdc_restarts_total counts these restarts). Run
// stops only when ctx ends, or on what a restart cannot fix (see fatal).
type Daemon struct {
	Sink   *Sink
	Tailer canal.Config
	// Rebuild bootstraps the counters from a fresh snapshot at the first start.
	Rebuild bool
	// RetryWait is the wait after a failure, doubling with each failure in
	// a row up to MaxRetryWait; defaults 1 s and 30 s. A run that lasted
	// MaxRetryWait starts the doubling over.
	RetryWait, MaxRetryWait time.Duration
	// OnStart, when set, is called with each position the tailer starts from.
	OnStart func(canal.Position)
	// StallAfter is how long the checkpoint may stay behind the server's
	// binlog end without moving before it is a stall (see stall.go);
	// default 30 s. StallCheckEvery is how often that is looked at;
	// default StallAfter/4, at most 5 s.
	StallAfter, StallCheckEvery time.Duration

	watch atomic.Pointer[stallWatch]
}

// Stalled returns what the stall is while the cdc is stalled, else nil.
func (d *Daemon) Stalled() error {
	if w := d.watch.Load(); w != nil {
		return w.err()
	}
	return nil
}

// Run runs until ctx ends (then it returns nil). It returns an error only
// for failures a restart cannot fix: a purged binlog or a replay across an
// ALTER (rebuild needed), a wrong mapping or binlog setting, MySQL refusing
// couponlink's user; the error says which and what to do.
func (d *Daemon) Run(ctx context.Context) error {
	s := d.Sink
	if d.RetryWait <= 0 {
		d.RetryWait = time.Second
	}
	if d.MaxRetryWait <= 0 {
		d.MaxRetryWait = 30 * time.Second
	}
	d.MaxRetryWait = max(d.MaxRetryWait, d.RetryWait)
	if d.StallAfter <= 0 {
		d.StallAfter = 30 * time.Second
	}
	if d.StallCheckEvery <= 0 {
		d.StallCheckEvery = min(d.StallAfter/4, 5*time.Second)
	}
	w := &stallWatch{s: s, after: d.StallAfter, every: d.StallCheckEvery}
	d.watch.Store(w)
	wctx, stopWatch := context.WithCancel(ctx)
	var watching sync.WaitGroup
	watching.Go(func() { w.run(wctx) })
	defer watching.Wait()
	defer stopWatch()
	var leader *Leader
	giveUp := func() {
		if leader != nil {
			leader.Release(ctx)
			leader = nil
		}
		s.m.leader.Set(0)
		s.m.leaderEpoch.Set(0)
		s.noProgress()
	}
	defer giveUp()
	rebuild, wait := d.Rebuild, d.RetryWait
	for {
		if leader != nil && leader.isLost() {
			giveUp() // lost while waiting: take it again before the checkpoint
		}
		ran, err := d.attempt(ctx, &leader, rebuild)
		if ctx.Err() != nil {
			s.log.Info("cdc stopped", "checkpoint", s.Position().String())
			return nil
		}
		if ran > 0 {
			rebuild = false // the bootstrap asked for is done
		}
		if ran >= d.MaxRetryWait {
			wait = d.RetryWait
		}
		if err := fatal(err); err != nil {
			return err
		}
		lost := leader != nil && (leader.isLost() || errors.Is(err, errLeaderLost))
		if lost || (leader != nil && errors.Is(err, ErrFenced)) {
			giveUp()
		}
		if reason := restartReason(err, lost); reason != "" {
			s.m.restarts.WithLabelValues(reason).Inc()
		}
		s.log.Warn("cdc interrupted; starting over from the checkpoint", "err", err, "retry_in", wait,
			"leader", leader != nil)
		select {
		case <-ctx.Done():
			s.log.Info("cdc stopped", "checkpoint", s.Position().String())
			return nil
		case <-time.After(wait):
		}
		wait = min(2*wait, d.MaxRetryWait)
	}
}

// attempt checks the mapping, takes the lock unless *leader holds it, and
// runs the sink and the tailer until one fails. ran is how long they ran
// (0: the sink did not start).
func (d *Daemon) attempt(ctx context.Context, leader **Leader, rebuild bool) (ran time.Duration, err error) {
	s := d.Sink
	// resolved at every start: the shard tables a pattern matches now are
	// those the snapshot counts and the tailer follows
	m, err := s.cfg.Mapping.Resolve(ctx, s.db)
	if err != nil {
		return 0, &checkError{err}
	}
	if err := m.Check(ctx, s.cfg.BinlogDB); err != nil {
		return 0, &checkError{err}
	}
	if err := checkBinlogSource(ctx, s.db, s.cfg.BinlogDB); err != nil {
		return 0, &checkError{err}
	}
	s.useMapping(m)
	if *leader == nil {
		if *leader, err = AcquireLeader(ctx, s.db, LeaderConfig{Checkpoint: s.cfg.Name,
			Timeout: s.cfg.LeaderTimeout, Logger: s.cfg.Logger.With("component", "leader")}); err != nil {
			return 0, err
		}
	}
	return d.runOnce(ctx, *leader, rebuild)
}

// runOnce starts the sink as the checkpoint's writer and runs the tailer
// and the chores until one fails, ctx ends or the lock is lost; the chores
// run only while this process leads, so they stop with the tailer.
func (d *Daemon) runOnce(ctx context.Context, leader *Leader, rebuild bool) (time.Duration, error) {
	s := d.Sink
	from, err := s.start(ctx, rebuild, leader)
	if err != nil {
		return 0, err
	}
	started := time.Now()
	ran := func() time.Duration { return max(time.Since(started), time.Nanosecond) }
	if d.OnStart != nil {
		d.OnStart(from)
	}
	cfg := d.Tailer
	cfg.Mapping = s.cfg.Mapping
	if cfg.Logger == nil {
		cfg.Logger = s.cfg.Logger // the tailer names its component
	}
	t, err := canal.New(cfg)
	if err != nil {
		return ran(), fmt.Errorf("start binlog tailer: %w", err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	var lost atomic.Bool
	var watching sync.WaitGroup // the leader watch: it ends with runCtx
	watching.Go(func() {
		select {
		case <-leader.Lost():
			lost.Store(true)
			cancel()
		case <-runCtx.Done():
		}
	})
	defer func() {
		cancel()
		watching.Wait()
	}()
	start := canal.ResumePoint(ctx, s.cfg.BinlogDB, from)
	mode := "gtid"
	if start.GTID == "" {
		mode = "file/offset (verified against the GTID)"
	}
	if (start.GTID != "" && from.File != "") || s.redisStampsAhead(ctx, from) {
		// the checkpoint's file and offset are not this server's (a
		// failover, a purged file), or keys are stamped past them (a
		// failover whose new primary's binlog has the same offsets up to
		// the checkpoint): the stamps may be positions of another binlog,
		// higher than any this one will reach at that point
		s.resetRedisStamps(from)
	}
	tables := s.cfg.Mapping.SourceTables()
	s.log.Info("tailing the binlog", "from", from.String(), "mode", mode, "table_count", len(tables), "tables", canal.FewOf(tables, 20))
	g, gctx := errgroup.WithContext(runCtx)
	g.Go(func() error {
		err := t.Run(gctx, start, s)
		if err == nil && gctx.Err() == nil {
			err = errors.New("binlog tailer stopped")
		}
		return err
	})
	for _, c := range s.Chores() {
		g.Go(func() error { return c.Run(gctx) })
	}
	err = g.Wait()
	if lost.Load() {
		return ran(), errLeaderLost
	}
	return ran(), err
}

// ErrUndecodableRow stops a strict cdc (Config.Strict) at a row the mapping
// cannot decode.
var ErrUndecodableRow = errors.New("a source row the mapping cannot decode")

var errLeaderLost = errors.New("the leader lock's connection failed; giving the lock up")

// restartReasons are the reasons of couponlink_cdc_restarts_total.
var restartReasons = []string{"lock_lost", "deadlock", "connection", "error"}

// restartReason names why the cdc starts over after err: lock_lost (the
// lock's connection failed: it takes the lock again, under a new epoch),
// deadlock (one of its transactions ran again and lost each time),
// connection, or error; "" when another cdc took over (fenced): this one
// is a standby now, not restarting.
func restartReason(err error, lost bool) string {
	switch {
	case errors.Is(err, ErrFenced):
		return ""
	case lost || errors.Is(err, errLeaderLost):
		return "lock_lost"
	case anyError(err, sqltx.Deadlock):
		return "deadlock"
	case anyError(err, isTransient):
		return "connection"
	}
	return "error"
}

// checkError is a failed check of the mapping and the server's binlog
// settings (canal.Mapping.Check).
type checkError struct{ err error }

func (e *checkError) Error() string { return e.err.Error() }
func (e *checkError) Unwrap() error { return e.err }

// fatal returns err, explained, when it is one a restart cannot fix, and
// nil when waiting and starting over may cure it (the server down or
// restarting, a lost lock, a deadlock, anything not known to be permanent).
func fatal(err error) error {
	var ce *checkError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrUndecodableRow):
		return fmt.Errorf("%w\nfix the row or the mapping's status codes, or start the cdc without -strict (the row is then an undecodable_row anomaly, counted nowhere)", err)
	case errors.Is(err, canal.ErrBinlogPurged), errors.Is(err, canal.ErrSchemaChanged):
		return fmt.Errorf("%w\nthe binlog the checkpoint needs cannot be replayed; run `couponlink cdc --rebuild` to recount from a snapshot", err)
	case anyError(err, isAccessDenied):
		return fmt.Errorf("MySQL refused couponlink's user: %w\ngrant it the privileges of deploy/mysql/grants.sql (or fix the DSN's user and password), then start the cdc again", err)
	case anyError(err, isUnknownDatabase):
		return fmt.Errorf("%w\nthe DSN names a database that does not exist; run `couponlink migrate` (or fix the DSN), then start the cdc again", err)
	case errors.As(err, &ce) && !anyError(err, isTransient):
		return fmt.Errorf("the mapping or the server's binlog settings are wrong: %w\nfix them, then start the cdc again", err)
	}
	return nil
}

// anyError reports whether pred holds for err or any error it wraps,
// through errors.Join trees too.
func anyError(err error, pred func(error) bool) bool {
	if err == nil {
		return false
	}
	if pred(err) {
		return true
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return anyError(u.Unwrap(), pred)
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if anyError(e, pred) {
				return true
			}
		}
	}
	return false
}

// serverCode is the error number of a server error from either driver.
func serverCode(err error) (uint16, bool) {
	switch e := err.(type) {
	case *mysql.MySQLError:
		return e.Number, true
	case *gomysql.MyError:
		return e.Code, true
	}
	return 0, false
}

func isAccessDenied(err error) bool {
	code, ok := serverCode(err)
	switch {
	case !ok:
		return false
	case code == 1044, code == 1045, code == 1142, code == 1143, code == 1227, code == 1370, code == 1698:
		// db, user/password, table, column, privilege, routine, no password
		return true
	}
	return false
}

func isUnknownDatabase(err error) bool {
	code, ok := serverCode(err)
	return ok && code == 1049
}

// isTransient reports whether err is a connection failing or the server
// being unavailable for a while.
func isTransient(err error) bool {
	var ne net.Error
	switch {
	case errors.As(err, &ne), errors.Is(err, driver.ErrBadConn), errors.Is(err, mysql.ErrInvalidConn),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, context.DeadlineExceeded):
		return true
	}
	code, ok := serverCode(err)
	switch {
	case !ok:
		return false
	case code == 1040, code == 1053, code == 1152, code == 1153, code == 1158, code == 1159, code == 1160, code == 1161,
		code == 1205, code == 1213, code == 1927, code == 4031:
		// too many connections, shutdown, aborted, packet errors, net errors,
		// lock wait timeout, deadlock, connection killed, idle disconnect
		return true
	}
	return false
}
