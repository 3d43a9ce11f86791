package testenv

import (
	"bytes"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// BuildCouponlink builds the couponlink command into a temporary directory,
// from the module's root, and returns the binary's path.
func BuildCouponlink(t testing.TB) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	gomod := strings.TrimSpace(string(out))
	if err != nil || gomod == "" || gomod == "/dev/null" {
		t.Fatalf("go env GOMOD: not inside the module (%v)", err)
	}
	bin := filepath.Join(t.TempDir(), "couponlink")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/couponlink")
	cmd.Dir = filepath.Dir(gomod)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/couponlink: %v\n%s", err, out)
	}
	return bin
}

// FreeAddr returns a 127.0.0.1 address nothing listens on (now).
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// Output is a process's (or a logger's) output, safe to write and read
// from several goroutines.
type Output struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.Write(p)
}

func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}
