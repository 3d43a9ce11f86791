package chaos

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/couponlink/couponlink/internal/loopback"
)

// server is one MariaDB or Redis process of the run's own, on a fixed
// loopback port and data directory, that a fault may stop and restart.
type server struct {
	name  string
	dir   string
	port  int
	argv  func() []string
	ready func(ctx context.Context) error
	cmd   *exec.Cmd
	done  chan struct{}
}

func userName() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return "root"
}

// newMariaDB initialises a data directory under dir (binlog ROW, FULL row
// image, GTID, as deploy/local/servers.sh runs it) and returns the server,
// not started.
func newMariaDB(ctx context.Context, dir string) (*server, error) {
	port, err := loopback.FreePort()
	if err != nil {
		return nil, err
	}
	data, tmp := filepath.Join(dir, "data"), filepath.Join(dir, "tmp")
	// a tmpdir of its own: servers installed at once in the shared /tmp
	// have failed on each other's temporary tables
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return nil, err
	}
	install := exec.CommandContext(ctx, "mariadb-install-db", "--no-defaults", "--datadir="+data, "--tmpdir="+tmp,
		"--user="+userName(), "--auth-root-authentication-method=normal", "--skip-test-db")
	if out, err := install.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("mariadb-install-db: %w\n%s", err, out)
	}
	bin := "/usr/sbin/mariadbd"
	if p, err := exec.LookPath("mariadbd"); err == nil {
		bin = p
	}
	s := &server{name: "mariadb", dir: dir, port: port}
	s.argv = func() []string {
		return []string{bin, "--no-defaults", "--datadir=" + data, "--tmpdir=" + tmp, "--user=" + userName(),
			"--bind-address=127.0.0.1", "--port=" + strconv.Itoa(port), "--socket=" + filepath.Join(dir, "mysqld.sock"),
			"--pid-file=" + filepath.Join(dir, "mysqld.pid"), "--log-error=" + filepath.Join(dir, "mysqld.err"),
			"--server-id=1", "--log-bin=" + filepath.Join(data, "mysql-bin"), "--binlog-format=ROW",
			"--binlog-row-image=FULL", "--binlog-row-metadata=FULL", "--gtid-domain-id=0", "--log-slave-updates=ON", "--skip-name-resolve",
			"--max-connections=400", "--innodb-buffer-pool-size=64M", "--innodb-log-file-size=48M",
			"--character-set-server=utf8mb4", "--collation-server=utf8mb4_bin"}
	}
	s.ready = func(ctx context.Context) error {
		db, err := sql.Open("mysql", s.rootDSN(""))
		if err != nil {
			return err
		}
		defer db.Close()
		return db.PingContext(ctx)
	}
	return s, nil
}

// rootDSN is root's DSN on the server, for database db ("" none).
func (s *server) rootDSN(db string) string {
	return fmt.Sprintf("root@tcp(127.0.0.1:%d)/%s", s.port, db)
}

// newRedis returns a Redis server (no persistence) on a free port, not started.
func newRedis(dir string) (*server, error) {
	port, err := loopback.FreePort()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	s := &server{name: "redis", dir: dir, port: port}
	s.argv = func() []string {
		return []string{"redis-server", "--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--save", "",
			"--appendonly", "no", "--dir", dir, "--logfile", filepath.Join(dir, "redis.log")}
	}
	s.ready = func(ctx context.Context) error {
		c := redis.NewClient(&redis.Options{Addr: s.addr()})
		defer c.Close()
		return c.Ping(ctx).Err()
	}
	return s, nil
}

func (s *server) addr() string { return fmt.Sprintf("127.0.0.1:%d", s.port) }

// start starts the process and waits (bounded: 60 s) until it answers.
func (s *server) start(ctx context.Context) error {
	argv := s.argv()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", s.name, err)
	}
	s.cmd, s.done = cmd, make(chan struct{})
	go func(done chan struct{}) { _ = cmd.Wait(); close(done) }(s.done)
	deadline := time.Now().Add(60 * time.Second)
	for {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		err := s.ready(pctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-s.done:
			return fmt.Errorf("%s exited at start (see %s)", s.name, s.dir)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond): // polling the condition
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s on port %d did not answer within 60 s: %w", s.name, s.port, err)
		}
	}
}

// stop sends sig and waits (bounded: 60 s, then SIGKILL) until the process
// has exited.
func (s *server) stop(sig syscall.Signal) error {
	if s.cmd == nil {
		return nil
	}
	defer func() { s.cmd = nil }()
	_ = s.cmd.Process.Signal(sig)
	select {
	case <-s.done:
		return nil
	case <-time.After(60 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
		return errors.New(s.name + " did not exit within 60 s of " + sig.String() + "; killed")
	}
}

// restart stops the server with sig and starts it again.
func (s *server) restart(ctx context.Context, sig syscall.Signal) error {
	if err := s.stop(sig); err != nil {
		return err
	}
	return s.start(ctx)
}
