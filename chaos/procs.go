package chaos

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is one couponlink process (api, cdc, reconcile) under the run's own
// supervision: when it exits it is started again after a short pause, as
// systemd's Restart=always or a k8s Deployment would; a fault kills it
// with SIGKILL. Each run's output is appended to <dir>/<name>.log.
type proc struct {
	name string
	bin  string
	args []string
	env  []string
	dir  string
	log  *slog.Logger
	// metrics is a cdc's -metrics-addr, where /metrics says whether it leads
	metrics string

	mu       sync.Mutex
	cmd      *exec.Cmd
	done     chan struct{} // closed when cmd has exited
	exits    int           // exits, the faults' kills included (each restarted)
	kills    int           // SIGKILLs sent by the faults
	stopping bool
	wg       sync.WaitGroup
}

// run starts the process and keeps it running until ctx ends (then it is
// stopped with SIGTERM and awaited).
func (p *proc) run(ctx context.Context) error {
	if err := p.spawn(); err != nil {
		return err
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.supervise(ctx)
	}()
	return nil
}

func (p *proc) spawn() error {
	f, err := os.OpenFile(filepath.Join(p.dir, p.name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); f.Close(); close(done) }()
	p.mu.Lock()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()
	return nil
}

// supervise waits for each run of the process to end and starts the next.
func (p *proc) supervise(ctx context.Context) {
	for {
		p.mu.Lock()
		cmd, exited := p.cmd, p.done
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			p.mu.Lock()
			p.stopping = true
			p.mu.Unlock()
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				<-exited
			}
			return
		case <-exited:
		}
		p.mu.Lock()
		p.exits++
		p.mu.Unlock()
		p.log.Debug("process exited; restarting", "proc", p.name)
		select {
		case <-ctx.Done():
			return
		case <-time.After(300 * time.Millisecond): // a supervisor's restart pause
		}
		for p.spawn() != nil {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}
}

// kill sends SIGKILL to the running process; the supervisor starts it again.
func (p *proc) kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return
	}
	select {
	case <-p.done: // between a run and its restart: nothing to kill
	default:
		_ = p.cmd.Process.Kill()
		p.kills++
	}
}

// wait waits until the supervisor has stopped the process (after ctx ended).
func (p *proc) wait() { p.wg.Wait() }

// leads reports whether the cdc's /metrics says it holds the leader lock
// (couponlink_cdc_leader 1); false when it does not answer.
func (p *proc) leads(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.metrics+"/metrics", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return false
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if strings.HasPrefix(line, "couponlink_cdc_leader") {
			return strings.HasSuffix(strings.TrimSpace(line), " 1")
		}
	}
	return false
}
