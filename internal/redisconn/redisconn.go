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
	// Addr is one host:port, or a comma-separated list of them: the seed
	// nodes of a Redis Cluster.
	Addr string
	// Cluster makes even a single address a Redis Cluster's seed node (a
	// cluster's configuration endpoint). Two or more addresses always are.
	Cluster bool
	// DialTimeout, ReadTimeout, WriteTimeout: 0 is go-redis's default.
	DialTimeout, ReadTimeout, WriteTimeout time.Duration
	PoolSize                               int // 0: go-redis's default
	// TLS encrypts every connection, to each node of a cluster alike (nil:
	// in clear); its certificate check names the node dialled.
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
// *redis.ClusterClient.
func Open(o Options) (redis.UniversalClient, error) {
	addrs := Addrs(o.Addr)
	if len(addrs) == 0 {
		return nil, errors.New("no Redis address")
	}
	uo := &redis.UniversalOptions{Addrs: addrs, IsClusterMode: o.Cluster,
		DialTimeout: o.DialTimeout, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout, PoolSize: o.PoolSize}
	if o.TLS != nil {
		uo.Dialer = tlsDialer(o.TLS, o.DialTimeout)
	}
	return redis.NewUniversalClient(uo), nil
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
