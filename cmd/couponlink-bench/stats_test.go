package main

import (
	"context"
	"errors"
	"testing"
	"time"
)

func msD(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }

func TestSummarize(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []time.Duration
		want latStats
	}{
		{"none", nil, latStats{}},
		{"one", []time.Duration{msD(3)}, latStats{N: 1, P50: msD(3), P99: msD(3), Max: msD(3)}},
		{"negatives clamped", []time.Duration{msD(-1), msD(2), msD(-3), msD(4)},
			latStats{N: 4, P50: 0, P99: msD(4), Max: msD(4), Negative: 2}},
		{"unsorted", []time.Duration{msD(5), msD(1), msD(3)}, latStats{N: 3, P50: msD(3), P99: msD(5), Max: msD(5)}},
	} {
		if got := summarize(tc.in); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestPct(t *testing.T) {
	ds := make([]time.Duration, 1000)
	for i := range ds {
		ds[i] = time.Duration(i+1) * time.Millisecond
	}
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{{0.50, msD(500)}, {0.99, msD(990)}, {1, msD(1000)}, {0, msD(1)}, {0.001, msD(1)}} {
		if got := pct(ds, tc.p); got != tc.want {
			t.Errorf("pct(%v) = %v, want %v", tc.p, got, tc.want)
		}
	}
	if got := pct([]time.Duration{msD(1), msD(2)}, 0.99); got != msD(2) {
		t.Errorf("p99 of two: %v", got)
	}
}

func TestMedians(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{3, 1, 2}, 2}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := medianOf(tc.in); got != tc.want {
			t.Errorf("medianOf(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
	in := []float64{4, 1, 3, 2}
	medianOf(in)
	if in[0] != 4 {
		t.Error("medianOf sorted its argument")
	}
	runs := []readerRun{{rows: 1, rate: 30}, {rows: 2, rate: 10}, {rows: 3, rate: 20}, {rows: 4, rate: 40}}
	if got := medianBy(runs, func(r readerRun) float64 { return r.rate }); got.rows != 1 {
		t.Errorf("medianBy of an even count: run %d, want the upper middle (1, rate 30)", got.rows)
	}
	if got := medianBy(runs[:3], func(r readerRun) float64 { return r.rate }); got.rows != 3 {
		t.Errorf("medianBy: run %d, want 3", got.rows)
	}
	if got := medianBy([]readerRun(nil), func(r readerRun) float64 { return r.rate }); got.rows != 0 {
		t.Errorf("medianBy of nothing: %+v", got)
	}
	s := shardStarts{startups: []time.Duration{msD(9), msD(1), msD(5)}}
	if s.startup() != msD(5) || (shardStarts{}).startup() != 0 {
		t.Errorf("shard start-up median %v", s.startup())
	}
}

func TestPerRowAndRatios(t *testing.T) {
	if perRow(time.Second, 4) != 250*time.Millisecond || perRow(time.Second, 0) != 0 || perRow(time.Second, int64(-1)) != 0 {
		t.Error("perRow")
	}
	if ratioDur(msD(3), msD(2)) != 1.5 || ratioDur(msD(3), 0) != 0 {
		t.Error("ratioDur")
	}
	if coresOver(2*time.Second, 4*time.Second) != 0.5 {
		t.Error("coresOver")
	}
	c := combinedRun{groups: 4, requests: 10, multiRows: 3, multi: loadResult{Ops: 20, Took: 2 * time.Second}}
	if c.groupSize() != 2.5 || c.multiRowRate() != 30 || (combinedRun{}).groupSize() != 0 {
		t.Errorf("combined run: group size %v, multi-row rate %v", c.groupSize(), c.multiRowRate())
	}
	if (loadResult{Ops: 5}).rate() != 0 || (loadResult{Ops: 5, Took: 500 * time.Millisecond}).rate() != 10 {
		t.Error("loadResult.rate")
	}
	a := apiResult{ceilBefore: loadResult{Ops: 10, Took: time.Second}, ceilAfter: loadResult{Ops: 30, Took: time.Second}}
	if a.ceiling() != 20 {
		t.Errorf("ceiling %v, want the mean of before and after", a.ceiling())
	}
	r := sourcesResult{reps: []sourcesRep{{oneWall: 4 * time.Second, twoWall: 2 * time.Second}, {oneWall: 3 * time.Second, twoWall: 3 * time.Second},
		{oneWall: 6 * time.Second, twoWall: 2 * time.Second}}}
	m, ratios := r.medianRep()
	if m.ratio() != 2 || len(ratios) != 3 || ratios[2] != 3 {
		t.Errorf("medianRep %v, ratios %v", m.ratio(), ratios)
	}
}

func TestPoll(t *testing.T) {
	ctx := context.Background()
	n := 0
	if err := poll(ctx, time.Millisecond, time.Minute, func() (bool, error) { n++; return n == 3, nil }); err != nil || n != 3 {
		t.Errorf("poll until done: %v after %d calls", err, n)
	}
	boom := errors.New("boom")
	if err := poll(ctx, time.Millisecond, time.Minute, func() (bool, error) { return false, boom }); err != boom {
		t.Errorf("poll's error: %v", err)
	}
	if err := poll(ctx, time.Millisecond, 5*time.Millisecond, func() (bool, error) { return false, nil }); err != errTimedOut {
		t.Errorf("poll past its limit: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := poll(cctx, time.Millisecond, time.Minute, func() (bool, error) { return false, nil }); err != context.Canceled {
		t.Errorf("poll of a cancelled context: %v", err)
	}
}
