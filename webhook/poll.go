package webhook

import (
	"context"
	"log/slog"
	"time"
)

// poll runs pass every wait until ctx ends: at once again when it says
// more (a backlog); after an error, logged as what failed, the wait
// doubles up to maxFailWait (the database is down or restarting). tick
// counts the passes, for work done every so many.
func poll(ctx context.Context, every time.Duration, log *slog.Logger, what string, pass func(tick int) (more bool, err error)) {
	wait := every
	for tick := 0; ; tick++ {
		more, err := pass(tick)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			log.Error(what+" failed; trying again", "err", err, "retry_in", wait)
			wait = min(2*wait, max(maxFailWait, every))
			more = false
		} else {
			wait = every
		}
		if more {
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}
