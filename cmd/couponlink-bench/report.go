package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"time"
)

// Row is one line of the table.
type Row struct {
	ID       string  `json:"id"`
	What     string  `json:"what"`
	Ours     string  `json:"couponlink"`
	Peer     string  `json:"ceiling_or_peer"`
	Ratio    string  `json:"ratio"`
	Target   string  `json:"target"`
	Settings string  `json:"settings"`
	OursNum  float64 `json:"couponlink_value,omitempty"`
	PeerNum  float64 `json:"ceiling_value,omitempty"`
	RatioNum float64 `json:"ratio_value,omitempty"`
}

// Report is the whole result, written as JSON and Markdown.
type Report struct {
	Started  string            `json:"started"`
	Duration string            `json:"duration"`
	Machine  map[string]string `json:"machine"`
	Rows     []Row             `json:"rows"`
	Notes    []string          `json:"notes"`
	Failures []string          `json:"failures,omitempty"`
	Profile  struct {
		Path string   `json:"path"`
		Flat []string `json:"top_flat"`
		Cum  []string `json:"top_cum"`
		Sink []string `json:"top_cum_sink"`
	} `json:"cpu_profile"`
	APIProfile struct {
		Path string   `json:"path"`
		Flat []string `json:"top_flat"`
		Cum  []string `json:"top_cum"`
	} `json:"api_cpu_profile"`
}

func newReport(cfg config, e *env) *Report {
	r := &Report{Started: time.Now().Format(time.RFC3339), Machine: map[string]string{}}
	for k, v := range e.info {
		r.Machine[k] = v
	}
	r.Machine["cpu"] = fmt.Sprintf("%d cores (%s)", runtime.NumCPU(), cpuModel())
	r.Machine["go"] = runtime.Version()
	r.Machine["couponlink settings"] = fmt.Sprintf("%s; extra DSN parameters: %q", cfg.cdcSettings(), cfg.dsnParams)
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/go-mysql-org/go-mysql" {
				r.Machine["go-mysql"] = d.Version
			}
		}
	}
	if out, err := exec.Command("git", "-C", cfg.repo, "rev-parse", "--short", "HEAD").Output(); err == nil {
		rev := strings.TrimSpace(string(out))
		if st, err := exec.Command("git", "-C", cfg.repo, "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
			rev += " + uncommitted changes"
		}
		r.Machine["commit"] = rev
	}
	return r
}

func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for line := range strings.SplitSeq(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

func (r *Report) add(row Row) {
	if row.Ratio == "" {
		if row.PeerNum > 0 && row.OursNum > 0 {
			row.RatioNum = row.OursNum / row.PeerNum
			row.Ratio = fmt.Sprintf("%.2f", row.RatioNum)
		} else {
			row.Ratio = "—"
		}
	}
	r.Rows = append(r.Rows, row)
}

func (r *Report) placeholder(id, what, why string) {
	r.add(Row{ID: id, What: what, Ours: why, Peer: "—", Ratio: "—", Target: "—", Settings: "—"})
}

var modeName = map[string]string{"file": "file/offset", "gtid": "GTID"}

func (r *Report) catchup(cfg config, cu *catchupResult) {
	parts := []struct {
		key, label string
		p          backlogPart
	}{{"single", "1-row tx", cu.single}, {"batched", fmt.Sprintf("%d-row tx", cfg.txRows), cu.batched}}
	for _, pt := range parts {
		for _, mode := range cfg.modes {
			pr, nr, ratios, ratio := cu.median(pt.key, mode)
			r.add(Row{ID: "1", What: fmt.Sprintf("CDC catch-up, %s, start by %s (rows/s)", pt.label, modeName[mode]),
				Ours: rate(pr.rate, "rows/s"), Peer: rate(nr.rate, "rows/s") + " (no-op go-mysql canal)",
				OursNum: pr.rate, PeerNum: nr.rate, RatioNum: ratio, Ratio: fmt.Sprintf("%.2f", ratio), Target: "≥ 0.95",
				Settings: fmt.Sprintf("%s row changes (%s) of user_coupon written with no reader running, %s by %d writers; binlog %s → %s; "+
					"pipeline = canal.Tailer (%s) + sink.Sink (counter deltas + checkpoint in one MySQL tx, Redis owner mode); "+
					"%d repetitions, no-op and pipeline alternating: rates are medians, ratio the median of the paired ratios %s (pipeline %s; no-op %s); "+
					"rate from the first batch (pipeline, its %d rows left out) or first row (no-op) to the end; median runs: rows seen %s / %s, "+
					"wall incl. connect %s / %s; CPU per row, bench process (pipeline / no-op): %s / %s, MariaDB: %s / %s; "+
					"pipeline: %d batches, sink.ApplyBatch p50 %s, p99 %s (until its Redis write: p50 %s, p99 %s; Redis write: p50 %s, p99 %s), inside ApplyBatch %.0f%% of the run; server commands per batch: %s; the sink's SQL: %s",
					count(int64(pt.p.rows)), backlogMix, pt.label, pt.p.writers, pt.p.from, pt.p.to, cfg.cdcSettings(),
					len(ratios), floats(ratios, "%.2f"), rates(cu.runs[runKey(pt.key, mode, "pipeline")]), rates(cu.runs[runKey(pt.key, mode, "noop")]),
					pr.skipped, count(pr.rows), count(nr.rows), sec(pr.wall), sec(nr.wall), us(pr.perRow), us(nr.perRow),
					us(pr.dbPerRow), us(nr.dbPerRow), pr.batches, msStr(pr.apply.P50), msStr(pr.apply.P99), msStr(pr.applyMySQL.P50), msStr(pr.applyMySQL.P99),
					msStr(pr.applyRedis.P50), msStr(pr.applyRedis.P99), 100*pr.applyBusy, pr.perBatch, pr.sqlTimes),
			})
		}
	}
	if len(cfg.modes) == 2 {
		for _, pt := range parts {
			pf, nf, _, _ := cu.median(pt.key, "file")
			pg, ng, _, _ := cu.median(pt.key, "gtid")
			cpu := func(mode, reader string) time.Duration { return medianCPU(cu.runs[runKey(pt.key, mode, reader)]) }
			pcf, pcg, ncf, ncg := cpu("file", "pipeline"), cpu("gtid", "pipeline"), cpu("file", "noop"), cpu("gtid", "noop")
			r.add(Row{ID: "1", What: fmt.Sprintf("GTID start ÷ file/offset start, %s", pt.label),
				Ours: fmt.Sprintf("CPU per row ×%.2f, rows/s ×%.2f (pipeline)", float64(pcg)/float64(pcf), pg.rate/pf.rate),
				Peer: fmt.Sprintf("CPU per row ×%.2f, rows/s ×%.2f (no-op canal)", float64(ncg)/float64(ncf), ng.rate/nf.rate), Ratio: "—",
				Target: "report", Settings: fmt.Sprintf("the runs above (medians); CPU per row of this process GTID / file: pipeline %s / %s, no-op %s / %s; "+
					"on a busy machine the CPU per row is the steadier figure", us(pcg), us(pcf), us(ncg), us(ncf))})
		}
	}
	r.Notes = append(r.Notes, "After the catch-up runs: "+cu.verify)
}

func medianCPU(rs []readerRun) time.Duration {
	return time.Duration(medianOf(mapped(rs, func(r readerRun) float64 { return float64(r.perRow) })))
}

func rates(rs []readerRun) string {
	return floats(mapped(rs, func(r readerRun) float64 { return r.rate / 1000 }), "%.0fk")
}

func floats(xs []float64, f string) string {
	return strings.Join(mapped(xs, func(x float64) string { return fmt.Sprintf(f, x) }), ", ")
}

func (r *Report) memory(cfg config, m memResult) {
	noop := m.noop.rate
	r.add(Row{ID: "1", What: "CDC catch-up, real `couponlink cdc` binary, whole backlog (rows/s)",
		Ours: rate(m.rate(), "rows/s"), Peer: rate(noop, "rows/s") + " (no-op canal by file/offset over the same range, just before)",
		OursNum: m.rate(), PeerNum: noop, Target: "≥ 0.90",
		Settings: fmt.Sprintf("%s rows (no-op: %s, wall incl. connect %s) from a checkpoint at the start of the backlog; the range also holds the catch-up runs' own counter transactions; the binary started by %s (its log); "+
			"time from process start (incl. leader lock, Redis rebuild) to checkpoint ≥ end: %s, of which %s before its \"tailing the binlog\" log line "+
			"(from that line on: %s, ratio %.2f); %s; its CPU profile: %s", count(m.rows), count(m.noop.rows), sec(m.noop.wall), modeName[m.mode], sec(m.took), sec(m.startup), rate(m.streamRate(), "rows/s"), m.streamRate()/noop, cfg.cdcSettings(), m.profile)})
	r.add(Row{ID: "5", What: "Memory: `couponlink cdc` after the backlog", Ours: fmt.Sprintf("VmRSS %s (VmHWM %s)", mib(m.rss), mib(m.hwm)),
		Peer: "—", Ratio: "—", Target: "bounded",
		Settings: fmt.Sprintf("/proc/<pid>/status when its checkpoint reached the end of the %s-row backlog", count(m.rows))})
	r.add(Row{ID: "5", What: "Memory: `couponlink cdc` in steady state", Ours: fmt.Sprintf("VmRSS at the end %s (max %s; VmHWM %s)", mib(m.rssSteadyLast), mib(m.rssSteadyMax), mib(m.hwmEnd)),
		Peer: fmt.Sprintf("VmRSS %s after the backlog", mib(m.rss)), OursNum: float64(m.rssSteadyLast), PeerNum: float64(m.rss), Target: "bounded, not growing",
		Settings: fmt.Sprintf("sampled every 250 ms over %s of claims at %.0f/s (coupon.Store.Claim, 40 buckets), starting right after the catch-up (the max includes the catch-up's heap not yet returned)", cfg.steadyDuration, m.steady.rate())})
}

func (r *Report) lag(cfg config, lags []lagResult, verify string) {
	for _, l := range lags {
		set := fmt.Sprintf("%s, 40 buckets, %d writers (as many MySQL connections); "+
			"achieved %.0f/s (target %d) for %s, %d errors; %d samples after a %s warm-up, %d never shown; %s; pipeline in-process, resumed from its checkpoint %s, "+
			"times taken when sink.ApplyBatch's MySQL COMMIT had returned (start of its Redis write) and when its Redis write ended; "+
			"no-op canal reader beside it in the same process, time taken at the transaction's XID (%d of its samples came before the client's COMMIT returned: counted as 0); "+
			"commit time = client's return from COMMIT; pipeline: %d batches of %.1f rows on average (%s), sink.ApplyBatch p50 %s, p99 %s (until its Redis write: p50 %s, p99 %s; Redis write: p50 %s, p99 %s); the sink's SQL: %s; "+
			"CPU cores used during the load: bench process (writers + pipeline + no-op reader) %.2f, MariaDB %.2f",
			lagLoadText(cfg.lagLoad, cfg.lagTxRows), cfg.lagWriters(l.target), l.load.rate(), l.target, cfg.lagDuration, l.load.errors, l.counter.N, l.warm, l.missing, l.cpuText(), l.startPos, l.noop.Negative,
			l.batches, l.rowsPerBatch, cfg.cdcSettings(), msStr(l.apply.P50), msStr(l.apply.P99), msStr(l.applyMySQL.P50), msStr(l.applyMySQL.P99),
			msStr(l.applyRedis.P50), msStr(l.applyRedis.P99), l.sqlTimes, l.benchCores, l.dbCores)
		target := "p99 < 20 ms"
		if l.target != 1000 {
			target = "report"
		}
		r.add(lagRow(fmt.Sprintf("CDC lag commit → counters visible, %d/s", l.target), l.counter, l.noop, target, set))
		r.add(lagRow(fmt.Sprintf("CDC lag commit → Redis key updated, %d/s", l.target), l.redis, l.noop, target, "as above"))
	}
	r.Notes = append(r.Notes, "After the lag runs: "+verify)
}

// lagLoadText says what a source transaction of the lag runs was.
func lagLoadText(load string, txRows int) string {
	switch {
	case load == "claims":
		return "claims via coupon.Store.Claim (user_claim + user_coupon INSERT + channel_quota UPDATE per tx)"
	case txRows > 1:
		return fmt.Sprintf("%d-row source transactions (multi-row writers: one autocommit INSERT of %d user_coupon rows each; the rate counts rows)", txRows, txRows)
	}
	return "1-row source transactions (one autocommit INSERT of one user_coupon row each)"
}

// cpuText is the pipeline's CPU per row change and its batches per second.
func (l lagResult) cpuText() string {
	if l.rows == 0 {
		return "no rows applied"
	}
	return fmt.Sprintf("cdc CPU per row change %s (the pipeline's goroutines in the run's CPU profile, %s over %s row changes; no-op reader %s per row; GC workers in neither), "+
		"%.0f sink batches/s of %.1f row changes on average", us(perRow(l.cdcCPU, l.rows)), sec(l.cdcCPU), count(l.rows), us(perRow(l.noopCPU, l.rows)),
		float64(l.batches)/l.load.took.Seconds(), l.rowsPerBatch)
}

// lagRow is a row 2: a lag of the pipeline against the no-op reader's.
func lagRow(what string, ours, noop latStats, target, settings string) Row {
	return Row{ID: "2", What: what, Ours: lat(ours), Peer: lat(noop) + " (no-op canal)", Ratio: fmt.Sprintf("p99 %.1f×", ratioDur(ours.P99, noop.P99)),
		OursNum: ms(ours.P99), PeerNum: ms(noop.P99), Target: target, Settings: settings}
}

func (r *Report) api(cfg config, a apiResult) {
	ceil := fmt.Sprintf("%s (bare INSERT autocommit, p50 %s, p99 %s)", rate(a.ceiling(), "tx/s"), msStr(a.ceilBefore.Lat.P50), msStr(a.ceilBefore.Lat.P99))
	apiDesc := fmt.Sprintf("`couponlink api` binary (-mysql-conns 64, expiry sweep off), %d closed-loop HTTP/1.1 keep-alive clients (MaxIdleConnsPerHost %d); ",
		cfg.clients, 2*cfg.clients)
	ceilDesc := fmt.Sprintf("%s per run after a warm-up; ceiling: single-row autocommit INSERTs (interpolated parameters: one round trip) into a copy of user_coupon "+
		"(same indexes) from %d connections, same server, before %s / after %s, %s",
		cfg.apiDuration, cfg.clients, rate(a.ceilBefore.rate(), "tx/s"), rate(a.ceilAfter.rate(), "tx/s"), a.ceilBefore.Cost)
	row := func(what string, l loadResult, unit, target, extra string) *Row {
		set := fmt.Sprintf("%s; %d ok, %d errors%s; measured: %s; %s", extra, l.Ops, l.Errors, firstErr(l), l.Cost, ceilDesc)
		ours := fmt.Sprintf("%s (p50 %s, p99 %s)", rate(l.rate(), unit), msStr(l.Lat.P50), msStr(l.Lat.P99))
		if !strings.Contains(what, "raw SQL") {
			set = apiDesc + set
			ours = fmt.Sprintf("%s (p50 %s, p99 %s; api CPU %s/op)", rate(l.rate(), unit), msStr(l.Lat.P50), msStr(l.Lat.P99), us(l.Per.API))
		}
		r.add(Row{ID: what[:1], What: what[2:], Ours: ours, Peer: ceil, OursNum: l.rate(), PeerNum: a.ceiling(), Target: target, Settings: set})
		return &r.Rows[len(r.Rows)-1]
	}
	vsRaw := func(api loadResult, raw loadResult) string {
		return fmt.Sprintf("the same claim transaction in raw SQL (the row below) runs %s, so the API reaches %.2f of it", rate(raw.rate(), "tx/s"), api.rate()/raw.rate())
	}
	rawSet := fmt.Sprintf("coupon.Store.Claim's statements sent directly (BEGIN; INSERT user_claim … ON DUPLICATE KEY UPDATE; INSERT user_coupon; "+
		"UPDATE channel_quota … WHERE claimed < quota; COMMIT) from %d connections, closed loop, no HTTP and no Go service between", cfg.clients)
	pair := func(id, what string, c combinedRun, unit, extra string, raw *loadResult) {
		on := row(id+" "+what+", combiner on", c.on, unit, "≥ 1.00, p99 ≤ 50 ms", fmt.Sprintf("-combine-claims and -combine-redemptions on (the default): "+
			"%.0f groups, %.1f requests per group (couponlink_api_*_group_size); multi-row ceiling: %d-row autocommit INSERTs, same table and connections: %s "+
			"(%s statements/s, p50 %s, p99 %s); %s", c.groups, c.groupSize(), c.multiRows, rate(c.multiRowRate(), "rows/s"), fmt.Sprintf("%.0f", c.multi.rate()),
			msStr(c.multi.Lat.P50), msStr(c.multi.Lat.P99), extra))
		on.Peer += fmt.Sprintf("; %s (bare %d-row INSERT autocommit, the mean group size)", rate(c.multiRowRate(), "rows/s"), c.multiRows)
		on.Ratio = fmt.Sprintf("%.2f (single-row) / %.2f (%d-row)", on.RatioNum, c.on.rate()/c.multiRowRate(), c.multiRows)
		extraOff := extra
		if raw != nil {
			extraOff = vsRaw(c.off, *raw) + "; " + extra
		}
		off := row(id+" "+what+", combiner off", c.off, unit, "report", "-combine-claims=false -combine-redemptions=false: one transaction per request; "+extraOff)
		off.Ratio = fmt.Sprintf("%.2f (single-row); on ÷ off %.2f", off.RatioNum, c.on.rate()/c.off.rate())
	}
	pair("3", "API claims/s, one hot template, one channel", a.hot, "claims/s", "one channel_quota row takes every claim", &a.rawHot)
	row("3 Claim transaction in raw SQL, one hot bucket", a.rawHot, "tx/s", "report", rawSet)
	pair("3", "API claims/s, one template, 40 channel buckets", a.buckets, "claims/s", "channel = (client·7 + i) mod 40", &a.rawBuckets)
	row("3 Claim transaction in raw SQL, 40 buckets", a.rawBuckets, "tx/s", "report", rawSet)
	pair("4", "API redemptions/s", a.redeem, "redemptions/s",
		fmt.Sprintf("POST /v1/redemptions over %s distinct AVAILABLE coupons per run (redemption_log INSERT + user_coupon UPDATE per redemption)",
			count(int64(a.poolSize))), nil)
	if p := a.pinned; p != nil {
		pr := row("3 API claims/s, one hot template, one channel, combiner on, pinned: MariaDB on CPU 0, the api and the load generator on CPU 1", p.hot, "claims/s",
			"≥ 1.00", fmt.Sprintf("taskset -a -p: MariaDB (its pid file) alone on CPU 0, the combining api and this process (the load generator) on CPU 1, "+
				"the closest a 2-core machine gets to the database on its own cores; ceiling measured the same way (pinned, same run): %s (p50 %s, p99 %s), %s",
				rate(p.ceiling.rate(), "tx/s"), msStr(p.ceiling.Lat.P50), msStr(p.ceiling.Lat.P99), p.ceiling.Cost))
		pr.Peer = fmt.Sprintf("%s (bare INSERT autocommit, pinned the same way)", rate(p.ceiling.rate(), "tx/s"))
		pr.PeerNum = p.ceiling.rate()
		pr.RatioNum = p.hot.rate() / p.ceiling.rate()
		pr.Ratio = fmt.Sprintf("%.2f", pr.RatioNum)
	}
	multi := func(c combinedRun) namedRun {
		return namedRun{fmt.Sprintf("%d-row INSERT ceiling (the mean group), per row", c.multiRows), c.multi, c.multiRows}
	}
	runs := []namedRun{{"INSERT ceiling, before", a.ceilBefore, 0}, multi(a.hot), {"claims, hot bucket, combiner on", a.hot.on, 0}, {"claims, hot bucket, combiner off", a.hot.off, 0},
		{"HTTP floor: net/http and encoding/json answer the hot-bucket claims, no database (api CPU = the floor server's)", a.floor, 0},
		{"claim transaction in raw SQL, hot bucket", a.rawHot, 0}, {"claims, 40 buckets, combiner on", a.buckets.on, 0}, {"claims, 40 buckets, combiner off", a.buckets.off, 0},
		{"claim transaction in raw SQL, 40 buckets", a.rawBuckets, 0}, multi(a.redeem), {"redemptions, combiner on", a.redeem.on, 0}, {"redemptions, combiner off", a.redeem.off, 0},
		{"INSERT ceiling, after", a.ceilAfter, 0}}
	if p := a.pinned; p != nil {
		runs = append(runs, namedRun{"INSERT ceiling, pinned", p.ceiling, 0}, namedRun{"claims, hot bucket, combiner on, pinned", p.hot, 0})
	}
	r.Notes = append(r.Notes, costTable(runs))
	if a.lag != nil {
		l := *a.lag
		l.target = 0
		set := fmt.Sprintf("the combined hot-bucket claim load above (%s claims/s through `couponlink api`, %d clients, %s, %d errors) while the phase-3 pipeline "+
			"(in process, resumed from its checkpoint) and no-op reader follow; %d samples after a %s warm-up, %d never shown; "+
			"pipeline: %d batches of %.1f rows on average, sink.ApplyBatch p50 %s, p99 %s; CPU cores during the load: bench process %.2f, MariaDB %.2f",
			fmt.Sprintf("%.0f", a.lag.load.rate()), cfg.clients, cfg.apiDuration, a.lag.load.errors, l.counter.N, l.warm, l.missing, l.batches, l.rowsPerBatch,
			msStr(l.apply.P50), msStr(l.apply.P99), l.benchCores, l.dbCores)
		r.add(lagRow(fmt.Sprintf("CDC lag commit → counters visible, at the combined API hot-bucket load (%.0f claims/s)", a.lag.load.rate()),
			l.counter, l.noop, "report", set))
	}
}

func firstErr(l loadResult) string {
	if l.FirstErr == "" {
		return ""
	}
	return " (first: " + l.FirstErr + ")"
}

// profile prints the top functions of the catch-up CPU profile.
func (r *Report) profile(ctx context.Context, cfg config, path string, log *slog.Logger) {
	if path == "" {
		return
	}
	r.Profile.Path = path
	r.Profile.Flat = pprofTop(ctx, path, log)
	r.Profile.Cum = pprofTop(ctx, path, log, "-cum")
	r.Profile.Sink = pprofTop(ctx, path, log, "-cum", "-focus=couponlink/couponlink/sink")
}

// apiProfile adds the top functions of the combining api's CPU profile
// under the hot-bucket load.
func (r *Report) apiProfile(ctx context.Context, path string, log *slog.Logger) {
	if path == "" {
		return
	}
	r.APIProfile.Path = path
	r.APIProfile.Flat = pprofTop(ctx, path, log, "-nodecount=20")
	r.APIProfile.Cum = pprofTop(ctx, path, log, "-cum", "-nodecount=30")
}

// pprofTop is `go tool pprof -top` of the profile at path (10 lines
// unless args say otherwise), without its header.
func pprofTop(ctx context.Context, path string, log *slog.Logger, args ...string) []string {
	out, err := exec.CommandContext(ctx, "go", append(append([]string{"tool", "pprof", "-top", "-nodecount=10"}, args...), path)...).Output()
	if err != nil {
		log.Warn("go tool pprof -top failed", "err", err)
		return nil
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	var keep []string
	for _, l := range lines { // drop the File/Type/Time header, keep the totals and the table
		if !strings.HasPrefix(l, "File:") && !strings.HasPrefix(l, "Build ID:") && !strings.HasPrefix(l, "Type:") &&
			!strings.HasPrefix(l, "Time:") && !strings.HasPrefix(l, "Duration:") {
			keep = append(keep, l)
		}
	}
	return keep
}

func (r *Report) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "## couponlink benchmark, %s (took %s)\n\n", r.Started, r.Duration)
	for _, k := range []string{"cpu", "mariadb", "durability", "binlog", "buffer_pool", "redis", "go", "go-mysql", "commit", "couponlink settings"} {
		if v := r.Machine[k]; v != "" {
			fmt.Fprintf(&b, "- %s: %s\n", k, v)
		}
	}
	b.WriteString("\n| # | what | couponlink | ceiling / peer | ratio | target | settings |\n|---|---|---|---|---|---|---|\n")
	for _, row := range r.Rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", row.ID, row.What, row.Ours, row.Peer, row.Ratio, row.Target,
			strings.ReplaceAll(row.Settings, "|", "/"))
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "\n%s\n", n)
	}
	for _, f := range r.Failures {
		fmt.Fprintf(&b, "\n**FAILED CHECK**: %s\n", f)
	}
	if r.Profile.Path != "" {
		fmt.Fprintf(&b, "\nCPU profile of the pipeline's catch-up runs (all parts and start modes, merged): `%s`\n\n"+
			"Top 10 by flat time (`go tool pprof -top`):\n\n```\n%s\n```\n\nTop 10 by cumulative time (`go tool pprof -top -cum`):\n\n```\n%s\n```\n\n"+
			"The sink's share (`go tool pprof -top -cum -focus=couponlink/couponlink/sink`):\n\n```\n%s\n```\n",
			r.Profile.Path, strings.Join(r.Profile.Flat, "\n"), strings.Join(r.Profile.Cum, "\n"), strings.Join(r.Profile.Sink, "\n"))
	}
	if r.APIProfile.Path != "" {
		fmt.Fprintf(&b, "\nCPU profile of the combining `couponlink api` under the hot-bucket load of the lag run (its -pprof endpoint): `%s`\n\n"+
			"Top 20 by flat time (`go tool pprof -top -nodecount=20`):\n\n```\n%s\n```\n\nTop 30 by cumulative time (`go tool pprof -top -cum -nodecount=30`):\n\n```\n%s\n```\n",
			r.APIProfile.Path, strings.Join(r.APIProfile.Flat, "\n"), strings.Join(r.APIProfile.Cum, "\n"))
	}
	return b.String()
}

func (r *Report) write(cfg config, log *slog.Logger) error {
	md := r.markdown()
	fmt.Println(md)
	if err := os.MkdirAll(cfg.out, 0o755); err != nil {
		return err
	}
	j, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	base := filepath.Join(cfg.out, cfg.stamp)
	if err := os.WriteFile(base+".json", j, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(base+".md", []byte(md), 0o644); err != nil {
		return err
	}
	log.Info("results written", "markdown", base+".md", "json", base+".json", "cpu_profile", r.Profile.Path)
	return nil
}

func rate(v float64, unit string) string {
	switch {
	case v >= 10_000:
		return fmt.Sprintf("%.1fk %s", v/1000, unit)
	default:
		return fmt.Sprintf("%.0f %s", v, unit)
	}
}

func count(n int64) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func lat(s latStats) string {
	return fmt.Sprintf("p50 %s, p99 %s, max %s", msStr(s.P50), msStr(s.P99), msStr(s.Max))
}

func ms(d time.Duration) float64   { return float64(d) / float64(time.Millisecond) }
func msStr(d time.Duration) string { return fmt.Sprintf("%.2f ms", ms(d)) }
func sec(d time.Duration) string   { return fmt.Sprintf("%.2f s", d.Seconds()) }
func us(d time.Duration) string    { return fmt.Sprintf("%.1f µs", float64(d)/float64(time.Microsecond)) }
func mib(n int64) string           { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// check records a failed correctness check (a verifyStore result that
// says MISMATCH).
func (r *Report) check(when, result string) {
	if strings.HasPrefix(result, "MISMATCH") {
		r.Failures = append(r.Failures, when+": "+result)
	}
}

// loadErrors records failed operations of the load runs (smoke mode: none
// may fail there).
func (r *Report) loadErrors(lags []lagResult, a apiResult) {
	if a.lag != nil {
		lags = append(lags, *a.lag)
	}
	for _, l := range lags {
		if l.load.errors > 0 {
			r.Failures = append(r.Failures, fmt.Sprintf("lag at %d/s: %d claims failed (first: %v)", l.target, l.load.errors, l.load.firstErr))
		}
		if l.missing > 0 {
			r.Failures = append(r.Failures, fmt.Sprintf("lag at %d/s: %d commits never seen by the pipeline or the reader", l.target, l.missing))
		}
	}
	for name, l := range map[string]loadResult{"INSERT ceiling before": a.ceilBefore, "INSERT ceiling after": a.ceilAfter,
		"API claims, hot bucket": a.hot.on, "API claims, 40 buckets": a.buckets.on, "API redemptions": a.redeem.on,
		"API claims, hot bucket, combiner off": a.hot.off, "API claims, 40 buckets, combiner off": a.buckets.off,
		"API redemptions, combiner off": a.redeem.off, "multi-row INSERT ceiling, hot bucket groups": a.hot.multi,
		"multi-row INSERT ceiling, 40-bucket groups": a.buckets.multi, "multi-row INSERT ceiling, redemption groups": a.redeem.multi,
		"raw SQL claims, hot bucket": a.rawHot, "raw SQL claims, 40 buckets": a.rawBuckets} {
		if l.Errors > 0 {
			r.Failures = append(r.Failures, fmt.Sprintf("%s: %d errors (first: %s)", name, l.Errors, l.FirstErr))
		}
		if l.Ops == 0 {
			r.Failures = append(r.Failures, name+": no operation completed")
		}
	}
}
