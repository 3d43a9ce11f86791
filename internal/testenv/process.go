package testenv

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// process is a server of the test's own, run in the foreground (so its
// PID is the child's), its output in a log file of its directory; it is
// killed when the test ends.
type process struct {
	t    testing.TB
	name string // for messages
	dir  string
	addr string
	args func() []string // the command line, each start
	cmd  *exec.Cmd
	done chan struct{}
}

// start runs the server and waits until its port accepts connections.
func (p *process) start() {
	p.t.Helper()
	args := p.args()
	log, err := os.OpenFile(filepath.Join(p.dir, p.name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		p.t.Fatalf("%s log: %v", p.name, err)
	}
	defer log.Close()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		p.t.Fatalf("start %s: %v", p.name, err)
	}
	p.cmd, p.done = cmd, make(chan struct{})
	go func(done chan struct{}) { _ = cmd.Wait(); close(done) }(p.done)
	within := startWithin(p.name)
	deadline := time.Now().Add(within)
	for {
		c, err := net.DialTimeout("tcp", p.addr, time.Second)
		if err == nil {
			_ = c.Close()
			return
		}
		select {
		case <-p.done:
			out, _ := os.ReadFile(log.Name())
			p.t.Fatalf("%s exited at start:\n%s", p.name, out)
		default:
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s on %s did not accept connections within %s: %v", p.name, p.addr, within, err)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition
	}
}

// stop sends sig (SIGTERM: clean; SIGKILL: a crash) and waits until the
// server has exited.
func (p *process) stop(sig syscall.Signal) {
	p.t.Helper()
	if p.cmd == nil {
		return
	}
	stopCmd(p.t, p.name, p.cmd, p.done, sig)
	p.cmd = nil
}

// stopCmd sends sig to a server started by cmd and waits (done closes when
// it has exited); after 60 s it kills it and fails the test.
func stopCmd(t testing.TB, name string, cmd *exec.Cmd, done chan struct{}, sig syscall.Signal) {
	t.Helper()
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Errorf("%s did not exit within 60 s of %s; killed", name, sig)
	}
}

// pause stops (SIGSTOP) or resumes (SIGCONT) the running server: while
// paused, its port accepts connections that are never answered.
func (p *process) pause(on bool) {
	p.t.Helper()
	if p.cmd == nil {
		p.t.Fatalf("%s is not running", p.name)
	}
	sig := syscall.SIGCONT
	if on {
		sig = syscall.SIGSTOP
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("%s: %s: %v", p.name, sig, err)
	}
}

func ownProcess(t testing.TB, name string, args func(dir, port string) []string) *process {
	t.Helper()
	dir := t.TempDir()
	addr := FreeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	p := &process{t: t, name: name, dir: dir, addr: addr, args: func() []string { return args(dir, port) }}
	t.Cleanup(func() {
		if p.cmd != nil {
			_ = p.cmd.Process.Signal(syscall.SIGCONT)
			p.stop(syscall.SIGKILL)
		}
	})
	p.start()
	return p
}

// startWithin is how long a server of the test's own may take to accept
// connections: an Erlang VM booting RabbitMQ takes 5 to 30 s on a loaded
// machine (more when it restarts on its old data), the others a second.
func startWithin(name string) time.Duration {
	if name == "rabbitmq-server" {
		return 2 * time.Minute
	}
	return 30 * time.Second
}

// lookBin finds a server binary on PATH, or at fallback.
func lookBin(name, fallback string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	return fallback
}
