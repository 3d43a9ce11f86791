package e2e_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/internal/testenv"
)

// stack is a fresh test database and Redis prefix, `couponlink cdc`,
// `couponlink reconcile` and a real Prometheus scraping both.
type stack struct {
	db       *sql.DB
	dsn      string
	rdb      redis.UniversalClient
	prefix   string
	l        *logs
	cdc, rec *proc
	prom     *promClient
	startCDC func() *proc
}

// startStack starts the stack: Prometheus with the rules file rules (a
// path) at the interval every (scrape and evaluation), the cdc with
// cdcArgs and the reconcile daemon with recArgs added to their own.
func startStack(t *testing.T, rules string, every time.Duration, cdcArgs, recArgs []string) *stack {
	t.Helper()
	promBin := findPrometheus(t)
	tmp := t.TempDir()
	bin := testenv.BuildCouponlink(t)

	// the database first: its cleanup (DROP DATABASE) runs after the processes stopped
	s := &stack{l: &logs{}}
	s.db, s.dsn = testenv.MySQL(t)
	s.rdb = testenv.Redis(t)
	redisAddr := testenv.RedisAddr(t)
	s.prefix = testenv.KeyPrefix(t)
	t.Cleanup(func() {
		var keys []string
		it := s.rdb.Scan(context.Background(), 0, s.prefix+"*", 1000).Iterator()
		for it.Next(context.Background()) {
			keys = append(keys, it.Val())
		}
		if len(keys) > 0 {
			_ = s.rdb.Del(context.Background(), keys...).Err()
		}
	})
	t.Cleanup(func() {
		if t.Failed() {
			s.l.dump(t)
		}
	})

	cdcAddr, recAddr, promAddr := testenv.FreeAddr(t), testenv.FreeAddr(t), testenv.FreeAddr(t)
	s.startCDC = func() *proc {
		return s.l.start(t, "couponlink cdc", bin, append([]string{"cdc", "-dsn", s.dsn, "-redis", redisAddr, "-key-prefix", s.prefix,
			"-metrics-addr", cdcAddr}, cdcArgs...)...)
	}
	s.cdc = s.startCDC()
	s.rec = s.l.start(t, "couponlink reconcile", bin, append([]string{"reconcile", "-dsn", s.dsn, "-redis", redisAddr, "-key-prefix", s.prefix,
		"-metrics-addr", recAddr}, recArgs...)...)

	config := fmt.Sprintf(`global:
  scrape_interval: %s
  evaluation_interval: %s
rule_files:
  - %q
scrape_configs:
  - job_name: couponlink-cdc
    static_configs: [{targets: [%q]}]
  - job_name: couponlink-reconcile
    static_configs: [{targets: [%q]}]
`, every, every, rules, cdcAddr, recAddr)
	configFile := filepath.Join(tmp, "prometheus.yml")
	require.NoError(t, os.WriteFile(configFile, []byte(config), 0o644))
	promProc := s.l.start(t, "prometheus", promBin, "--config.file="+configFile,
		"--storage.tsdb.path="+filepath.Join(tmp, "tsdb"), "--web.listen-address="+promAddr)
	s.prom = &promClient{t: t, base: "http://" + promAddr, hc: &http.Client{Timeout: 5 * time.Second}}
	waitFor(t, 20*time.Second, "Prometheus is ready", func() bool {
		require.True(t, promProc.running(), "prometheus exited")
		return s.prom.get("/-/ready", nil) == nil
	})
	return s
}
