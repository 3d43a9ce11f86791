package main

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestFormats(t *testing.T) {
	for got, want := range map[string]string{
		rate(9_999, "rows/s"):          "9999 rows/s",
		rate(12_345, "rows/s"):         "12.3k rows/s",
		count(0):                       "0",
		count(999):                     "999",
		count(1_000):                   "1,000",
		count(12_345_678):              "12,345,678",
		msStr(1500 * time.Microsecond): "1.50 ms",
		sec(2500 * time.Millisecond):   "2.50 s",
		us(1500 * time.Nanosecond):     "1.5 µs",
		mib(3 << 19):                   "1.5 MiB",
		lat(latStats{P50: msD(1), P99: msD(2), Max: msD(3)}):        "p50 1.00 ms, p99 2.00 ms, max 3.00 ms",
		floats([]float64{1, 2.345}, "%.2f"):                         "1.00, 2.35",
		floats(nil, "%.2f"):                                         "",
		durs([]time.Duration{time.Second, 1500 * time.Millisecond}): "1.00 s, 1.50 s",
		rates([]readerRun{{rate: 12_000}, {rate: 8_400}}):           "12k, 8k",
		firstErr(loadResult{FirstErr: "boom"}):                      " (first: boom)",
		firstErr(loadResult{}):                                      "",
	} {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
	if ms(1500*time.Microsecond) != 1.5 || medianCPU([]readerRun{{perRow: 3}, {perRow: 1}}) != 2 {
		t.Error("ms, medianCPU")
	}
}

func TestReportAdd(t *testing.T) {
	var r Report
	r.add(Row{ID: "1", OursNum: 3, PeerNum: 4})
	r.add(Row{ID: "2", OursNum: 3})
	r.add(Row{ID: "3", OursNum: 3, PeerNum: 4, Ratio: "given"})
	r.placeholder("4", "what", "why")
	if r.Rows[0].Ratio != "0.75" || r.Rows[0].RatioNum != 0.75 || r.Rows[1].Ratio != "—" || r.Rows[2].Ratio != "given" ||
		r.Rows[3].Ours != "why" || r.Rows[3].Settings != "—" {
		t.Errorf("rows %+v", r.Rows)
	}
	r.check("after x", "counters = GROUP BY")
	r.check("after y", "MISMATCH in 2 places")
	if !slices.Equal(r.Failures, []string{"after y: MISMATCH in 2 places"}) {
		t.Errorf("failures %q", r.Failures)
	}
}

func TestMarkdown(t *testing.T) {
	r := Report{Started: "then", Duration: "1s", Machine: map[string]string{"cpu": "2 cores", "go": "go1"},
		Rows: []Row{{ID: "1", What: "w", Ours: "o", Peer: "p", Ratio: "0.5", Target: "t", Settings: "a | b"}}, Notes: []string{"n"},
		Failures: []string{"f"}}
	got := r.markdown()
	for _, want := range []string{"## couponlink benchmark, then (took 1s)\n\n- cpu: 2 cores\n- go: go1\n",
		"| 1 | w | o | p | 0.5 | t | a / b |\n", "\nn\n", "**FAILED CHECK**: f"} {
		if !strings.Contains(got, want) {
			t.Errorf("markdown lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "CPU profile") {
		t.Error("a profile section without a profile")
	}
}

func TestLoadErrors(t *testing.T) {
	ok := loadResult{Ops: 1}
	a := apiResult{ceilBefore: ok, ceilAfter: ok, rawHot: ok, rawBuckets: ok,
		hot: combinedRun{on: ok, off: ok, multi: ok}, buckets: combinedRun{on: ok, off: ok, multi: ok}, redeem: combinedRun{on: ok, off: ok, multi: ok}}
	var r Report
	r.loadErrors([]lagResult{{target: 1000}}, a)
	if len(r.Failures) != 0 {
		t.Fatalf("clean runs failed: %q", r.Failures)
	}
	a.redeem.off = loadResult{Errors: 2, FirstErr: "boom"}
	a.lag = &lagResult{target: 77, missing: 3}
	r.loadErrors([]lagResult{{target: 1000, load: pacedLoad{errors: 1}}}, a)
	want := []string{"lag at 1000/s: 1 claims failed (first: <nil>)", "lag at 77/s: 3 commits never seen by the pipeline or the reader",
		"API redemptions, combiner off: 2 errors (first: boom)", "API redemptions, combiner off: no operation completed"}
	slices.Sort(want)
	slices.Sort(r.Failures)
	if !slices.Equal(r.Failures, want) {
		t.Errorf("failures\n%q\nwant\n%q", r.Failures, want)
	}
}

func TestLagSeen(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	s := &lagSeen{pipe: map[int64]pipeSeen{1: {at(110), at(112)}, 2: {at(1205), at(1210)}, 3: {at(1300), at(1301)}},
		noop: map[int64]time.Time{1: at(101), 2: at(1199), 3: at(1302)}}
	res := lagResult{warm: time.Second, load: pacedLoad{start: t0, commits: []commit{{1, at(100)}, {2, at(1200)}, {3, at(1290)}, {4, at(1400)}}}}
	s.lags(&res)
	if res.missing != 1 || res.counter.N != 2 || res.counter.P50 != msD(5) || res.counter.Max != msD(10) ||
		res.redis.Max != msD(11) || res.noop.Negative != 1 || res.noop.Max != msD(12) {
		t.Errorf("lags: missing %d, counter %+v, redis %+v, noop %+v", res.missing, res.counter, res.redis, res.noop)
	}
	if s.showedAll(res.load.commits) || !s.showedAll(res.load.commits[:3]) {
		t.Error("showedAll")
	}
}
