package testenv

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// RabbitVhost is a virtual host of the test's own on the shared RabbitMQ
// broker (COUPONLINK_TEST_RABBITMQ_ADDR, default 127.0.0.1:5672, user
// guest, managed with rabbitmqctl as the broker's administrator).
type RabbitVhost struct {
	t     testing.TB
	Name  string
	Addr  string
	Owned bool // false: no vhost could be made, Name is "/" (the test uses names of its own there)
}

// RabbitMQ makes a fresh vhost, guest allowed everything in it, and
// deletes it when the test ends. When rabbitmqctl cannot make one, it
// logs why and gives the default vhost "/".
func RabbitMQ(t testing.TB) *RabbitVhost {
	t.Helper()
	v := &RabbitVhost{t: t, Name: "clt-" + randomSuffix(), Addr: RabbitMQAddr(), Owned: true}
	if err := rabbitmqctl("add_vhost", v.Name); err != nil {
		t.Logf("rabbitmqctl add_vhost: %v; using the vhost / with names of the test's own", err)
		v.Name, v.Owned = "/", false
		return v
	}
	t.Cleanup(func() {
		if err := rabbitmqctl("delete_vhost", v.Name); err != nil {
			t.Logf("rabbitmqctl delete_vhost %s: %v", v.Name, err)
		}
	})
	if err := rabbitmqctl("set_permissions", "-p", v.Name, "guest", ".*", ".*", ".*"); err != nil {
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
	if err := rabbitmqctl("close_all_connections", "--vhost", v.Name, "test: a broker outage"); err != nil {
		v.t.Fatalf("rabbitmqctl close_all_connections: %v", err)
	}
}

func rabbitmqctl(args ...string) error {
	out, err := exec.Command(lookBin("rabbitmqctl", "/usr/sbin/rabbitmqctl"), append([]string{"-q"}, args...)...).CombinedOutput()
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
