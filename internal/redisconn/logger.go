package redisconn

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/couponlink/couponlink/internal/redact"
)

// SetLogger sends go-redis's own notes (a pool that cannot dial, a node
// that moved), process-wide, to log at Warn, through redact.Text: the
// library prints the address it dials, which may be a URL with a
// password. Without it they go to the standard logger, unredacted.
func SetLogger(log *slog.Logger) { redis.SetLogger(redisLogger{log}) }

type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	msg := strings.TrimSpace(redact.Text(fmt.Sprintf(format, v...)))
	l.log.WarnContext(ctx, "redis client: "+msg, "lib", "go-redis")
}
