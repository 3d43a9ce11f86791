package sink_test

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/internal/cdcenv"
	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/internal/mysqlconn"
	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/inventory"
	"github.com/couponlink/couponlink/sink"
)

// ownServerEnv is an env on a MariaDB of the test's own, which the test may
// stop and restart.
func ownServerEnv(t *testing.T) (*env, *testenv.MariaDB) {
	t.Helper()
	e, m := cdcenv.OwnServer(t)
	return &env{e}, m
}

// The cdc outlives its database: started while MariaDB is down it waits
// (leader 0); it leads once the server is up; after a clean shutdown
// (SIGTERM) and a crash (SIGKILL) of the server it gives the lock up
// (leader 0), waits for the server, takes the lock again and resumes from
// its checkpoint, with the counters and Redis exact after more writes.
func TestCDCOutlivesDatabaseRestarts(t *testing.T) {
	e, server := ownServerEnv(t)
	w := &claimer{e: e, tpl: e.Template(map[string]int64{"app": 500, "web": 500, "sms": 500}, time.Hour)}
	w.claim(10)

	server.Stop(syscall.SIGTERM)
	retries := logCount{Handler: testenv.QuietLogger().Handler(), msg: "cdc interrupted; starting over from the checkpoint", n: new(atomic.Int64)}
	c := e.StartCDC(nil, leaderNamed("cdc-a"), func(cfg *sink.Config, d *sink.Daemon) {
		cfg.Logger = slog.New(retries)
		d.MaxRetryWait = time.Second
	})
	leader := func() float64 { v, _ := cdctest.Metric(t, c.Reg, "couponlink_cdc_leader", nil); return v }
	// no database: the cdc waits and retries rather than exiting
	cdctest.WaitFor(t, 30*time.Second, "the cdc retries while the server is down", func() bool {
		return !c.Running() || retries.n.Load() >= 3
	})
	require.True(t, c.Running(), "the cdc stopped while the database was not up yet")
	require.Zero(t, leader())
	server.Start()
	cdctest.WaitFor(t, 60*time.Second, "the cdc leads once the server is up", func() bool { return leader() == 1 })
	w.claim(10)
	e.assertTruth(true)

	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		epoch := e.checkpoint().Epoch
		w.claim(10) // some of these may still be in flight when the server goes
		server.Stop(sig)
		cdctest.WaitFor(t, 30*time.Second, "the cdc gives the lock up after "+sig.String(), func() bool { return leader() == 0 })
		require.True(t, c.Running(), "the cdc stopped after the server's %s", sig)
		server.Start()
		cdctest.WaitFor(t, 60*time.Second, "the cdc leads again after "+sig.String(), func() bool {
			return leader() == 1 && e.checkpoint().Epoch > epoch
		})
		w.claim(10)
		e.assertTruth(true)
		require.Equal(t, "cdc-a", e.checkpoint().Leader)
	}
	require.Empty(t, e.anomalies())
	require.True(t, c.Running())
}

// logCount counts the log records with one message, and hands every
// record on to Handler.
type logCount struct {
	slog.Handler
	msg string
	n   *atomic.Int64
}

func (h logCount) Enabled(context.Context, slog.Level) bool { return true }

func (h logCount) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.n.Add(1)
	}
	if h.Handler.Enabled(ctx, r.Level) {
		return h.Handler.Handle(ctx, r)
	}
	return nil
}

func (h logCount) WithAttrs(as []slog.Attr) slog.Handler {
	return logCount{h.Handler.WithAttrs(as), h.msg, h.n}
}

func (h logCount) WithGroup(name string) slog.Handler {
	return logCount{h.Handler.WithGroup(name), h.msg, h.n}
}

// What a restart cannot fix stops the cdc at once, saying which and what
// to do: MySQL refusing its user, a mapping naming a table that is not
// there. (A purged binlog: TestPurgedBinlogNeedsRebuild.)
func TestCDCStopsOnWhatARestartCannotFix(t *testing.T) {
	e := newEnv(t)
	cfg, err := mysql.ParseDSN(e.DSN)
	require.NoError(t, err)
	cfg.Passwd = "not-the-password"
	wrong, err := mysqlconn.Open(cfg.FormatDSN(), 2)
	require.NoError(t, err)
	t.Cleanup(func() { _ = wrong.Close() })
	missing, err := canal.LoadMapping([]byte(strings.ReplaceAll(legacyMappingYAML, "LEGACY", "no_such_schema")))
	require.NoError(t, err)

	for _, tc := range []struct {
		name string
		edit func(*sink.Config, *sink.Daemon)
		want string
	}{
		{"wrong password", func(c *sink.Config, _ *sink.Daemon) { c.DB = wrong }, "MySQL refused couponlink's user"},
		{"a mapped table is missing", func(c *sink.Config, _ *sink.Daemon) { c.Mapping = missing; c.RedisMode = inventory.RedisOff },
			"the mapping or the server's binlog settings are wrong"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := e.StartCDC(nil, tc.edit)
			err := c.Result(t, 30*time.Second)
			require.ErrorContains(t, err, tc.want)
			require.ErrorContains(t, err, "then start the cdc again")
		})
	}
}
