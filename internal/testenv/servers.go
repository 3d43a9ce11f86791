package testenv

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Server is a NATS or Redis server of the test's own, on a free loopback
// port, for tests that stop, kill, pause and restart it. Its data
// outlives a restart (JetStream's store directory; Redis's append-only
// file, fsynced on every write).
type Server struct {
	p    *process
	Addr string // host:port

	node, cookie string // a RabbitMQ node's name and Erlang cookie
}

// OwnNATS starts `nats-server -js` (installed by .ci/run; Debian package
// nats-server) with its store in a temporary directory.
func OwnNATS(t testing.TB) *Server {
	t.Helper()
	bin := lookBin("nats-server", "/usr/sbin/nats-server")
	p := ownProcess(t, "nats-server", func(dir, port string) []string {
		return []string{bin, "-js", "-a", "127.0.0.1", "-p", port, "-sd", filepath.Join(dir, "store")}
	})
	return &Server{p: p, Addr: p.addr}
}

// OwnRedis starts a redis-server with append-only persistence, and the
// extra settings (e.g. "--requirepass", "secret").
func OwnRedis(t testing.TB, extra ...string) *Server {
	t.Helper()
	bin := lookBin("redis-server", "/usr/bin/redis-server")
	p := ownProcess(t, "redis-server", func(dir, port string) []string {
		return append([]string{bin, "--bind", "127.0.0.1", "--port", port, "--save", "", "--appendonly", "yes",
			"--appendfsync", "always", "--dir", dir}, extra...)
	})
	return &Server{p: p, Addr: p.addr}
}

// URL is the server's address as a nats:// URL.
func (s *Server) URL() string { return "nats://" + s.Addr }

// Stop stops the server by its PID (SIGTERM: clean; SIGKILL: a crash)
// and waits until it exited.
func (s *Server) Stop(sig syscall.Signal) { s.p.stop(sig) }

// Start starts it again, on the same port and data.
func (s *Server) Start() { s.p.start() }

// Pause makes the server unreachable without closing its port (SIGSTOP);
// Pause(false) resumes it.
func (s *Server) Pause(on bool) { s.p.pause(on) }

// Log is the server's output so far (for a failing test's message).
func (s *Server) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.p.dir, s.p.name+".log"))
	return string(b)
}
