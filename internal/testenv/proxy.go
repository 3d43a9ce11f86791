package testenv

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TCPProxy passes TCP connections through to a server, on a loopback port
// of its own, and fails as a network does: CloseAll breaks the open
// connections (new ones still go through), Refuse breaks them and refuses
// new ones (the server is unreachable through the proxy, and only through
// it), Partition passes nothing more and closes nothing (new connections
// hang: neither end sees the other go away). Everything closes when the
// test ends.
type TCPProxy struct {
	ln          net.Listener
	to          string
	partitioned atomic.Bool
	mu          sync.Mutex
	refused     bool
	conns       []net.Conn
}

// NewTCPProxy starts a proxy to the server at to (host:port).
func NewTCPProxy(t testing.TB, to string) *TCPProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy listener: %v", err)
	}
	p := &TCPProxy{ln: ln, to: to}
	t.Cleanup(p.CloseAll) // after the listener's close: nothing new comes in
	AcceptEach(t, ln, func(c net.Conn) { go p.forward(c) })
	return p
}

// AcceptEach gives each connection ln accepts to handle, in the accepting
// goroutine, until the test ends and closes ln.
func AcceptEach(t testing.TB, ln net.Listener, handle func(net.Conn)) {
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return // closed
			}
			handle(c)
		}
	}()
}

// Addr is the proxy's host:port, to give in the server's place.
func (p *TCPProxy) Addr() string { return p.ln.Addr().String() }

// CloseAll closes every connection open through the proxy now.
func (p *TCPProxy) CloseAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

// Refuse closes every connection through the proxy and refuses new ones.
func (p *TCPProxy) Refuse() {
	p.mu.Lock()
	p.refused = true
	p.mu.Unlock()
	p.CloseAll()
}

// Partition stops every byte from now on, closing nothing.
func (p *TCPProxy) Partition() { p.partitioned.Store(true) }

// keep records c to be closed by CloseAll; false when the proxy refuses.
func (p *TCPProxy) keep(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.refused {
		return false
	}
	p.conns = append(p.conns, c)
	return true
}

func (p *TCPProxy) forward(c net.Conn) {
	if !p.keep(c) {
		_ = c.Close()
		return
	}
	if p.partitioned.Load() {
		return // a connection attempt into the partition: it hangs
	}
	up, err := net.DialTimeout("tcp", p.to, time.Second)
	if err != nil {
		_ = c.Close()
		return
	}
	if !p.keep(up) {
		_ = up.Close()
		_ = c.Close()
		return
	}
	go p.pipe(up, c)
	p.pipe(c, up)
}

// pipe copies src to dst until src ends (then it closes dst, as the
// network passes the close on) or the partition (then it stops, closing
// nothing).
func (p *TCPProxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if p.partitioned.Load() {
			return
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				_ = src.Close()
				return
			}
		}
		if err != nil {
			_ = dst.Close()
			return
		}
	}
}
