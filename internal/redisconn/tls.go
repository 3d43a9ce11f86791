package redisconn

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"time"

	"github.com/couponlink/couponlink/internal/tlsconf"
)

// tlsDialer dials addr and makes the connection TLS with c's settings for
// addr's host — each node of a cluster its own (the certificate check
// names the node dialled, which one *tls.Config for all could not). A
// refused certificate is an error naming the address and the CA.
func tlsDialer(c *tlsconf.Config, timeout time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if timeout <= 0 {
		timeout = 5 * time.Second // go-redis's default dial timeout
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			host = addr
		}
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		raw, err := (&net.Dialer{KeepAlive: 5 * time.Minute}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		conn := tls.Client(raw, c.For(host))
		if err := conn.HandshakeContext(ctx); err != nil {
			_ = raw.Close()
			return nil, fmt.Errorf("TLS to Redis %s: %w", addr, err)
		}
		return conn, nil
	}
}
