package testenv

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/couponlink/couponlink/internal/redisconn"
	"github.com/couponlink/couponlink/internal/tlsconf"
)

// RedisCluster is a Redis Cluster of the test's own: three masters without
// replicas on free loopback ports, in a temporary directory, killed by PID
// when the test ends.
type RedisCluster struct {
	t     testing.TB
	Addrs []string // the masters, host:port
	cmds  []*exec.Cmd
	dones []chan struct{}
	// TLS is the clients' TLS to an OwnRedisClusterTLS (nil: in clear)
	TLS *tlsconf.Config
	// Password is the nodes' requirepass and masterauth, of an
	// OwnRedisClusterAuth ("": none)
	Password string
}

// OwnRedisCluster starts three redis-server processes in cluster mode,
// joins them with `redis-cli --cluster create` (every slot over the three
// masters) and waits until each node says cluster_state:ok.
func OwnRedisCluster(t testing.TB) *RedisCluster {
	t.Helper()
	return ownRedisCluster(t, clusterConfig{})
}

// OwnRedisClusterAuth is OwnRedisCluster whose nodes want password
// (requirepass, and masterauth between them); Client and the test's own
// node clients give it.
func OwnRedisClusterAuth(t testing.TB, password string) *RedisCluster {
	t.Helper()
	return ownRedisCluster(t, clusterConfig{password: password})
}

// clusterConfig is how ownRedisCluster starts its nodes: with tc, TLS
// with the certificate, key and CA of files (redis-server's and
// redis-cli's flags alike); with password, requirepass and masterauth.
type clusterConfig struct {
	tc       *tlsconf.Config
	files    []string
	password string
}

// OwnRedisClusterTLS is OwnRedisCluster whose nodes serve TLS alone, to
// clients and on the cluster bus, with certificates of ca for 127.0.0.1,
// and ask clients for a certificate of ca; TLS is the clients' settings.
func OwnRedisClusterTLS(t testing.TB, ca *CA) *RedisCluster {
	t.Helper()
	cert, key := ca.Issue("redis-cluster", "127.0.0.1")
	tc, err := tlsconf.Settings{Mode: tlsconf.Verify, CA: ca.File, Cert: cert, Key: key}.Load()
	if err != nil {
		t.Fatal(err)
	}
	return ownRedisCluster(t, clusterConfig{tc: tc, files: []string{"--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-cert-file", ca.File}})
}

// ownRedisCluster starts the cluster as cc says.
func ownRedisCluster(t testing.TB, cc clusterConfig) *RedisCluster {
	t.Helper()
	tc, files := cc.tc, cc.files
	c := &RedisCluster{t: t, TLS: tc, Password: cc.password}
	t.Cleanup(c.stop)
	for i := range 3 {
		dir := filepath.Join(t.TempDir(), "node")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatalf("cluster node dir: %v", err)
		}
		addr, port := clusterPort(t)
		ports := []string{"--port", port}
		if tc != nil {
			ports = append([]string{"--port", "0", "--tls-port", port, "--tls-cluster", "yes", "--tls-replication", "yes"}, files...)
		}
		if cc.password != "" {
			ports = append(ports, "--requirepass", cc.password, "--masterauth", cc.password)
		}
		cmd := exec.Command("redis-server", append(append([]string{"--bind", "127.0.0.1"}, ports...), "--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(dir, "nodes.conf"), "--dir", dir, "--save", "", "--appendonly", "no",
			"--logfile", filepath.Join(dir, "redis.log"))...)
		if err := cmd.Start(); err != nil {
			t.Fatalf("start cluster node %d: %v", i, err)
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		c.Addrs, c.cmds, c.dones = append(c.Addrs, addr), append(c.cmds, cmd), append(c.dones, done)
	}
	for _, a := range c.Addrs {
		c.waitNode(a, "PONG", func(n *redis.Client) string { return n.Ping(context.Background()).Val() })
	}
	args := append([]string{"--cluster", "create"}, c.Addrs...)
	if tc != nil { // redis-cli's --cert, --key, --cacert are redis-server's files
		args = append(args, "--tls", "--cert", files[1], "--key", files[3], "--cacert", files[5])
	}
	if cc.password != "" {
		args = append(args, "--no-auth-warning", "-a", cc.password)
	}
	out, err := exec.Command("redis-cli", append(args, "--cluster-replicas", "0", "--cluster-yes")...).CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	for _, a := range c.Addrs {
		c.waitNode(a, "cluster_state:ok", func(n *redis.Client) string { return n.ClusterInfo(context.Background()).Val() })
	}
	return c
}

// clusterPort finds a free loopback port whose cluster bus port (port +
// 10000) is free too.
func clusterPort(t testing.TB) (addr, port string) {
	t.Helper()
	for range 100 {
		addr = FreeAddr(t)
		p, _ := strconv.Atoi(addr[strings.LastIndexByte(addr, ':')+1:])
		if p+10000 > 65535 {
			continue
		}
		if ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+10000)); err == nil {
			_ = ln.Close()
			return addr, strconv.Itoa(p)
		}
	}
	t.Fatal("no free port pair (port, port + 10000) for a cluster node")
	return "", ""
}

// waitNode polls a node until what it answers contains want (30 s at most).
func (c *RedisCluster) waitNode(addr, want string, ask func(*redis.Client) string) {
	c.t.Helper()
	n := c.node(addr)
	defer n.Close()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(ask(n), want) {
		if time.Now().After(deadline) {
			c.t.Fatalf("cluster node %s did not answer %q within 30 s", addr, want)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition
	}
}

// Client is a cluster client on the masters with the cdc command's short
// timeouts, closed when the test ends.
func (c *RedisCluster) Client() redis.UniversalClient {
	c.t.Helper()
	rdb, err := redisconn.Open(redisconn.Options{Addr: strings.Join(c.Addrs, ","), TLS: c.TLS, Password: c.Password,
		DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second})
	if err != nil {
		c.t.Fatalf("cluster client: %v", err)
	}
	c.t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// FlushAll runs FLUSHALL on every master.
func (c *RedisCluster) FlushAll() {
	c.t.Helper()
	for _, a := range c.Addrs {
		c.Flush(a)
	}
}

// Flush runs FLUSHALL on one master.
func (c *RedisCluster) Flush(addr string) {
	c.t.Helper()
	n := c.node(addr)
	defer n.Close()
	if err := n.FlushAll(context.Background()).Err(); err != nil {
		c.t.Fatalf("FLUSHALL on %s: %v", addr, err)
	}
}

// node is a client of the one node addr (with the cluster's TLS).
func (c *RedisCluster) node(addr string) *redis.Client {
	host, _, _ := net.SplitHostPort(addr)
	return redis.NewClient(&redis.Options{Addr: addr, DialTimeout: time.Second, TLSConfig: c.TLS.For(host), Password: c.Password})
}

// stop kills every node by its PID and waits until each has exited.
func (c *RedisCluster) stop() {
	for i, cmd := range c.cmds {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-c.dones[i]
	}
}
