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
// `couponlink reconcile`, optionally `couponlink api`, and a real
// Prometheus scraping them.
type stack struct {
	db       *sql.DB
	dsn      string
	rdb      redis.UniversalClient
	prefix   string
	l        *logs
	cdc, rec *proc
	api      *proc  // nil without stackOptions.api
	apiURL   string // http://host:port of the api ("" without it)
	prom     *promClient
	startCDC func() *proc
}

// stackOptions say what startStack runs and how.
type stackOptions struct {
	rules            string        // the rules file Prometheus loads (a path)
	every            time.Duration // Prometheus's scrape and evaluation interval
	cdcArgs, recArgs []string      // added to the cdc's and the reconcile daemon's own
	cdcRedis         string        // the Redis address the cdc uses, e.g. a proxy the test can cut ("": the test Redis)
	api              bool          // also run `couponlink api` (its /metrics beside the API), scraped as job couponlink-api
	apiArgs          []string      // added to the api's own
}

// startStack starts the stack: Prometheus with the rules file at the
// interval of o, the cdc, the reconcile daemon and, with o.api, the api.
func startStack(t *testing.T, o stackOptions) *stack {
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
	cdcRedis := redisAddr
	if o.cdcRedis != "" {
		cdcRedis = o.cdcRedis
	}
	s.startCDC = func() *proc {
		return s.l.start(t, "couponlink cdc", bin, append([]string{"cdc", "-dsn", s.dsn, "-redis", cdcRedis, "-key-prefix", s.prefix,
			"-metrics-addr", cdcAddr}, o.cdcArgs...)...)
	}
	s.cdc = s.startCDC()
	s.rec = s.l.start(t, "couponlink reconcile", bin, append([]string{"reconcile", "-dsn", s.dsn, "-redis", redisAddr, "-key-prefix", s.prefix,
		"-metrics-addr", recAddr}, o.recArgs...)...)
	apiJob := ""
	if o.api {
		// the expiry sweep runs when the test asks for it (POST /v1/expire)
		// unless apiArgs set -expire-interval
		apiAddr := testenv.FreeAddr(t)
		s.api = s.l.start(t, "couponlink api", bin, append([]string{"api", "-dsn", s.dsn, "-addr", apiAddr, "-expire-interval", "0"},
			o.apiArgs...)...)
		s.apiURL = "http://" + apiAddr
		apiJob = fmt.Sprintf("  - job_name: couponlink-api\n    static_configs: [{targets: [%q]}]\n", apiAddr)
	}

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
%s`, o.every, o.every, o.rules, cdcAddr, recAddr, apiJob)
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
