package main

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/internal/loopback"
	"github.com/couponlink/couponlink/internal/mysqlconn"
	"github.com/couponlink/couponlink/migrations"
)

// env is one run's private servers, couponlink binary and shared handles.
type env struct {
	repo      string
	dir       string // temporary: server data, the binary, child logs
	mysqlPort int
	redisPort int
	dsn       string // couponlink's database
	appDSN    string // the same with -dsn-params: what couponlink's own connections use
	redisAddr string
	db        *sql.DB // the bench's own statements (interpolated parameters)
	rdb       *redis.Client
	bin       string // the couponlink binary, built from the repo
	servers   bool   // servers.sh up succeeded (or partly): run down at close
	keep      bool
	info      map[string]string
	store     *coupon.Store // claims of the lag and memory phases
	storeDB   *sql.DB

	backlogTpl, lagTpl int64
}

const benchSchema = "couponlink_bench" // ceiling table and counter snapshot; never subscribed

// startEnv builds the couponlink binary, starts the private servers,
// migrates, and creates the templates the phases share.
func startEnv(ctx context.Context, cfg config, log *slog.Logger) (*env, error) {
	if _, err := os.Stat(filepath.Join(cfg.repo, "deploy/local/servers.sh")); err != nil {
		return nil, fmt.Errorf("-repo %s is not the couponlink repository (no deploy/local/servers.sh)", cfg.repo)
	}
	e, err := upServers(cfg, "couponlink-bench-", "private MariaDB and Redis", log)
	if err != nil {
		return e, err
	}
	e.bin = filepath.Join(e.dir, "couponlink")
	log.Info("building the couponlink binary", "out", e.bin)
	build := exec.CommandContext(ctx, "go", "build", "-o", e.bin, "./cmd/couponlink")
	build.Dir, build.Stdout, build.Stderr = cfg.repo, os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return e, fmt.Errorf("go build ./cmd/couponlink: %w", err)
	}
	if ctx.Err() != nil {
		return e, ctx.Err()
	}
	e.dsn = fmt.Sprintf("root@tcp(127.0.0.1:%d)/couponlink", e.mysqlPort)
	e.appDSN = e.dsn
	if cfg.dsnParams != "" {
		e.appDSN += "?" + cfg.dsnParams
	}
	e.redisAddr = fmt.Sprintf("127.0.0.1:%d", e.redisPort)
	if _, err := migrations.Up(e.dsn); err != nil {
		return e, fmt.Errorf("migrate: %w", err)
	}
	if e.db, err = openMySQL(e.dsn, 16); err != nil {
		return e, err
	}
	e.rdb = redis.NewClient(&redis.Options{Addr: e.redisAddr})
	if err := e.rdb.Ping(ctx).Err(); err != nil {
		return e, fmt.Errorf("ping Redis: %w", err)
	}
	if err := e.readInfo(ctx); err != nil {
		return e, err
	}
	for _, q := range []string{
		"CREATE DATABASE " + benchSchema,
		"CREATE TABLE " + benchSchema + ".counters_snapshot LIKE couponlink.inventory_counter",
		"CREATE TABLE " + benchSchema + ".insert_ceiling LIKE couponlink.user_coupon",
	} {
		if _, err := e.db.ExecContext(ctx, q); err != nil {
			return e, fmt.Errorf("%s: %w", q, err)
		}
	}
	// The claim path as `couponlink api` opens it.
	if e.storeDB, err = openMySQL(e.appDSN, cfg.storeConns()); err != nil {
		return e, err
	}
	if e.store, err = coupon.New(coupon.Config{DB: e.storeDB, Logger: quietLogger(log)}); err != nil {
		return e, err
	}
	if e.backlogTpl, err = e.template(ctx, "bench backlog", 40); err != nil {
		return e, err
	}
	if e.lagTpl, err = e.template(ctx, "bench lag", 40); err != nil {
		return e, err
	}
	return e, nil
}

// upServers starts private servers (servers.sh up: MariaDB and Redis) on
// free ports in a new temporary directory named after prefix; what names
// them in the log and in an error.
func upServers(cfg config, prefix, what string, log *slog.Logger) (*env, error) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return nil, err
	}
	e := &env{repo: cfg.repo, dir: dir, keep: cfg.keepServers, info: map[string]string{}}
	if e.mysqlPort, err = loopback.FreePort(); err != nil {
		return e, err
	}
	if e.redisPort, err = loopback.FreePort(); err != nil {
		return e, err
	}
	log.Info("starting "+what, "dir", dir, "mysql_port", e.mysqlPort, "redis_port", e.redisPort)
	e.servers = true
	if err := e.serversSh("up"); err != nil {
		return e, fmt.Errorf("servers.sh up (%s): %w", what, err)
	}
	e.readPorts()
	return e, nil
}

// template creates a template of n channels c00.. with room to spare.
func (e *env) template(ctx context.Context, name string, n int) (int64, error) {
	const per = 10_000_000
	ch := map[string]int64{}
	for i := range n {
		ch[channel(i)] = per
	}
	t, err := e.store.CreateTemplate(ctx, coupon.NewTemplate{Name: name, TotalQuota: int64(n) * per, Channels: ch,
		ValidSeconds: 90 * 24 * 3600, PerUserLimit: 1})
	if err != nil {
		return 0, fmt.Errorf("create template %q: %w", name, err)
	}
	return t.ID, nil
}

func channel(i int) string { return fmt.Sprintf("c%02d", i%40) }

func (e *env) readInfo(ctx context.Context) error {
	var version, flush, syncBinlog, format, image, pool string
	err := e.db.QueryRowContext(ctx, `SELECT VERSION(), @@innodb_flush_log_at_trx_commit, @@sync_binlog,
		@@binlog_format, @@binlog_row_image, @@innodb_buffer_pool_size`).Scan(&version, &flush, &syncBinlog, &format, &image, &pool)
	if err != nil {
		return fmt.Errorf("read server settings: %w", err)
	}
	e.info["mariadb"] = version
	e.info["durability"] = "innodb_flush_log_at_trx_commit=" + flush + ", sync_binlog=" + syncBinlog
	e.info["binlog"] = format + "/" + image
	if n, err := strconv.ParseInt(pool, 10, 64); err == nil {
		e.info["buffer_pool"] = fmt.Sprintf("%d MiB", n>>20)
	}
	if out, err := exec.CommandContext(ctx, "redis-server", "--version").Output(); err == nil {
		e.info["redis"] = strings.TrimSpace(string(out))
	}
	return nil
}

// readPorts takes the ports servers.sh settled on (it moves to the next
// free port when ours was taken meanwhile, and notes them in $BASE/ports).
func (e *env) readPorts() {
	b, err := os.ReadFile(filepath.Join(e.dir, "servers", "ports"))
	if err != nil {
		return
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), "=")
		n, err := strconv.Atoi(v)
		if err != nil {
			continue
		}
		switch k {
		case "MPORT":
			e.mysqlPort = n
		case "RPORT":
			e.redisPort = n
		}
	}
}

func (e *env) serversSh(verb string) error {
	cmd := exec.Command(filepath.Join(e.repo, "deploy/local/servers.sh"), verb)
	cmd.Env = append(cleanEnv(), "COUPONLINK_LOCAL_DIR="+filepath.Join(e.dir, "servers"),
		"COUPONLINK_LOCAL_MYSQL_PORT="+strconv.Itoa(e.mysqlPort), "COUPONLINK_LOCAL_REDIS_PORT="+strconv.Itoa(e.redisPort))
	cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
	// Own process group: a Ctrl-C in the terminal must not kill the
	// script half-way; close() runs `down` after it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd.Run()
}

// close stops the servers (unless -keep-servers) and removes the temporary directory.
func (e *env) close(log *slog.Logger) {
	if e.db != nil {
		e.db.Close()
	}
	if e.storeDB != nil {
		e.storeDB.Close()
	}
	if e.rdb != nil {
		e.rdb.Close()
	}
	if e.keep && e.servers {
		log.Info("leaving the private servers running (-keep-servers)", "dsn", e.dsn, "redis", e.redisAddr, "dir", e.dir)
		return
	}
	if e.servers {
		log.Info("stopping the private servers")
		if err := e.serversSh("down"); err != nil {
			log.Error("servers.sh down failed; stop them by hand", "dir", e.dir, "err", err)
			return
		}
	}
	_ = os.RemoveAll(e.dir)
}

// cleanEnv is the environment without COUPONLINK_* settings, so that a
// developer's shell cannot change what the children do.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "COUPONLINK_") {
			out = append(out, kv)
		}
	}
	return out
}

// openMySQL opens a pool as cmd/couponlink does (mysqlconn.Open).
func openMySQL(dsn string, conns int) (*sql.DB, error) {
	return mysqlconn.Open(dsn, conns)
}

// quietLogger passes only warnings and errors of the libraries on.
func quietLogger(log *slog.Logger) *slog.Logger {
	return slog.New(levelFloor{log.Handler(), slog.LevelWarn})
}

type levelFloor struct {
	slog.Handler
	min slog.Level
}

func (h levelFloor) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

// Handle drops go-mysql's error log of its own Close ("Sync was closed",
// "sync is being closed"): every stop of a canal writes it, with a stack
// trace.
func (h levelFloor) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "canal start sync binlog err" {
		closed := false
		r.Attrs(func(a slog.Attr) bool {
			v := strings.ToLower(a.Value.String())
			closed = closed || strings.Contains(v, "sync was closed") || strings.Contains(v, "sync is being closed")
			return !closed
		})
		if closed {
			return nil
		}
	}
	return h.Handler.Handle(ctx, r)
}

func (h levelFloor) WithAttrs(as []slog.Attr) slog.Handler {
	return levelFloor{h.Handler.WithAttrs(as), h.min}
}
func (h levelFloor) WithGroup(n string) slog.Handler {
	return levelFloor{h.Handler.WithGroup(n), h.min}
}

// child is a process the bench started: couponlink, or the peer.
type child struct {
	cmd     *exec.Cmd
	done    chan struct{}
	err     error
	log     string
	started time.Time // just before its start
}

// startChild runs the couponlink binary with args; its output goes to a
// log file in the temporary directory. It dies with the bench (Pdeathsig).
func (e *env) startChild(name string, args ...string) (*child, error) {
	c, err := startProcess(e.bin, "", filepath.Join(e.dir, name+".log"), args...)
	if err != nil {
		return nil, fmt.Errorf("start couponlink %s: %w", name, err)
	}
	return c, nil
}

// startProcess runs bin with args in dir (empty: this process's), in a
// process group of its own, its output to logPath; it dies with the bench
// (Pdeathsig).
func startProcess(bin, dir, logPath string, args ...string) (*child, error) {
	return spawn(bin, dir, cleanEnv(), logPath, args...)
}

// spawn is startProcess with the environment env.
func spawn(bin, dir string, env []string, logPath string, args ...string) (*child, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, env, f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	started := time.Now()
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, err
	}
	c := &child{cmd: cmd, done: make(chan struct{}), log: logPath, started: started}
	go func() {
		c.err = cmd.Wait()
		f.Close()
		close(c.done)
	}()
	return c, nil
}

func (c *child) pid() int { return c.cmd.Process.Pid }

// exited reports an early exit, with the tail of its log.
func (c *child) exited() error {
	select {
	case <-c.done:
		return fmt.Errorf("exited early (%v); its log ends with:\n%s", c.err, tail(c.log, 15))
	default:
		return nil
	}
}

// stop sends SIGTERM and waits (SIGKILL after 15 s).
func (c *child) stop() {
	select {
	case <-c.done:
		return
	default:
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(15 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// grepLine returns the first line of the file containing s.
func grepLine(path, s string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), s) {
			return sc.Text()
		}
	}
	return ""
}
