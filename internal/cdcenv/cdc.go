package cdcenv

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/internal/mysqlconn"
	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/sink"
)

// CDC is a cdc daemon (sink.Daemon) run in process on the test's database.
type CDC struct {
	Reg      *prometheus.Registry // its metrics
	cancel   context.CancelFunc
	done     chan error
	finished bool
}

// StartCDC runs a cdc on the test's database and Redis prefix, with short
// batch and heartbeat periods; mapping nil is the reference schema. Each
// mut edits the settings before the daemon starts. The test's end stops
// it, and fails the test if Run returned an error.
func (e *Env) StartCDC(mapping *canal.Mapping, mut ...func(*sink.Config, *sink.Daemon)) *CDC {
	e.T.Helper()
	reg := prometheus.NewRegistry()
	// its own pool, as `couponlink cdc` opens it (several statements in
	// one query: a batch's tail in one round trip)
	db, err := mysqlconn.OpenCDC(e.DSN, 8, time.Minute)
	require.NoError(e.T, err)
	e.T.Cleanup(func() { _ = db.Close() })
	cfg := sink.Config{DB: db, Mapping: mapping, Redis: e.RDB, Keys: e.Keys, Logger: testenv.QuietLogger(), Registerer: reg,
		RedemptionGrace: 2 * time.Second}
	tc, err := canal.ConfigFromDSN(e.DSN)
	require.NoError(e.T, err)
	tc.BatchWait = 5 * time.Millisecond
	tc.HeartbeatPeriod = 200 * time.Millisecond
	d := &sink.Daemon{Tailer: tc, RetryWait: 100 * time.Millisecond}
	for _, m := range mut {
		m(&cfg, d)
	}
	s, err := sink.New(cfg)
	require.NoError(e.T, err)
	d.Sink = s
	ctx, cancel := context.WithCancel(context.Background())
	c := &CDC{Reg: reg, cancel: cancel, done: make(chan error, 1)}
	go func() { c.done <- d.Run(ctx) }()
	e.T.Cleanup(func() { c.Stop(e.T) })
	e.CDC = c
	return c
}

// Stop cancels the daemon and waits for Run to return without an error.
func (c *CDC) Stop(t testing.TB) {
	t.Helper()
	if c.finished {
		return
	}
	c.cancel()
	c.finished = true
	select {
	case err := <-c.done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("cdc did not stop within 30 s")
	}
}

// Result waits for Run to return by itself and returns its error.
func (c *CDC) Result(t testing.TB, within time.Duration) error {
	t.Helper()
	select {
	case err := <-c.done:
		c.finished = true
		c.cancel()
		return err
	case <-time.After(within):
		t.Fatalf("cdc did not stop by itself within %s", within)
		return nil
	}
}

// Running reports whether Run has not returned yet.
func (c *CDC) Running() bool {
	if c.finished {
		return false
	}
	select {
	case err := <-c.done:
		c.done <- err // keep it for Stop or Result
		return false
	default:
		return true
	}
}
