package coupon

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// retry's pause between attempts ends with the request: a cancelled
// context stops it at once, before or during the wait.
func TestPauseWatchesTheContext(t *testing.T) {
	assert.NoError(t, pause(context.Background(), time.Millisecond))

	done, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	assert.ErrorIs(t, pause(done, time.Hour), context.Canceled)

	waiting, cancel := context.WithCancel(context.Background())
	time.AfterFunc(10*time.Millisecond, cancel)
	assert.ErrorIs(t, pause(waiting, time.Hour), context.Canceled)
	assert.Less(t, time.Since(start), time.Minute, "neither pause waited its hour")
}
