package sink

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/couponlink/couponlink/internal/sqltx"
	"github.com/couponlink/couponlink/inventory"
)

// The checks only the sum over the sources can make (a mapping with
// sources: one cdc per server, each counting its own), decided by one
// source's cdc, the judge (canal.Mapping.Judge: the source that holds the
// template table, else the first), live:
//
//   - over_issue of a template's budget: the judge follows the budget in
//     its own binlog and, at each of its batches and heartbeats (at most
//     every sumJudgeEvery), adds its own counters to the counters of every
//     other source (their cdcs' inventory_counter at their checkpoints,
//     read only, each bounded by peerTimeout). A template whose sum crosses
//     its budget is one over_issue, recorded once, on the judge; the other
//     sources' cdcs judge no budget (overIssue is off for them).
//   - a (coupon, order) written off on two servers (duplicate_redemption):
//     each source's cdc mails the judge (cdc_sources_mail on its own server,
//     in the transaction of the batch) each write-off row whose (coupon,
//     order) another source also holds; the judge reads every source's
//     mail, asks every source for the rows of those coupons, and records
//     one duplicate_redemption per source beyond the first that holds the
//     (coupon, order), once (sourcesmail.go).
//
// The judge's decisions (what it has read of each mail, the templates it
// found over, the write-offs it reported) are saved with its checkpoint in
// cdc_sources_state, in the transaction of the anomalies: a kill before the
// commit decides again, after it never twice. Nothing is guessed while a
// source cannot be asked: a sum that may still be under the budget waits
// for that source (a sum already over it without that source is over), and
// its mail and rows are decided when it answers. A source whose cdc is down
// shows its counters and its mail as of its checkpoint: what it has not
// applied yet is decided once it is back.

// sumJudgeEvery bounds how often the judge reads the other sources, and
// sumJudgeDown while one of them cannot be asked.
const (
	sumJudgeEvery = 500 * time.Millisecond
	sumJudgeDown  = 2 * time.Second
)

// mailChunk bounds the mail read from one source per pass.
const mailChunk = 500

// sumDecisions is what one pass of the judge decided, saved with its batch.
type sumDecisions struct {
	over     map[int64]int64         // templates found over (taken), or -1: under again
	read     map[string]int64        // the last mail seq read, per source
	reported map[redemptionKey]int64 // the sources beyond the first reported, per (coupon, order)
}

func (d sumDecisions) changed() bool { return len(d.over)+len(d.read)+len(d.reported) > 0 }

// sourcesJudge is the judge's check.
type sourcesJudge struct {
	noCheck
	s    *Sink
	last time.Time        // the last pass
	down bool             // a source could not be asked in the last pass
	over map[int64]int64  // the templates over their budget on the sum
	read map[string]int64 // the last mail seq read, per source
	pend sumDecisions     // the current batch's
}

func (c *sourcesJudge) on() bool {
	m := c.s.cfg.Mapping
	return m.Source() != "" && m.Source() == m.Judge()
}

// sumJudged says whether over-issue of a budget is the judge's (a mapping
// with sources and budgets): no source judges its own part.
func (s *Sink) sumJudged() bool {
	return s.cfg.Mapping.Source() != "" && s.cfg.Mapping.ChannelQuota == nil
}

// on: the sum's over-issue is the judge's (sourcesJudge).
func (c overIssue) on() bool { return !c.s.sumJudged() }

// seed forgets the templates found over: a bootstrap reports again those
// over at its first pass, as one server's bootstrap does.
func (c *sourcesJudge) seed(ctx context.Context, sd *seeding) ([]Anomaly, error) {
	if _, err := sd.tx.ExecContext(ctx, "DELETE FROM cdc_sources_state WHERE name = ? AND kind = 'over'", c.s.cfg.Name); err != nil {
		return nil, fmt.Errorf("clear the sum's over-issues: %w", err)
	}
	return nil, nil
}

func (c *sourcesJudge) resume(ctx context.Context, _ bool) error {
	c.over, c.read = map[int64]int64{}, map[string]int64{}
	if !c.on() {
		return nil
	}
	return sqltx.EachRow(ctx, c.s.db, `SELECT kind, id, item, value FROM cdc_sources_state WHERE name = ? AND kind IN ('over', 'mail')`,
		[]any{c.s.cfg.Name}, func(rows *sql.Rows) error {
			var kind, item string
			var id, v int64
			if err := rows.Scan(&kind, &id, &item, &v); err != nil {
				return err
			}
			if kind == "over" {
				c.over[id] = v
			} else {
				c.read[item] = v
			}
			return nil
		})
}

// waiting: a heartbeat runs the judge at most every sumJudgeEvery.
func (c *sourcesJudge) waiting() (int, bool) {
	return 0, c.on() && time.Since(c.last) >= sumJudgeEvery
}

func (c *sourcesJudge) judge(ctx context.Context, b *batch) ([]Anomaly, error) {
	c.pend = sumDecisions{over: map[int64]int64{}, read: map[string]int64{}, reported: map[redemptionKey]int64{}}
	if time.Since(c.last) < sumJudgeEvery {
		return nil, nil
	}
	c.last = time.Now()
	c.down = false
	found, err := c.overIssued(ctx, b)
	if err != nil {
		return nil, err
	}
	dups, err := c.writtenOffTwice(ctx)
	if err != nil {
		return nil, err
	}
	if c.down {
		c.last = c.last.Add(sumJudgeDown - sumJudgeEvery) // the next pass later: fewer look-ups, and log lines, on a source that is down
	}
	if c.pend.changed() {
		b.decide = true
	}
	return append(found, dups...), nil
}

// overIssued judges every template with a budget on the sum: the judge's
// counters as b leaves them, the other sources' at their checkpoints.
func (c *sourcesJudge) overIssued(ctx context.Context, b *batch) ([]Anomaly, error) {
	s := c.s
	if !s.sumJudged() {
		return nil, nil
	}
	budgets := map[int64]int64{}
	for id, v := range s.tpl {
		if v.HasBudget {
			budgets[id] = v.Budget
		}
	}
	for id, ch := range b.templates {
		delete(budgets, id)
		if ch.after.HasBudget {
			budgets[id] = ch.after.Budget
		}
	}
	if len(budgets) == 0 && len(c.over) == 0 {
		return nil, nil
	}
	own := map[int64]int64{}
	for p, n := range s.counts {
		if _, moved := b.next[p]; !moved {
			own[p.Template] += n.Taken()
		}
	}
	for p, n := range b.next {
		own[p.Template] += n.Taken()
	}
	total := maps.Clone(own)
	parts := map[string]map[int64]int64{s.cfg.Name: own}
	complete := s.onEachPeer(ctx, "counters", func(ctx context.Context, p *peer) error {
		cs, err := inventory.ReadCounters(ctx, p.DB, p.Name, false)
		if err == nil && cs.At.File == "" {
			err = fmt.Errorf("source %s has no checkpoint yet: its cdc has not counted its coupons", p.Name)
		}
		if err != nil {
			return err
		}
		part := map[int64]int64{}
		for pair, r := range cs.Rows {
			part[pair.Template] += r.Counts.Taken()
		}
		parts[p.Name] = part
		for id, n := range part {
			total[id] += n
		}
		return nil
	})
	c.down = c.down || !complete
	ids := slices.Sorted(maps.Keys(budgets))
	for id := range c.over {
		if _, ok := budgets[id]; !ok {
			ids = append(ids, id)
		}
	}
	least := "" // a source not counted can only add coupons
	if !complete {
		least = "at least "
	}
	var out []Anomaly
	for _, id := range ids {
		budget, has := budgets[id]
		over := has && total[id] > budget
		_, was := c.over[id]
		switch {
		case over && !was:
			c.pend.over[id] = total[id]
			out = append(out, Anomaly{Kind: inventory.AnomalyOverIssue, Template: id, Detail: fmt.Sprintf("template %d holds %s%d coupons (held+used+frozen) summed over the sources (%s) over its quota of %d",
				id, least, total[id], c.sharesOf(parts, id), budget)})
		case was && !over && (complete || !has):
			c.pend.over[id] = -1 // under again (or no budget): a later crossing is one more
		}
	}
	return out, nil
}

// sharesOf is each counted source's part of a template: "east 6, west 5".
func (c *sourcesJudge) sharesOf(parts map[string]map[int64]int64, id int64) string {
	var out []string
	for _, name := range append([]string{c.s.cfg.Name}, peerNames(c.s.peers)...) {
		if part, ok := parts[name]; ok {
			out = append(out, fmt.Sprintf("%s %d", name, part[id]))
		} else {
			out = append(out, name+" not counted: it could not be asked")
		}
	}
	return strings.Join(out, ", ")
}

func peerNames(ps []*peer) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Name
	}
	return out
}

// save writes the batch's decisions with its checkpoint, and keeps them.
func (c *sourcesJudge) save(ctx context.Context, b *batch) error {
	d := c.pend
	if !d.changed() {
		return nil
	}
	ins := &rowInserter{tx: b.tx, what: "save the sum's decisions", cols: 5,
		head: "INSERT INTO cdc_sources_state (name, kind, id, item, value) VALUES ", tail: " ON DUPLICATE KEY UPDATE value = VALUES(value)"}
	name := c.s.cfg.Name
	var under []any
	for id, v := range d.over {
		if v < 0 {
			under = append(under, id)
			delete(c.over, id)
			continue
		}
		c.over[id] = v
		if err := ins.add(ctx, name, "over", id, "", v); err != nil {
			return err
		}
	}
	for src, seq := range d.read {
		c.read[src] = seq
		if err := ins.add(ctx, name, "mail", 0, src, seq); err != nil {
			return err
		}
	}
	for k, n := range d.reported {
		if err := ins.add(ctx, name, "write_off", k.coupon, k.order, n); err != nil {
			return err
		}
	}
	if err := ins.flush(ctx); err != nil {
		return err
	}
	if len(under) > 0 {
		if _, err := b.tx.ExecContext(ctx, `DELETE FROM cdc_sources_state WHERE name = ? AND kind = 'over' AND id IN (`+sqltx.Placeholders(len(under))+`)`,
			append([]any{name}, under...)...); err != nil {
			return fmt.Errorf("save the sum's decisions: %w", err)
		}
	}
	return nil
}

// mark: a transaction run again starts from the decisions kept before it.
func (c *sourcesJudge) mark() func() {
	over, read := maps.Clone(c.over), maps.Clone(c.read)
	return func() { c.over, c.read = over, read }
}
