package chaos

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// report is the run's table: operations by kind and result, faults by
// kind, process restarts, webhook events, invariants checked.
type report struct {
	seed            uint64
	ran             time.Duration
	quiet           time.Duration // from the workload's end to quiescence and the reference schema's checks
	legacyAnomalies int           // the anomalies the legacy writer caused
	tally           *tally
	checks          *checks
	events          int64
	deliveries      int
	restarts        []string
}

func (r report) print(w io.Writer) {
	r.tally.mu.Lock()
	defer r.tally.mu.Unlock()
	fmt.Fprintf(w, "\ncouponlink chaos: seed %d, workload and faults for %s\n\n", r.seed, r.ran.Round(time.Second))
	fmt.Fprintln(w, "| operation | result | count |\n|---|---|---:|")
	total := 0
	for _, kind := range sortedKeys(r.tally.ops) {
		for _, res := range sortedKeys(r.tally.ops[kind]) {
			n := r.tally.ops[kind][res]
			total += n
			fmt.Fprintf(w, "| %s | %s | %d |\n", kind, res, n)
		}
	}
	fmt.Fprintf(w, "| **all** | | **%d** |\n\n", total)
	fmt.Fprintln(w, "| fault | count |\n|---|---:|")
	nf := 0
	for _, kind := range sortedKeys(r.tally.faults) {
		nf += r.tally.faults[kind]
		fmt.Fprintf(w, "| %s | %d |\n", kind, r.tally.faults[kind])
	}
	fmt.Fprintf(w, "| **all** | **%d** |\n\n", nf)
	fmt.Fprintf(w, "process exits not caused by a fault's SIGKILL (each restarted by the harness, as a supervisor would): %s\n", strings.Join(r.restarts, ", "))
	fmt.Fprintf(w, "webhook events: %d in the outbox, %d deliveries received\n", r.events, r.deliveries)
	fmt.Fprintf(w, "anomalies the legacy writer caused: %d\n", r.legacyAnomalies)
	fmt.Fprintf(w, "quiescence and the checks of the reference schema took %s after the workload stopped\n\n", r.quiet.Round(100*time.Millisecond))
	r.checks.mu.Lock()
	defer r.checks.mu.Unlock()
	fmt.Fprintln(w, "| invariant | passed | failed | skipped |\n|---|---:|---:|---:|")
	for _, n := range r.checks.order {
		c := r.checks.res[n]
		fmt.Fprintf(w, "| %s | %d | %d | %d |\n", n, c.passed, c.failed, c.skipped)
	}
	fmt.Fprintln(w)
}
