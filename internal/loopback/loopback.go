// Package loopback finds free ports on 127.0.0.1 for the servers and
// processes that the chaos run, the benchmark and the tests start of
// their own.
package loopback

import (
	"fmt"
	"net"
)

// FreePort returns a loopback port nothing listens on now.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
