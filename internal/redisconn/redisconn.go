// Package redisconn is how couponlink connects to Redis: one Redis or a
// Redis Cluster behind one interface (redis.UniversalClient), the walk over
// a cluster's masters, and the slot of a key.
package redisconn

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/couponlink/couponlink/internal/tlsconf"
)

// Options are the settings of a connection.
type Options struct {
	// Addr is one address, or a comma-separated list of them: the seed
	// nodes of a Redis Cluster. Each is host:port or a URL,
	// redis://[user:password@]host:port[/db] (rediss:// for TLS); a URL's
	// user and password win over Username and Password.
	Addr string
	// Cluster makes even a single address a Redis Cluster's seed node (a
	// cluster's configuration endpoint). Two or more addresses always are.
	Cluster bool
	// Username and Password authenticate every connection (AUTH; an ACL
	// user, or the default user with Password alone). Empty: none.
	Username, Password string
	// DialTimeout, ReadTimeout, WriteTimeout: 0 is go-redis's default.
	DialTimeout, ReadTimeout, WriteTimeout time.Duration
	PoolSize                               int // 0: go-redis's default
	// TLS encrypts every connection, to each node of a cluster alike (nil:
	// in clear, unless a rediss:// URL asks for TLS: then with the system's
	// CAs); its certificate check names the node dialled.
	TLS *tlsconf.Config
}

// Addrs splits a comma-separated address list, without blanks.
func Addrs(list string) []string {
	var out []string
	for _, a := range strings.Split(list, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// Open returns a client on the Redis or Redis Cluster o names: a
// *redis.Client for one address (without Cluster), else a
// *redis.ClusterClient. A server that refuses the credentials (WRONGPASS,
// NOAUTH) is an error naming the settings; one that cannot be reached is
// not (the client dials again on use).
func Open(o Options) (redis.UniversalClient, error) {
	uo, err := universalOptions(o)
	if err != nil {
		return nil, err
	}
	rdb := redis.NewUniversalClient(uo)
	if err := checkAuth(rdb, uo.Password, o.DialTimeout); err != nil {
		_ = rdb.Close()
		return nil, err
	}
	return rdb, nil
}

// universalOptions are go-redis's options for o.
func universalOptions(o Options) (*redis.UniversalOptions, error) {
	t, err := parseAddrs(o.Addr)
	if err != nil {
		return nil, err
	}
	if len(t.addrs) == 0 {
		return nil, errors.New("no Redis address")
	}
	cluster := o.Cluster || len(t.addrs) > 1
	if cluster && t.db != 0 {
		return nil, errors.New("-redis [COUPONLINK_REDIS_ADDR]: a Redis Cluster has database 0 alone; drop the URL's /db")
	}
	user, password := t.credentials(o)
	uo := &redis.UniversalOptions{Addrs: t.addrs, IsClusterMode: o.Cluster, Username: user, Password: password, DB: t.db,
		DialTimeout: o.DialTimeout, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout, PoolSize: o.PoolSize}
	tc := o.TLS
	if tc == nil && t.tls {
		if tc, err = (tlsconf.Settings{Mode: tlsconf.Verify}).Load(); err != nil {
			return nil, fmt.Errorf("rediss:// TLS: %w", err)
		}
	}
	if tc != nil {
		uo.Dialer = tlsDialer(tc, o.DialTimeout)
	}
	return uo, nil
}

// EachMaster runs fn on every master of a Redis Cluster (on each node's own
// client: commands without keys such as SCAN, FLUSHALL or DBSIZE reach that
// node alone), or once on a single Redis.
func EachMaster(ctx context.Context, rdb redis.UniversalClient, fn func(ctx context.Context, node *redis.Client) error) error {
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, fn)
	case *redis.Client:
		return fn(ctx, c)
	}
	return fmt.Errorf("redis client of type %T: neither a single Redis nor a cluster", rdb)
}

// ScanPrefix lists the keys that start with prefix, on every master.
func ScanPrefix(ctx context.Context, rdb redis.UniversalClient, prefix string) ([]string, error) {
	var mu sync.Mutex // ForEachMaster runs fn on the masters concurrently
	var out []string
	err := EachMaster(ctx, rdb, func(ctx context.Context, node *redis.Client) error {
		it := node.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for it.Next(ctx) {
			mu.Lock()
			out = append(out, it.Val())
			mu.Unlock()
		}
		if err := it.Err(); err != nil {
			return fmt.Errorf("scan %s: %w", node.Options().Addr, err)
		}
		return nil
	})
	return out, err
}

// Slot is the Redis Cluster slot of key: CRC16 of its hash tag (the part
// between the first "{" and the next "}", when not empty) or of the whole
// key, modulo 16384.
func Slot(key string) int {
	if s := strings.IndexByte(key, '{'); s >= 0 {
		if e := strings.IndexByte(key[s+1:], '}'); e > 0 {
			key = key[s+1 : s+1+e]
		}
	}
	return int(crc16(key) % 16384)
}

// crc16 is CRC-16/XMODEM, the checksum of Redis Cluster's key slots.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// OnEachMaster names one key per master of a Redis Cluster, each in a slot
// that master serves now: base + ":{<n>}" for the smallest n that lands
// there. A marker on each master is how a flush or a restart of any one
// of them is seen. On a single Redis it is base alone. A master no such
// name reaches (a base with a hash tag of its own pins every name to one
// slot) gets none.
func OnEachMaster(ctx context.Context, rdb redis.UniversalClient, base string) ([]string, error) {
	c, ok := rdb.(*redis.ClusterClient)
	if !ok {
		return []string{base}, nil
	}
	slots, err := c.ClusterSlots(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("read the cluster's slots: %w", err)
	}
	owner := make([]string, 16384) // slot -> master address
	masters := map[string]bool{}
	for _, s := range slots {
		if len(s.Nodes) == 0 {
			continue
		}
		masters[s.Nodes[0].Addr] = true
		for i := max(s.Start, 0); i <= s.End && i < len(owner); i++ {
			owner[i] = s.Nodes[0].Addr
		}
	}
	var out []string
	have := map[string]bool{}
	for n := 0; n < 1<<16 && len(have) < len(masters); n++ {
		k := base + ":{" + strconv.Itoa(n) + "}"
		if m := owner[Slot(k)]; m != "" && !have[m] {
			have[m] = true
			out = append(out, k)
		}
	}
	return out, nil
}
