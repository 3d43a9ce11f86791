package main

import (
	"fmt"
	"runtime"
	"time"
)

// sources adds phase 6's rows: the two-source catch-up against the
// one-source one, and each source's cdc against a no-op reader of its
// range.
func (r *Report) sources(cfg config, s *sourcesResult) {
	if s == nil || len(s.reps) == 0 {
		return
	}
	m, ratios := s.medianRep()
	one, two := float64(s.rows)/m.oneWall.Seconds(), float64(s.rows)/m.twoWall.Seconds()
	noopTwo := float64(s.rows) / m.noopTwo.Seconds()
	o, a, b := &m.cdcs[0], &m.cdcs[1], &m.cdcs[2]
	var ones, twos []float64
	for _, rp := range s.reps {
		ones, twos = append(ones, float64(s.rows)/rp.oneWall.Seconds()/1000), append(twos, float64(s.rows)/rp.twoWall.Seconds()/1000)
	}
	r.add(Row{ID: "7", What: fmt.Sprintf("CDC catch-up, 2 sources in parallel vs 1 (%s rows)", count(int64(s.rows))),
		Ours: rate(two, "rows/s") + " (2 sources)", Peer: rate(one, "rows/s") + " (1 source)", OursNum: two, PeerNum: one,
		Ratio: fmt.Sprintf("%.2f", m.ratio()), RatioNum: m.ratio(),
		Target: fmt.Sprintf("report (%d cores: the cdcs, MariaDB and the servers share them)", runtime.NumCPU()),
		Settings: fmt.Sprintf("a legacy shop (4 tables user_coupon_{0..3} + template table, redemption_evidence none, Redis corrector mode) with %s row changes (%s) "+
			"in %d-row transactions by 8 writers: 1 source = all on server A (shop_one), written in %s; 2 sources = half on A (shop_a) and half on a second "+
			"private MariaDB B (shop_b, port %d), written in parallel in %s; each `couponlink cdc -mapping … -source NAME` bootstrapped and stopped before "+
			"its case's rows were written, so each reads only its own range; rows/s = %s / wall time from process start (the two: started together, until the "+
			"slower's checkpoint ≥ its end); %d repetitions (1 source, then 2), each over new backlogs: the ratio is the median of the paired ratios %s "+
			"(1 source %s rows/s; 2 sources %s), the figures are the median repetition's: 1 source %s, 2 sources %s (a %s, b %s); the two no-op readers started together over the same ranges: %s (%s); "+
			"CPU per row incl. start-up, cdc process: 1 source %s, a %s, b %s; MariaDB (both servers for 2): %s / %s; %s",
			count(int64(s.rows)), shopMix, s.per, sec(m.oneWrite), s.bPort, sec(m.twoWrite), count(int64(s.rows)), len(s.reps), floats(ratios, "%.2f"),
			floats(ones, "%.0fk"), floats(twos, "%.0fk"), sec(m.oneWall), sec(m.twoWall),
			sec(a.took), sec(b.took), sec(m.noopTwo), rate(noopTwo, "rows/s"), us(o.cpuPerRow()), us(a.cpuPerRow()), us(b.cpuPerRow()),
			us(perRow(m.dbOne, s.rows)), us(perRow(m.dbTwo, s.rows)), cfg.cdcSettings()),
	})
	for i := range m.cdcs {
		c := &m.cdcs[i]
		what := "source " + c.name + ": cdc vs no-op reader"
		when := "running beside the other source's cdc (2 sources in parallel)"
		if i == 0 {
			what, when = "1 source (one): cdc vs no-op reader", "alone"
		}
		var rs []float64
		for _, rp := range s.reps {
			rs = append(rs, rp.cdcs[i].streamRate()/rp.cdcs[i].noop.rate)
		}
		r.add(Row{ID: "7", What: what, Ours: rate(c.streamRate(), "rows/s"), Peer: rate(c.noop.rate, "rows/s") + " (no-op go-mysql canal, alone)",
			OursNum: c.streamRate(), PeerNum: c.noop.rate, Target: "report", Ratio: fmt.Sprintf("%.2f", c.streamRate()/c.noop.rate),
			Settings: fmt.Sprintf("the median repetition of the row above (its ratios over the repetitions: %s); server %s, %s rows of %s, binlog %s → %s; cdc %s; its rows/s from its \"tailing the binlog\" log line (start-up %s, start by %s) "+
				"to checkpoint ≥ end; from process start: %s (%s); rows it applied %s, the no-op reader saw %s (from its first row; wall incl. connect %s); "+
				"CPU per row, cdc process incl. start-up %s (%.1f%% of a core per 1,000 rows/s), no-op reader %s; cdc VmRSS at its end %s",
				floats(rs, "%.2f"), serverName(c), count(int64(c.part.rows)), c.shop, modeStart(c.from, c.mode), c.part.to, when, sec(c.startup), modeName[c.mode],
				rate(c.rate(), "rows/s"), sec(c.took), count(c.rows), count(c.noop.rows), sec(c.noop.wall),
				us(c.cpuPerRow()), 100*float64(c.cpuPerRow())*1000/float64(time.Second), us(c.noop.perRow), mib(c.rss)),
		})
	}
	r.steadyRow(cfg, s.steady)
	r.shardRow(cfg, s.shards)
	r.Notes = append(r.Notes, "After the sources phase: "+s.oneVerify+"; "+s.twoVerify)
	r.check("after the sources phase (1 source)", s.oneVerify)
	r.check("after the sources phase (2 sources)", s.twoVerify)
}

// medianRep is the repetition of median two/one ratio, and every
// repetition's ratio.
func (s *sourcesResult) medianRep() (sourcesRep, []float64) {
	ratios := mapped(s.reps, sourcesRep.ratio)
	return medianBy(s.reps, sourcesRep.ratio), ratios
}

func serverName(c *srcCDC) string {
	if c.name == "b" {
		return "B"
	}
	return "A"
}
