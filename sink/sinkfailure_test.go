package sink_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/inventory"
)

// A stream sink whose credentials the server refuses is loud: a warning
// within 5 s of the first event, couponlink_event_deliveries_total
// {result="failed"} rises, and `couponlink status` and the status JSON
// name the sink and its last error, without the password. Started again
// with the right password, the cdc drains the backlog.
func TestStreamSinkWithWrongCredentialsIsLoud(t *testing.T) {
	e := newEnv(t)
	const right, wrong = "right-pass-1", "wrong-pass-2"
	rs := testenv.OwnRedis(t, "--requirepass", right)
	r := newCDCRunner(t, e, testenv.RedisAddr(t))
	base := r.args
	r.args = append(base, "-event-sinks", fmt.Sprintf("redis://:%s@%s?stream=ev", wrong, rs.Addr))
	p := startEvents(t, r)
	e.WaitCheckpoint()
	wait := newWorkload(e, wlConfig{Workers: 2, Ops: 400, Quota: 300}).start()
	cdctest.WaitFor(t, 60*time.Second, "the cdc writes an event", func() bool {
		_, _, ok := firstEventAfter(t, e, time.Unix(0, 0))
		return ok
	})
	written := time.Now()
	cdctest.WaitFor(t, 5*time.Second, "a warning of the failing sink", func() bool {
		log, err := os.ReadFile(r.stderr.Name())
		require.NoError(t, err)
		return strings.Contains(string(log), "event delivery failed")
	})
	t.Logf("warned %s after the first event was seen", time.Since(written).Round(time.Millisecond))
	cdctest.WaitFor(t, 5*time.Second, "failed deliveries counted", func() bool {
		n, ok := scrape(t, p.ops, `couponlink_event_deliveries_total{result="failed",sink="redis"}`)
		return ok && n > 0
	})
	out, err := exec.Command(r.bin, "status", "-dsn", e.DSN).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Regexp(t, `event sink redis\s+position 0, 0 delivered, 0 dropped; FAILING, \d+ failed rounds?: .*WRONGPASS`, string(out), "couponlink status")
	st, err := inventory.ReadStatus(context.Background(), e.DB, "default")
	require.NoError(t, err)
	js := inventory.CDCStatusOf("default", st)
	require.Len(t, js.EventSinks, 1)
	require.Equal(t, "redis", js.EventSinks[0].Name)
	require.Positive(t, js.EventSinks[0].FailedRounds)
	require.Contains(t, js.EventSinks[0].LastError, "WRONGPASS")
	log, err := os.ReadFile(r.stderr.Name())
	require.NoError(t, err)
	var logged []string // the cdc's lines, not the runner's command lines
	for line := range strings.Lines(string(log)) {
		if !strings.HasPrefix(line, "=== ") {
			logged = append(logged, line)
		}
	}
	for _, shown := range []string{string(out), js.EventSinks[0].LastError, strings.Join(logged, "")} {
		require.NotContains(t, shown, wrong, "the password shows")
	}

	wait()
	require.NoError(t, p.signal(syscall.SIGTERM))
	r.args = append(base, "-event-sinks", fmt.Sprintf("redis://:%s@%s?stream=ev", right, rs.Addr))
	p = startEvents(t, r)
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr, Password: right})
	defer rdb.Close()
	cdctest.WaitFor(t, 60*time.Second, "the backlog drains", func() bool {
		_, got := testenv.StreamEntries(t, rdb, "ev")
		return e.pendingChecks() == 0 && maps.Equal(testenv.OutboxBodies(t, e.DB), got)
	})
	out, err = exec.Command(r.bin, "status", "-dsn", e.DSN).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.NotContains(t, string(out), "FAILING")
	require.NoError(t, p.signal(syscall.SIGTERM))
}
