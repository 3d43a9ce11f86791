// Command couponlink-chaos is couponlink's seeded fault-injection soak
// (`make chaos`): it builds the couponlink binary, starts a private MariaDB
// and Redis on free loopback ports, runs the api, two cdcs and the
// reconciler as processes under concurrent API clients while it injects
// faults drawn from the seed, then checks the invariants. Exit 0: every
// invariant held; 1: a violation (the seed and the first violated
// invariant with its rows are printed); 2: the harness could not run.
package main

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	stdlog "log"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/couponlink/couponlink/chaos"
	"github.com/couponlink/couponlink/internal/settings"
)

func main() { os.Exit(run()) }

func run() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fs := flag.NewFlagSet("couponlink-chaos", flag.ContinueOnError)
	duration := fs.Duration("duration", time.Minute, "how long the workload and the faults run (the quiescence and the checks come after)")
	seed := fs.Uint64("seed", 0, "seed of the operations and of the faults' kinds and moments (0: a random one, printed)")
	clients := fs.Int("clients", 4, "concurrent API clients")
	maxReq := fs.Int64("max-requests", 1_000_000, "bound of the API requests")
	checkEvery := fs.Int("check-every", 8, "a checkpoint (counters = truth at a snapshot) every this many faults (0: none)")
	bin := fs.String("bin", "", "the couponlink binary (default: built from this module into the run's directory)")
	keep := fs.Bool("keep", false, "keep the run's directory (server data, process logs) and print it")
	var logging settings.Logging // the harness's; the processes log into the run's directory
	settings.Wrap(fs).Add(&logging)
	if err := fs.Parse(os.Args[1:]); err != nil {
		return 2
	}
	_ = mysql.SetLogger(stdlog.New(io.Discard, "", 0)) // the drivers' notes of connections a fault closed
	redis.SetLogger(quiet{})
	log := logging.Logger(os.Stderr)
	if *seed == 0 {
		var b [8]byte
		_, _ = rand.Read(b[:])
		*seed = binary.LittleEndian.Uint64(b[:]) >> 1
	}
	fmt.Printf("couponlink chaos: seed %d (reproduce: make chaos CHAOSFLAGS='-seed %d -duration %s')\n", *seed, *seed, *duration)
	dir, err := os.MkdirTemp("", "couponlink-chaos-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "couponlink-chaos: %v\n", err)
		return 2
	}
	if *bin == "" {
		*bin = filepath.Join(dir, "couponlink")
		build := exec.CommandContext(ctx, "go", "build", "-o", *bin, "./cmd/couponlink")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "couponlink-chaos: go build ./cmd/couponlink (run it from the module's root): %v\n", err)
			return 2
		}
	}
	if *keep {
		fmt.Printf("run directory: %s\n", dir)
	}
	res, err := chaos.Run(ctx, chaos.Config{Duration: *duration, Seed: *seed, Bin: *bin, Repo: ".", Dir: dir, Clients: *clients,
		MaxRequests: *maxReq, CheckEvery: *checkEvery, Keep: *keep, Logger: log, Out: os.Stdout})
	if err != nil {
		fmt.Fprintf(os.Stderr, "couponlink-chaos: seed %d: the harness could not run: %v\n", *seed, err)
		return 2
	}
	if res.Violation != "" {
		fmt.Printf("VIOLATION (seed %d): %s\n", *seed, res.Violation)
		for _, r := range res.Rows {
			fmt.Printf("  %s\n", r)
		}
		return 1
	}
	fmt.Printf("every invariant held (seed %d)\n", *seed)
	return 0
}

// quiet is a go-redis logger that drops its notes (a Redis a fault
// stopped is expected here).
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}
