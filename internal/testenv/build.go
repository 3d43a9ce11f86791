package testenv

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/couponlink/couponlink/internal/loopback"
)

// BuildCouponlink builds the couponlink command from the module's root,
// once per test process, and returns the binary's path. The binary lives
// in a directory named after the process (couponlink-test-bin-<pid>);
// the first build of a process removes those of processes that have
// ended.
func BuildCouponlink(t testing.TB) string {
	t.Helper()
	built.once.Do(func() { built.bin, built.err = buildCouponlink() })
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.bin
}

var built struct {
	once sync.Once
	bin  string
	err  error
}

const binDirPrefix = "couponlink-test-bin-"

func buildCouponlink() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	gomod := strings.TrimSpace(string(out))
	if err != nil || gomod == "" || gomod == "/dev/null" {
		return "", fmt.Errorf("go env GOMOD: not inside the module (%v)", err)
	}
	removeEndedBuilds()
	dir := filepath.Join(os.TempDir(), binDirPrefix+strconv.Itoa(os.Getpid()))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "couponlink")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/couponlink")
	cmd.Dir = filepath.Dir(gomod)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/couponlink: %v\n%s", err, out)
	}
	return bin, nil
}

// removeEndedBuilds removes the binaries built by test processes that
// are gone.
func removeEndedBuilds() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), binDirPrefix+"*"))
	for _, d := range dirs {
		pid, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(d), binDirPrefix))
		if err != nil || pid == os.Getpid() {
			continue
		}
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			_ = os.RemoveAll(d)
		}
	}
}

// FreeAddr returns a 127.0.0.1 address nothing listens on (now).
func FreeAddr(t testing.TB) string {
	t.Helper()
	port, err := loopback.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", port)
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
