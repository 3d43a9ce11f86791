package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// What one API operation costs, measured around each closed-loop run of
// phase 4: the CPU of MariaDB, of the api process and of this process (the
// load generator), and the server's statements, per operation; a CPU
// profile of the combining api under the hot-bucket load (its -pprof
// endpoint); and the hot-bucket claims and the INSERT ceiling again with
// MariaDB and the api on cores of their own (taskset).

// opCost is a run's cost per operation.
type opCost struct {
	DB, API, Gen time.Duration
	Statements   float64 // statements executed (not prepares or closes), BEGIN and COMMIT included
}

// statementsPerOp counts the executed statements of the counters' growth
// per operation.
func statementsPerOp(before, after map[string]int64, ops int) float64 {
	if ops == 0 || before == nil || after == nil {
		return 0
	}
	var n int64
	for _, k := range statusCounters {
		if k != "Com_stmt_prepare" && k != "Com_stmt_close" {
			n += after[k] - before[k]
		}
	}
	return float64(n) / float64(ops)
}

// costTable is the note of phase 4 that lists every run's cost per
// operation, one line a run.
func costTable(runs []namedRun) string {
	var b strings.Builder
	b.WriteString("Cost per operation of the API runs (CPU over the whole run, warm-up included, ÷ its operations; statements from SHOW GLOBAL STATUS):\n\n")
	b.WriteString("| run | per s | MariaDB CPU | api CPU | generator CPU | statements |\n|---|---|---|---|---|---|\n")
	for _, r := range runs {
		if r.l.All == 0 {
			continue
		}
		n := max(1, r.rows)
		per := func(d time.Duration) time.Duration { return d / time.Duration(n) }
		api := us(per(r.l.Per.API))
		if r.l.Per.API == 0 {
			api = "—"
		}
		fmt.Fprintf(&b, "| %s | %.0f | %s | %s | %s | %.2f |\n", r.name, r.l.rate()*float64(n), us(per(r.l.Per.DB)), api, us(per(r.l.Per.Gen)), r.l.Per.Statements/float64(n))
	}
	return b.String()
}

// namedRun is a run of the cost table; a run of multi-row INSERTs is
// shown per row (rows: the rows of one of its statements).
type namedRun struct {
	name string
	l    loadResult
	rows int
}

// fetchProfile saves the api p's CPU profile over the next secs seconds
// (GET /debug/pprof/profile on its -metrics-addr listener) to path.
func (a *apiBench) fetchProfile(ctx context.Context, p *apiProc, secs int, path string) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", p.metrics, secs), nil)
	c := &http.Client{Timeout: time.Duration(secs+30) * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /debug/pprof/profile: %s", resp.Status)
	}
	f, err := os.Create(path) // in cfg.out, which bench made
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// profiled runs run while it records the api p's CPU profile into path
// (a warning, no profile, when the profile cannot be had).
func (a *apiBench) profiled(ctx context.Context, p *apiProc, path string, run func()) string {
	secs := int((min(time.Second, a.cfg.apiDuration/5) + a.cfg.apiDuration).Round(time.Second) / time.Second)
	done := make(chan error, 1)
	go func() { done <- a.fetchProfile(ctx, p, max(secs, 1), path) }()
	run()
	if err := <-done; err != nil {
		a.log.Warn("no CPU profile of the api", "err", err)
		return ""
	}
	return path
}

// pinnedRun is the hot-bucket claims through the combining api and the
// single-row INSERT ceiling, each with MariaDB on CPU 0 and the api and
// this process (the load generator) on CPU 1.
type pinnedRun struct {
	hot, ceiling loadResult
}

// pinned measures pinnedRun, then lets every process run on every CPU
// again; nil (and a log line) on a machine of one CPU, without taskset, or
// when a process cannot be pinned.
func (a *apiBench) pinned(ctx context.Context, tpl int64) *pinnedRun {
	if runtime.NumCPU() < 2 || ctx.Err() != nil {
		return nil
	}
	db := a.e.mariadbPID()
	if db <= 0 {
		a.log.Warn("no pinned runs: the private MariaDB's pid is unknown")
		return nil
	}
	pins := []struct {
		pid      int
		cpu, was string
	}{{pid: db, cpu: "0"}, {pid: a.on.child.pid(), cpu: "1"}, {pid: os.Getpid(), cpu: "1"}}
	for i := range pins {
		if pins[i].was = cpusAllowed(pins[i].pid); pins[i].was == "" {
			pins[i].was = "0-" + strconv.Itoa(runtime.NumCPU()-1)
		}
	}
	defer func() { // as they were, on every CPU they had
		for _, p := range pins {
			if err := taskset(context.WithoutCancel(ctx), p.pid, p.was); err != nil {
				a.log.Warn("unpin", "pid", p.pid, "err", err)
			}
		}
	}()
	for _, p := range pins {
		if err := taskset(ctx, p.pid, p.cpu); err != nil {
			a.log.Warn("no pinned runs", "err", err)
			return nil
		}
	}
	a.log.Info("pinned runs: MariaDB on CPU 0, the api and the load generator on CPU 1")
	var res pinnedRun
	res.ceiling = a.insertCeiling(ctx, "pinned", 1)
	res.hot = a.claims(ctx, a.on, tpl, "pin", 1)
	return &res
}

// taskset sets the CPUs of every thread of pid (taskset -a -p -c).
func taskset(ctx context.Context, pid int, cpus string) error {
	out, err := exec.CommandContext(ctx, "taskset", "-a", "-p", "-c", cpus, strconv.Itoa(pid)).CombinedOutput()
	if err != nil {
		return fmt.Errorf("taskset -a -p -c %s %d: %v: %s", cpus, pid, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// cpusAllowed is the CPU list a process may run on (Cpus_allowed_list of
// /proc/<pid>/status, e.g. "0-1"); "" when unknown.
func cpusAllowed(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ""
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && k == "Cpus_allowed_list" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
