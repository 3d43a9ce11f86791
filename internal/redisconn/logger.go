package redisconn

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/couponlink/couponlink/internal/redact"
)

// SetLogger sends go-redis's own notes (a pool that cannot dial, a node
// that moved), process-wide, to log at Warn, through redact.Text: the
// library prints the address it dials, which may be a URL with a
// password. Without it they go to the standard logger, unredacted. One
// note repeated is logged at most once per noteEvery, with the count of
// the repeats not logged.
func SetLogger(log *slog.Logger) { redis.SetLogger(newRedisLogger(log, time.Now)) }

// noteEvery bounds how often one go-redis note is logged: a pool that
// cannot dial says so at every try, several times a second while Redis is
// down (the cdc's own lines and couponlink_redis_writes_total{result="error"}
// tell the outage).
const noteEvery = 30 * time.Second

// maxNotes bounds the notes remembered; beyond it they are forgotten.
const maxNotes = 256

type redisLogger struct {
	log *slog.Logger
	now func() time.Time

	mu    sync.Mutex
	notes map[string]*noteSeen // by the note's text, redacted
}

type noteSeen struct {
	logged  time.Time
	skipped int
}

func newRedisLogger(log *slog.Logger, now func() time.Time) *redisLogger {
	return &redisLogger{log: log, now: now, notes: map[string]*noteSeen{}}
}

func (l *redisLogger) Printf(ctx context.Context, format string, v ...any) {
	msg := strings.TrimSpace(redact.Text(fmt.Sprintf(format, v...)))
	log, skipped := l.gate(msg)
	switch {
	case log && skipped > 0:
		l.log.WarnContext(ctx, "redis client: "+msg, "lib", "go-redis", "repeats_not_logged", skipped)
	case log:
		l.log.WarnContext(ctx, "redis client: "+msg, "lib", "go-redis")
	}
}

// gate says whether to log msg now, and how many times it was not logged
// since it last was.
func (l *redisLogger) gate(msg string) (log bool, skipped int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	n := l.notes[msg]
	if n == nil {
		if len(l.notes) >= maxNotes {
			clear(l.notes)
		}
		l.notes[msg] = &noteSeen{logged: now}
		return true, 0
	}
	if now.Sub(n.logged) < noteEvery {
		n.skipped++
		return false, 0
	}
	skipped, n.logged, n.skipped = n.skipped, now, 0
	return true, skipped
}
