package main

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// smokeRows are the rows of a -smoke run (id | what | target), in order:
// every phase's report code must keep giving them.
const smokeRows = `1 | CDC catch-up, 1-row tx, start by file/offset (rows/s) | ≥ 0.95
1 | CDC catch-up, 1-row tx, start by GTID (rows/s) | ≥ 0.95
1 | CDC catch-up, 100-row tx, start by file/offset (rows/s) | ≥ 0.95
1 | CDC catch-up, 100-row tx, start by GTID (rows/s) | ≥ 0.95
1 | GTID start ÷ file/offset start, 1-row tx | report
1 | GTID start ÷ file/offset start, 100-row tx | report
1 | CDC catch-up, peer: go-mysql-transfer (binlog → Redis), whole backlog (rows/s) | report
1 | CDC catch-up, real ` + "`couponlink cdc`" + ` binary, whole backlog (rows/s) | ≥ 0.90
5 | Memory: ` + "`couponlink cdc`" + ` after the backlog | bounded
5 | Memory: ` + "`couponlink cdc`" + ` in steady state | bounded, not growing
2 | CDC lag commit → counters visible, 1000/s | p99 < 20 ms
2 | CDC lag commit → Redis key updated, 1000/s | p99 < 20 ms
3 | API claims/s, one hot template, one channel, combiner on | ≥ 1.00, p99 ≤ 50 ms
3 | API claims/s, one hot template, one channel, combiner off | report
3 | Claim transaction in raw SQL, one hot bucket | report
3 | API claims/s, one template, 40 channel buckets, combiner on | ≥ 1.00, p99 ≤ 50 ms
3 | API claims/s, one template, 40 channel buckets, combiner off | report
3 | Claim transaction in raw SQL, 40 buckets | report
4 | API redemptions/s, combiner on | ≥ 1.00, p99 ≤ 50 ms
4 | API redemptions/s, combiner off | report
2 | CDC lag commit → counters visible, at the combined API hot-bucket load (1500 claims/s) | report
6 | Reconcile pass over 10,000 user coupons (100 templates × 10 channels), median of 1 | linear in rows
6 | Reconcile pass over 50,000 user coupons (100 templates × 10 channels), median of 1 | linear in rows
6 | Reconcile growth 10,000 → 50,000 coupons (×5 rows) | ≤ 1 (linear or better)
7 | CDC catch-up, 2 sources in parallel vs 1 (2,000 rows) | report (%d cores: the cdcs, MariaDB and the servers share them)
7 | 1 source (one): cdc vs no-op reader | report
7 | source a: cdc vs no-op reader | report
7 | source b: cdc vs no-op reader | report
7 | 1 source: ` + "`couponlink cdc`" + ` CPU in steady state, 1-row transactions at 1000/s | report
7 | ` + "`couponlink cdc`" + ` start-up, 8 vs 4 shard tables | report`

// TestEveryRow builds the report of a -smoke run from made-up results and
// compares its rows with smokeRows.
func TestEveryRow(t *testing.T) {
	cfg, _, err := parseConfig(t, "-repo", "/r", "-smoke")
	if err != nil {
		t.Fatal(err)
	}
	run := readerRun{rows: 2000, rate: 10_000, wall: time.Second, perRow: time.Microsecond}
	cu := &catchupResult{runs: map[string][]readerRun{}, verify: "ok"}
	for _, part := range []string{"single", "batched"} {
		for _, mode := range cfg.modes {
			for _, reader := range []string{"noop", "pipeline"} {
				cu.runs[runKey(part, mode, reader)] = []readerRun{run}
			}
		}
	}
	ok := loadResult{Ops: 100, All: 120, Took: time.Second}
	pair := combinedRun{on: ok, off: ok, multi: ok, groups: 10, requests: 40, multiRows: 4}
	commits := make([]commit, 1500)
	var r Report
	r.catchup(*cfg, cu)
	r.peer(*cfg, nil)
	r.memory(*cfg, memResult{cdcRun: cdcRun{rows: 4000, took: time.Second}, noop: run})
	r.lag(*cfg, []lagResult{{target: 1000}}, "ok")
	r.api(*cfg, apiResult{ceilBefore: ok, ceilAfter: ok, hot: pair, buckets: pair, redeem: pair, rawHot: ok, rawBuckets: ok,
		lag: &lagResult{target: 1500, load: pacedLoad{commits: commits, took: time.Second}}})
	r.reconcile(*cfg, []recStep{{rows: 10_000, passes: [][]recPass{{{took: time.Second}}}}, {rows: 50_000, passes: [][]recPass{{{took: 4 * time.Second}}}}})
	r.sources(*cfg, &sourcesResult{rows: 2000, per: 100, reps: []sourcesRep{{oneWall: 2 * time.Second, twoWall: time.Second,
		cdcs: []srcCDC{{name: "one"}, {name: "a"}, {name: "b"}}}}, shards: []shardStarts{{shards: 4}, {shards: 8}},
		steady: sourceSteady{wanted: 1000}})
	var got []string
	for _, row := range r.Rows {
		got = append(got, row.ID+" | "+row.What+" | "+row.Target)
		if row.Ours == "" || row.Settings == "" || row.Ratio == "" || strings.Contains(row.Settings, "%!") {
			t.Errorf("row %q: empty column or bad format in %+v", row.What, row)
		}
	}
	want := strings.Split(fmt.Sprintf(smokeRows, runtime.NumCPU()), "\n")
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(r.Failures) != 0 {
		t.Errorf("failures %q", r.Failures)
	}
}
