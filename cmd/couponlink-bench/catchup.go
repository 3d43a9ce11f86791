package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/couponlink/couponlink/canal"
)

// catchupResult holds phase 1: the two backlog parts and, per part and
// start mode, the no-op reader's and the pipeline's runs.
type catchupResult struct {
	single, batched backlogPart
	runs            map[string][]readerRun // key: part/mode/reader, e.g. "single/gtid/pipeline"; one per repetition
	verify          string
	profiles        []string // CPU profile of each pipeline run
	profile         string   // all of them merged
}

func runKey(part, mode, reader string) string { return part + "/" + mode + "/" + reader }

// modeStart is where a run of the given start mode begins: the file and
// offset only, or the GTID position only.
func modeStart(p canal.Position, mode string) canal.Position {
	if mode == "gtid" {
		return canal.Position{GTID: p.GTID}
	}
	return canal.Position{File: p.File, Pos: p.Pos}
}

func runCatchup(ctx context.Context, cfg config, e *env, log *slog.Logger) (*catchupResult, error) {
	res := &catchupResult{runs: map[string][]readerRun{}}
	profDir, err := os.MkdirTemp(e.dir, "prof-")
	if err != nil {
		return nil, err
	}

	log.Info("phase 1: CDC catch-up; writing the 1-row-transaction backlog", "rows", cfg.backlogSingle)
	if res.single, err = writeSingle(ctx, e, cfg.backlogSingle, log); err != nil {
		return nil, err
	}
	log.Info("backlog written", "rows", res.single.rows, "took", res.single.took.Round(1e6), "from", res.single.from.String(), "to", res.single.to.String())
	if err := res.measure(ctx, cfg, e, "single", res.single, false, profDir, log); err != nil {
		return nil, err
	}
	// The counters are now exact at the end of the first part: the start
	// state of every run over the second.
	if err := snapshotCounters(ctx, e); err != nil {
		return nil, err
	}

	log.Info("writing the batched backlog", "rows", cfg.backlogBatched, "rows_per_tx", cfg.txRows)
	if res.batched, err = writeBatched(ctx, e, cfg.backlogBatched, cfg.txRows, log); err != nil {
		return nil, err
	}
	log.Info("backlog written", "rows", res.batched.rows, "took", res.batched.took.Round(1e6), "from", res.batched.from.String(), "to", res.batched.to.String())
	if err := res.measure(ctx, cfg, e, "batched", res.batched, true, profDir, log); err != nil {
		return nil, err
	}
	if res.verify, err = verifyCounters(ctx, e); err != nil {
		return nil, err
	}
	log.Info("counters after the catch-up", "check", res.verify)

	res.profile = cfg.cpuprofile
	if err := os.MkdirAll(filepath.Dir(res.profile), 0o755); err != nil {
		return nil, err
	}
	if err := mergeProfiles(ctx, res.profile, res.profiles); err != nil {
		log.Warn("could not merge the CPU profiles", "err", err)
		res.profile = ""
	}
	return res, nil
}

// measure times, cfg.reps times, a no-op reader and then the pipeline over
// the part's binlog range in each start mode; the derived state is reset
// to the part's start before each pipeline run.
func (res *catchupResult) measure(ctx context.Context, cfg config, e *env, part string, p backlogPart, fromSnapshot bool, profDir string, log *slog.Logger) error {
	for rep := range cfg.reps {
		for _, mode := range cfg.modes {
			from := modeStart(p.from, mode)
			key := func(reader string) string { return runKey(part, mode, reader) }
			nr, err := timeNoop(ctx, e, []string{sourceRegex()}, from, p.to)
			if err != nil {
				return fmt.Errorf("%s/%s no-op reader: %w", part, mode, err)
			}
			res.runs[key("noop")] = append(res.runs[key("noop")], nr)
			log.Info("no-op canal reader", "part", part, "mode", mode, "rep", rep+1, "rows", nr.rows, "rows_per_s", int(nr.rate),
				"wall", nr.wall.Round(time.Millisecond), "cpu_per_row", nr.perRow)

			if err := resetState(ctx, e, p.from, fromSnapshot); err != nil {
				return err
			}
			prof := filepath.Join(profDir, fmt.Sprintf("%s-%s-%d.pprof", part, mode, rep))
			stopProf, err := startProfile(prof)
			if err != nil {
				return err
			}
			pr, err := timePipeline(ctx, cfg, e, from, p.to, log)
			stopProf()
			if err != nil {
				return fmt.Errorf("%s/%s pipeline: %w", part, mode, err)
			}
			res.profiles = append(res.profiles, prof)
			res.runs[key("pipeline")] = append(res.runs[key("pipeline")], pr)
			log.Info("couponlink pipeline", "part", part, "mode", mode, "rep", rep+1, "rows", pr.rows, "rows_per_s", int(pr.rate),
				"wall", pr.wall.Round(time.Millisecond), "cpu_per_row", pr.perRow, "apply_p50", pr.apply.P50, "ratio", fmt.Sprintf("%.2f", pr.rate/nr.rate))
			if nr.rows != int64(p.rows) || pr.rows != int64(p.rows) {
				log.Warn("a reader saw another number of rows than were written", "part", part, "mode", mode,
					"written", p.rows, "noop", nr.rows, "pipeline", pr.rows)
			}
		}
	}
	return nil
}

// median returns the run of median rate, the paired ratios
// pipeline/no-op of every repetition and their median.
func (res *catchupResult) median(part, mode string) (pipe, noop readerRun, ratios []float64, ratio float64) {
	ps, ns := res.runs[runKey(part, mode, "pipeline")], res.runs[runKey(part, mode, "noop")]
	for i := range min(len(ps), len(ns)) {
		ratios = append(ratios, ps[i].rate/ns[i].rate)
	}
	byRate := func(r readerRun) float64 { return r.rate }
	return medianBy(ps, byRate), medianBy(ns, byRate), ratios, medianOf(ratios)
}

func startProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("start CPU profile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// mergeProfiles writes the sum of the profiles to out (go tool pprof -proto).
func mergeProfiles(ctx context.Context, out string, in []string) error {
	if len(in) == 0 {
		return fmt.Errorf("no profiles")
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	cmd := exec.CommandContext(ctx, "go", append([]string{"tool", "pprof", "-proto"}, in...)...)
	var stderr strings.Builder
	cmd.Stdout, cmd.Stderr = f, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go tool pprof -proto: %w: %s", err, stderr.String())
	}
	return nil
}
