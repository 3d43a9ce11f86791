package sink

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"time"
)

// Leader is the MySQL advisory lock that makes one cdc the writer of a
// checkpoint; a standby blocks in AcquireLeader until the lock is free. The
// lock lives as long as its connection; Lost is closed when that connection
// fails, and the epoch check in every batch fences a deposed leader anyway.
type Leader struct {
	conn *sql.Conn
	name string
	lost chan struct{}
	stop context.CancelFunc
	done chan struct{}
}

// AcquireLeader waits until it holds the lock named after the checkpoint.
func AcquireLeader(ctx context.Context, db *sql.DB, checkpoint string, log *slog.Logger) (*Leader, error) {
	var dbName string
	if err := db.QueryRowContext(ctx, "SELECT DATABASE()").Scan(&dbName); err != nil {
		return nil, fmt.Errorf("read database name: %w", err)
	}
	name := "couponlink_cdc:" + dbName + ":" + checkpoint
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("open leader lock connection: %w", err)
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
			log.Info("standby: another cdc holds the leader lock; waiting", "lock", name, "holder_connection", holder.Int64)
			waiting = true
		}
	}
	log.Info("leader lock taken", "lock", name)
	wctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	l := &Leader{conn: conn, name: name, lost: make(chan struct{}), stop: stop, done: make(chan struct{})}
	go l.watch(wctx, log)
	return l, nil
}

// watch pings the lock's connection; a failure means the lock may be gone.
func (l *Leader) watch(ctx context.Context, log *slog.Logger) {
	defer close(l.done)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var holder sql.NullInt64
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := l.conn.QueryRowContext(pctx, "SELECT IS_USED_LOCK(?) = CONNECTION_ID()", l.name).Scan(&holder)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil || !holder.Valid || holder.Int64 != 1 {
			log.Error("leader lock lost", "lock", l.name, "err", err)
			close(l.lost)
			return
		}
	}
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
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, _ = l.conn.ExecContext(ctx, "DO RELEASE_LOCK(?)", l.name)
	_ = l.conn.Close()
}
