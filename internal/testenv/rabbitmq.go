package testenv

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// RabbitVhost is a virtual host of the test's own on the shared RabbitMQ
// broker (COUPONLINK_TEST_RABBITMQ_ADDR, default 127.0.0.1:5672, user
// guest, managed with rabbitmqctl as the broker's administrator), or on a
// node of the test's own when that broker does not answer.
type RabbitVhost struct {
	t     testing.TB
	Name  string
	Addr  string
	Owned bool     // false: no vhost could be made, Name is "/" (the test uses names of its own there)
	ctl   []string // rabbitmqctl's node options (a node of the test's own)
}

// RabbitMQ makes a fresh vhost, guest allowed everything in it, and
// deletes it when the test ends. When rabbitmqctl cannot make one, it
// logs why and gives the default vhost "/". When the shared broker does
// not accept connections, it starts a node of the test's own
// (OwnRabbitMQ, about 10 s) instead.
func RabbitMQ(t testing.TB) *RabbitVhost {
	t.Helper()
	v := &RabbitVhost{t: t, Name: "clt-" + randomSuffix(), Addr: RabbitMQAddr(), Owned: true}
	if c, err := net.DialTimeout("tcp", v.Addr, time.Second); err != nil {
		t.Logf("no RabbitMQ broker on %s (%v): starting one of the test's own", v.Addr, err)
		own := OwnRabbitMQ(t)
		v.Addr, v.ctl = own.Addr, []string{"-n", own.node, "--erlang-cookie", own.cookie}
	} else {
		_ = c.Close()
	}
	if err := v.rabbitmqctl("add_vhost", v.Name); err != nil {
		t.Logf("rabbitmqctl add_vhost: %v; using the vhost / with names of the test's own", err)
		v.Name, v.Owned = "/", false
		return v
	}
	t.Cleanup(func() {
		if err := v.rabbitmqctl("delete_vhost", v.Name); err != nil {
			t.Logf("rabbitmqctl delete_vhost %s: %v", v.Name, err)
		}
	})
	if err := v.rabbitmqctl("set_permissions", "-p", v.Name, "guest", ".*", ".*", ".*"); err != nil {
		t.Fatalf("rabbitmqctl set_permissions on %s: %v", v.Name, err)
	}
	return v
}

// RabbitMQAddr is the shared broker's host:port.
func RabbitMQAddr() string {
	if addr := os.Getenv("COUPONLINK_TEST_RABBITMQ_ADDR"); addr != "" {
		return addr
	}
	return "127.0.0.1:5672"
}

// URL is the amqp:// URL of the vhost as guest.
func (v *RabbitVhost) URL() string {
	return "amqp://guest:guest@" + v.Addr + "/" + strings.ReplaceAll(v.Name, "/", "%2F")
}

// CloseConnections closes every client connection to the vhost (the
// broker keeps running); it needs a vhost of the test's own.
func (v *RabbitVhost) CloseConnections() {
	v.t.Helper()
	if !v.Owned {
		v.t.Fatal("closing connections needs a vhost of the test's own (rabbitmqctl add_vhost failed)")
	}
	if err := v.rabbitmqctl("close_all_connections", "--vhost", v.Name, "test: a broker outage"); err != nil {
		v.t.Fatalf("rabbitmqctl close_all_connections: %v", err)
	}
}

func (v *RabbitVhost) rabbitmqctl(args ...string) error {
	args = append(append([]string{"-q"}, v.ctl...), args...)
	out, err := exec.Command(lookBin("rabbitmqctl", "/usr/sbin/rabbitmqctl"), args...).CombinedOutput()
	if err != nil {
		return &cmdError{err: err, out: strings.TrimSpace(string(out))}
	}
	return nil
}

type cmdError struct {
	err error
	out string
}

func (e *cmdError) Error() string { return e.err.Error() + ": " + e.out }

// OwnRabbitMQ starts a RabbitMQ node of the test's own (the Debian
// package rabbitmq-server's scripts, run in the foreground so that its
// PID is the Erlang VM's) on a free loopback port, no plugins, its
// database in a temporary directory: Stop, Start and the data kept across
// a restart as for OwnNATS; conf are more lines of its rabbitmq.conf
// (e.g. "max_message_size = 1024"). User guest, vhost "/": AMQPURL gives
// both. A cold start takes about 10 s.
func OwnRabbitMQ(t testing.TB, conf ...string) *Server {
	t.Helper()
	return ownRabbitMQ(t, func(port string) string {
		return "listeners.tcp.local = 127.0.0.1:" + port + "\n" + strings.Join(conf, "\n") + "\n"
	})
}

// OwnRabbitMQTLS is OwnRabbitMQ serving AMQP over TLS alone (amqps://),
// with a certificate of ca for 127.0.0.1 and localhost, and asking for a
// client certificate of ca.
func OwnRabbitMQTLS(t testing.TB, ca *CA) *Server {
	t.Helper()
	cert, key := ca.Issue("rabbitmq", "127.0.0.1", "localhost")
	return ownRabbitMQ(t, func(port string) string {
		return "listeners.tcp = none\nlisteners.ssl.local = 127.0.0.1:" + port + "\nssl_options.cacertfile = " + ca.File +
			"\nssl_options.certfile = " + cert + "\nssl_options.keyfile = " + key +
			"\nssl_options.verify = verify_peer\nssl_options.fail_if_no_peer_cert = true\n"
	})
}

// ownRabbitMQ starts the node with conf(port) as its rabbitmq.conf.
func ownRabbitMQ(t testing.TB, conf func(port string) string) *Server {
	t.Helper()
	bin := "/usr/lib/rabbitmq/bin/rabbitmq-server" // not /usr/sbin/rabbitmq-server, which runs it as the user rabbitmq in a child
	_, dist, _ := net.SplitHostPort(FreeAddr(t))
	node, cookie := "clt"+randomSuffix()+"@localhost", "CLT"+strings.ToUpper(randomSuffix()+randomSuffix())
	p := ownProcess(t, "rabbitmq-server", func(dir, port string) []string {
		for name, body := range map[string]string{"rabbitmq.conf": conf(port), "enabled_plugins": "[].\n", ".erlang.cookie": cookie} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o400); err != nil && !os.IsPermission(err) {
				t.Fatalf("rabbitmq-server %s: %v", name, err)
			}
		}
		return []string{"/usr/bin/env", "HOME=" + dir, "RUNNING_UNDER_SYSTEMD=true", // exec erl: the PID is the VM's
			"RABBITMQ_CONF_ENV_FILE=" + filepath.Join(dir, "none"), "RABBITMQ_CONFIG_FILE=" + filepath.Join(dir, "rabbitmq"),
			"RABBITMQ_NODENAME=" + node, "RABBITMQ_DIST_PORT=" + dist, "RABBITMQ_MNESIA_BASE=" + filepath.Join(dir, "mnesia"),
			"RABBITMQ_LOG_BASE=" + filepath.Join(dir, "log"), "RABBITMQ_LOGS=-", "RABBITMQ_ENABLED_PLUGINS_FILE=" + filepath.Join(dir, "enabled_plugins"),
			"ERL_EPMD_ADDRESS=127.0.0.1", "ERL_FLAGS=-kernel inet_dist_use_interface {127,0,0,1}", bin}
	})
	return &Server{p: p, Addr: p.addr, node: node, cookie: cookie}
}

// AMQPURL is the server's address as an amqp:// URL, user guest, vhost "/".
func (s *Server) AMQPURL() string { return "amqp://guest:guest@" + s.Addr + "/" }
