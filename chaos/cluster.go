package chaos

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/redis/go-redis/v9"

	"github.com/couponlink/couponlink/internal/loopback"
	"github.com/couponlink/couponlink/migrations"
)

// cluster is one run's servers and processes: a private MariaDB and Redis,
// the api, two cdcs (one leads, one waits as the standby), the reconciler
// daemon and the webhook receiver.
type cluster struct {
	dir         string
	bin         string
	mysql       *server
	redis       *server
	db          *sql.DB // root on couponlink's database: faults and checks
	rdb         *redis.Client
	hooks       *receiver
	api         *proc
	cdc1        *proc
	cdc2        *proc
	rec         *proc
	cdcL        *proc // the legacy shop's cdc
	procs       []*proc
	legacy      *legacyWriter
	mappingFile string
	apiC        *apiClient
	tally       *tally
	checks      *checks
	log         *slog.Logger
}

const (
	hookSecret = "chaos-secret"
	keyPrefix  = "couponlink:" // the processes' default
)

// dsn is couponlink's database on the run's MariaDB.
func (cl *cluster) dsn() string { return cl.mysql.rootDSN("couponlink") }

// startCluster starts the servers, migrates, and starts the processes.
func startCluster(ctx context.Context, cfg Config, t *tally, ch *checks) (*cluster, error) {
	cl := &cluster{dir: cfg.Dir, bin: cfg.Bin, tally: t, checks: ch, log: cfg.Logger}
	var err error
	if cl.mysql, err = newMariaDB(ctx, filepath.Join(cfg.Dir, "mariadb")); err != nil {
		return cl, err
	}
	if err := cl.mysql.start(ctx); err != nil {
		return cl, err
	}
	if cl.redis, err = newRedis(filepath.Join(cfg.Dir, "redis")); err != nil {
		return cl, err
	}
	if err := cl.redis.start(ctx); err != nil {
		return cl, err
	}
	root, err := sql.Open("mysql", cl.mysql.rootDSN(""))
	if err != nil {
		return cl, err
	}
	_, err = root.ExecContext(ctx, "CREATE DATABASE couponlink")
	if err == nil {
		_, err = root.ExecContext(ctx, "CREATE DATABASE "+legacyDB)
	}
	if err == nil {
		cl.mappingFile, err = setUpLegacy(ctx, root, cfg.Repo, cfg.Dir)
	}
	root.Close()
	if err != nil {
		return cl, fmt.Errorf("create the databases: %w", err)
	}
	for _, db := range []string{"couponlink", legacyDB} {
		if _, err := migrations.Up(cl.mysql.rootDSN(db)); err != nil {
			return cl, fmt.Errorf("migrate %s: %w", db, err)
		}
	}
	cl.rdb = redis.NewClient(&redis.Options{Addr: cl.redis.addr()})
	if err := cl.rdb.Set(ctx, legacyStockKey, 1000000, 0).Err(); err != nil {
		return cl, fmt.Errorf("set the legacy stock key: %w", err)
	}
	shop, err := sql.Open("mysql", cl.mysql.rootDSN("shop")+"?timeout=2s&readTimeout=10s&writeTimeout=10s")
	if err != nil {
		return cl, err
	}
	shop.SetMaxOpenConns(2)
	cl.legacy = &legacyWriter{db: shop, rdb: cl.rdb, tally: t, used: map[int64]string{}, expected: map[string]string{}, unknown: map[int64]bool{}}
	if cl.db, err = sql.Open("mysql", cl.dsn()+"?timeout=2s&readTimeout=30s&writeTimeout=30s&parseTime=true"); err != nil {
		return cl, err
	}
	cl.db.SetMaxOpenConns(8)
	if cl.hooks, err = newReceiver(hookSecret); err != nil {
		return cl, err
	}
	return cl, cl.startProcs(ctx)
}

func (cl *cluster) startProcs(ctx context.Context) error {
	ports := make([]int, 5)
	for i := range ports {
		p, err := loopback.FreePort()
		if err != nil {
			return err
		}
		ports[i] = p
	}
	addr := func(i int) string { return "127.0.0.1:" + strconv.Itoa(ports[i]) }
	env := []string{"COUPONLINK_MYSQL_DSN=" + cl.dsn(), "COUPONLINK_REDIS_ADDR=" + cl.redis.addr(),
		"COUPONLINK_WEBHOOK_SECRET=" + hookSecret, "COUPONLINK_LOG_LEVEL=info"}
	mk := func(name string, args ...string) *proc {
		p := &proc{name: name, bin: cl.bin, args: args, env: env, dir: cl.dir, log: cl.log}
		cl.procs = append(cl.procs, p)
		return p
	}
	cdcArgs := func(metrics string) []string {
		return []string{"cdc", "-metrics-addr", metrics, "-webhook-url", cl.hooks.url(),
			"-release-every", "1s", "-rebalance-every", "2s", "-stall-after", "10m"}
	}
	cl.api = mk("api", "api", "-addr", addr(0), "-expire-interval", "0")
	cl.cdc1 = mk("cdc-1", cdcArgs(addr(1))...)
	cl.cdc2 = mk("cdc-2", cdcArgs(addr(2))...)
	cl.cdc1.metrics, cl.cdc2.metrics = addr(1), addr(2)
	cl.rec = mk("reconcile", "reconcile", "-every", "3s", "-metrics-addr", addr(3))
	cl.cdcL = mk("cdc-legacy", "cdc", "-dsn", cl.mysql.rootDSN(legacyDB), "-mapping", cl.mappingFile, "-redis", "",
		"-metrics-addr", addr(4), "-redemption-grace", "2s", "-stall-after", "10m")
	for _, p := range cl.procs {
		if err := p.run(ctx); err != nil {
			return err
		}
	}
	cl.apiC = newAPIClient(addr(0))
	return nil
}

// stop stops the processes (SIGTERM, by the supervisors), then the servers.
func (cl *cluster) stop(keep bool) error {
	var errs []error
	for _, p := range cl.procs {
		p.wait()
	}
	if cl.hooks != nil {
		cl.hooks.close()
	}
	if cl.legacy != nil {
		_ = cl.legacy.db.Close()
	}
	if cl.rdb != nil {
		_ = cl.rdb.Close()
	}
	if cl.db != nil {
		_ = cl.db.Close()
	}
	for _, s := range []*server{cl.redis, cl.mysql} {
		if s != nil {
			errs = append(errs, s.stop(syscall.SIGTERM))
		}
	}
	if !keep {
		errs = append(errs, os.RemoveAll(cl.dir))
	}
	return errors.Join(errs...)
}
