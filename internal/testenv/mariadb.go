package testenv

import (
	"context"
	"database/sql"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/couponlink/couponlink/migrations"
)

// MariaDB is a MariaDB server of the test's own, in a temporary directory,
// for tests that stop, kill and restart it (never the shared private
// server the other tests use). Its root has no password.
type MariaDB struct {
	t    testing.TB
	dir  string
	port string
	cmd  *exec.Cmd
	done chan struct{}
	id   int // server_id
	// extra are settings added to the command line (OwnMariaDBTLS's)
	extra []string
	// Addr is its host:port.
	Addr string
	// ServerDSN is root's DSN on it, without a database.
	ServerDSN string
	// SocketDSN is root's DSN on its unix socket, without a database.
	SocketDSN string
}

// OwnMariaDB initialises a data directory and starts a MariaDB on a free
// port with the binlog settings of deploy/local/servers.sh; the server is
// killed when the test ends.
func OwnMariaDB(t testing.TB) *MariaDB {
	t.Helper()
	return OwnMariaDBWithID(t, 1)
}

// OwnMariaDBWithID is OwnMariaDB with the server_id id: servers of one
// replication topology (see Replicate) need distinct ones.
func OwnMariaDBWithID(t testing.TB, id int) *MariaDB {
	t.Helper()
	return ownMariaDB(t, id)
}

// ownMariaDB is OwnMariaDBWithID with extra settings on the command line.
func ownMariaDB(t testing.TB, id int, extra ...string) *MariaDB {
	t.Helper()
	dir := t.TempDir()
	// a tmpdir of its own: servers installed at once in the shared /tmp
	// have failed on each other's temporary tables
	if err := os.Mkdir(filepath.Join(dir, "tmp"), 0o700); err != nil {
		t.Fatal(err)
	}
	install := exec.Command("mariadb-install-db", "--no-defaults", "--datadir="+filepath.Join(dir, "data"),
		"--tmpdir="+filepath.Join(dir, "tmp"), "--user="+userName(t), "--auth-root-authentication-method=normal", "--skip-test-db")
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	addr := FreeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	m := &MariaDB{t: t, dir: dir, port: port, id: id, extra: extra, Addr: addr, ServerDSN: "root@tcp(" + addr + ")/",
		SocketDSN: "root@unix(" + filepath.Join(dir, "mysqld.sock") + ")/"}
	t.Cleanup(func() {
		if m.cmd != nil {
			m.Stop(syscall.SIGKILL)
		}
	})
	m.Start()
	return m
}

// Start starts the server on its data directory and port and waits until it
// answers.
func (m *MariaDB) Start() {
	m.t.Helper()
	bin := "/usr/sbin/mariadbd"
	if p, err := exec.LookPath("mariadbd"); err == nil {
		bin = p
	}
	data := filepath.Join(m.dir, "data")
	cmd := exec.Command(bin, "--no-defaults", "--datadir="+data, "--tmpdir="+filepath.Join(m.dir, "tmp"),
		"--bind-address=127.0.0.1", "--port="+m.port, "--socket="+filepath.Join(m.dir, "mysqld.sock"),
		"--pid-file="+filepath.Join(m.dir, "mysqld.pid"), "--log-error="+filepath.Join(m.dir, "mysqld.err"),
		"--server-id="+strconv.Itoa(m.id), "--log-bin="+filepath.Join(data, "mysql-bin"), "--binlog-format=ROW",
		"--binlog-row-image=FULL", "--binlog-row-metadata=FULL", "--gtid-domain-id=0", "--log-slave-updates=ON", "--relay-log="+filepath.Join(data, "relay-bin"),
		"--skip-name-resolve", "--max-connections=200",
		"--innodb-buffer-pool-size=64M", "--innodb-log-file-size=48M",
		"--character-set-server=utf8mb4", "--collation-server=utf8mb4_bin", "--user="+userName(m.t))
	cmd.Args = append(cmd.Args, m.extra...)
	if err := cmd.Start(); err != nil {
		m.t.Fatalf("start mariadbd: %v", err)
	}
	m.cmd, m.done = cmd, make(chan struct{})
	go func(done chan struct{}) { _ = cmd.Wait(); close(done) }(m.done)

	db, err := sql.Open("mysql", m.SocketDSN) // answers with require_secure_transport too
	if err != nil {
		m.t.Fatalf("open %s: %v", m.SocketDSN, err)
	}
	defer db.Close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := db.PingContext(ctx)
		cancel()
		if err == nil {
			return
		}
		select {
		case <-m.done:
			log, _ := os.ReadFile(filepath.Join(m.dir, "mysqld.err"))
			m.t.Fatalf("mariadbd exited at start:\n%s", log)
		default:
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("mariadbd on port %s did not answer within 60 s: %v", m.port, err)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition
	}
}

func userName(t testing.TB) string {
	u, err := user.Current()
	if err != nil {
		t.Fatalf("current user: %v", err)
	}
	return u.Username
}

// Stop sends sig (SIGTERM: a clean shutdown; SIGKILL: a crash) and waits
// until the server has exited.
func (m *MariaDB) Stop(sig syscall.Signal) {
	m.t.Helper()
	if m.cmd == nil {
		return
	}
	stopCmd(m.t, "mariadbd", m.cmd, m.done, sig)
	m.cmd = nil
}

// DatabaseDSN is root's DSN on this server's database name (which it does
// not create).
func (m *MariaDB) DatabaseDSN(name string) string {
	m.t.Helper()
	cfg, err := mysql.ParseDSN(m.ServerDSN)
	if err != nil {
		m.t.Fatalf("own MariaDB's DSN: %v", err)
	}
	cfg.DBName = name
	return cfg.FormatDSN()
}

// Couponlink applies the migrations to a database couponlink on this
// server (creating it) and returns its DSN: couponlink's own schema on a
// server of the test's own.
func (m *MariaDB) Couponlink() string {
	m.t.Helper()
	dsn := m.DatabaseDSN("couponlink")
	if _, err := migrations.Up(dsn); err != nil {
		m.t.Fatalf("migrate couponlink on the own MariaDB: %v", err)
	}
	return dsn
}
