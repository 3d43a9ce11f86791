package sink

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"
)

// DefaultLeaderTimeout is how long a leader the server cannot hear from
// keeps the lock (LeaderConfig.Timeout).
const DefaultLeaderTimeout = 10 * time.Second

// Leader is the MySQL advisory lock that makes one cdc the writer of a
// checkpoint; a standby blocks in AcquireLeader until the lock is free. The
// lock lives as long as its connection; Lost is closed when that connection
// fails, and the epoch check in every batch fences a deposed leader anyway.
//
// How long a dead leader keeps the lock: when its process dies, its host's
// kernel closes the connection and the server frees the lock at once (the
// standby's GET_LOCK returns within milliseconds). When the server hears
// nothing (the leader's host is gone, or a network partition), the lock's
// session has a wait_timeout of LeaderConfig.Timeout: the server drops a
// session silent that long and frees its lock. The leader pings the
// session every Timeout/4 (at most every second), so a live leader is never
// dropped, and gives the lead up when a ping fails or takes Timeout/2.
type Leader struct {
	conn  *sql.Conn
	name  string
	every time.Duration // ping period
	wait  time.Duration // how long a ping may take
	lost  chan struct{}
	stop  context.CancelFunc
	done  chan struct{}
}

// LeaderConfig is what AcquireLeader needs beside the pool.
type LeaderConfig struct {
	Checkpoint string // the lock is named after the database and the checkpoint
	// Timeout bounds how long the lock outlives a leader the server cannot
	// hear from (see Leader); default DefaultLeaderTimeout, at least 2 s.
	Timeout time.Duration
	Logger  *slog.Logger
}

// leaderTimeout is t, defaulted and at least 2 s (whole seconds: wait_timeout).
func leaderTimeout(t time.Duration) time.Duration {
	if t <= 0 {
		t = DefaultLeaderTimeout
	}
	return max(t, 2*time.Second)
}

// AcquireLeader waits until it holds the lock named after the checkpoint.
func AcquireLeader(ctx context.Context, db *sql.DB, cfg LeaderConfig) (*Leader, error) {
	timeout := leaderTimeout(cfg.Timeout)
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	var dbName string
	if err := db.QueryRowContext(ctx, "SELECT DATABASE()").Scan(&dbName); err != nil {
		return nil, fmt.Errorf("read database name: %w", err)
	}
	name := "couponlink_cdc:" + dbName + ":" + cfg.Checkpoint
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("open leader lock connection: %w", err)
	}
	secs := int64(math.Ceil(timeout.Seconds()))
	if _, err := conn.ExecContext(ctx, "SET SESSION wait_timeout = ?", secs); err != nil {
		conn.Close()
		return nil, fmt.Errorf("set the leader lock session's wait_timeout to %d s: %w", secs, err)
	}
	waiting := false
	for {
		var got sql.NullInt64
		if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 1)", name).Scan(&got); err != nil {
			conn.Close()
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("take leader lock %s: %w", name, err)
		}
		if got.Valid && got.Int64 == 1 {
			break
		}
		if !waiting {
			var holder sql.NullInt64
			_ = conn.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?)", name).Scan(&holder)
			log.Info("standby: another cdc holds the leader lock; waiting", "lock", name, "holder_connection", holder.Int64,
				"leader_timeout", timeout)
			waiting = true
		}
	}
	log.Info("leader lock taken", "lock", name, "leader_timeout", timeout)
	wctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	l := &Leader{conn: conn, name: name, every: min(timeout/4, time.Second), wait: timeout / 2,
		lost: make(chan struct{}), stop: stop, done: make(chan struct{})}
	go l.watch(wctx, log)
	return l, nil
}

// watch pings the lock's connection; a failure means the lock may be gone.
func (l *Leader) watch(ctx context.Context, log *slog.Logger) {
	defer close(l.done)
	tickUntil(ctx, l.every, func() bool {
		err := l.check(ctx)
		if ctx.Err() != nil {
			return false
		}
		if err != nil {
			log.Error("leader lock lost", "lock", l.name, "err", err)
			close(l.lost)
			return false
		}
		return true
	})
}

var errNotHeld = errors.New("the lock's session no longer holds it")

// check asks the server whether the lock's session still holds the lock.
func (l *Leader) check(ctx context.Context) error {
	var holder sql.NullInt64
	pctx, cancel := context.WithTimeout(ctx, l.wait)
	defer cancel()
	if err := l.conn.QueryRowContext(pctx, "SELECT IS_USED_LOCK(?) = CONNECTION_ID()", l.name).Scan(&holder); err != nil {
		return err
	}
	if !holder.Valid || holder.Int64 != 1 {
		return errNotHeld
	}
	return nil
}

// Lost is closed when the lock's connection failed.
func (l *Leader) Lost() <-chan struct{} { return l.lost }

func (l *Leader) isLost() bool {
	select {
	case <-l.lost:
		return true
	default:
		return false
	}
}

// Release gives the lock up.
func (l *Leader) Release(ctx context.Context) {
	l.stop()
	<-l.done
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(5*time.Second, l.wait))
	defer cancel()
	_, _ = l.conn.ExecContext(ctx, "DO RELEASE_LOCK(?)", l.name)
	_ = l.conn.Close()
}
