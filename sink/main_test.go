package sink_test

import (
	"context"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
)

// quietRedis drops go-redis's own log lines (a dial error per attempt
// while a test keeps Redis down); COUPONLINK_TEST_VERBOSE keeps them.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	if os.Getenv("COUPONLINK_TEST_VERBOSE") == "" {
		redis.SetLogger(quietRedis{}) // before any test runs: no goroutine logs yet
	}
	os.Exit(m.Run())
}
