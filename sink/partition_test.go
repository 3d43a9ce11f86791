package sink_test

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// partitionProxy passes TCP connections through to a server until
// partition: from then on it passes nothing and closes nothing (nor does
// it accept anything new), as a network partition does — neither end sees
// the other go away. Everything closes when the test ends.
type partitionProxy struct {
	ln     net.Listener
	target string
	cut    atomic.Bool
	mu     sync.Mutex
	conns  []net.Conn
}

func startPartitionProxy(t *testing.T, target string) *partitionProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &partitionProxy{ln: ln, target: target}
	go p.accept()
	t.Cleanup(func() {
		_ = ln.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range p.conns {
			_ = c.Close()
		}
	})
	return p
}

func (p *partitionProxy) addr() string { return p.ln.Addr().String() }

// partition stops every byte from now on.
func (p *partitionProxy) partition() { p.cut.Store(true) }

func (p *partitionProxy) keep(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.conns = append(p.conns, c)
}

func (p *partitionProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.keep(c)
		if p.cut.Load() {
			continue // a connection attempt into the partition: it hangs
		}
		u, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.keep(u)
		go p.pipe(u, c)
		go p.pipe(c, u)
	}
}

// pipe copies src to dst until src ends (then it closes dst, as the
// network would pass the close on) or the partition (then it stops,
// closing nothing).
func (p *partitionProxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if p.cut.Load() {
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
