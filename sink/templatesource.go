package sink

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/couponlink/couponlink/inventory"
)

// The template table on another source (canal.Mapping.TemplateElsewhere):
// this source's server has no copy of it, so its binlog carries no
// template rows. The cdc reads the rows on the source that holds it (read
// only, bounded by peerTimeout) when it needs rules it has never had (a
// bootstrap, a template first touched), and follows their changes through
// that source's cdc: before each batch and heartbeat (at most every
// templateFeedEvery)
// it reads that cdc's template state (cdc_template_state, the rules in
// force at its checkpoint, which it follows from its own binlog), and a
// rule that changed there is in force here from that batch on, saved with
// this checkpoint like a change of the binlog (templates.go). So every
// rule this cdc judges by is one the template's source applied, a replay
// after a kill judges by the rules saved with the checkpoint, and a
// change reaches this source's judging at its first batch after the
// template source's cdc applied it. While that source cannot be asked, the
// rules stay those last learnt (logged, couponlink_cdc_peer_errors_total).

// templateFeedEvery bounds how often the template source's state is read.
const templateFeedEvery = 200 * time.Millisecond

// templatePeer is the peer that holds the template table, or nil when
// this server has it (or no peer is named so: the caller says so).
func (s *Sink) templatePeer() *peer {
	if !s.cfg.Mapping.TemplateElsewhere() {
		return nil
	}
	for _, p := range s.peers {
		if p.Name == s.cfg.Mapping.TemplateSource() {
			return p
		}
	}
	return nil
}

// templateRows reads the template rows of ids (nil: all) where the table
// is: on this server in q, else on the source that holds it.
func (s *Sink) templateRows(ctx context.Context, q inventory.Querier, ids []int64) (map[int64]inventory.TemplateInfo, error) {
	if !s.cfg.Mapping.TemplateElsewhere() {
		return s.src.Templates(ctx, q, ids)
	}
	p := s.templatePeer()
	if p == nil {
		return nil, fmt.Errorf("the template table is on source %q, which this cdc was not given as a peer", s.cfg.Mapping.TemplateSource())
	}
	pctx, cancel := context.WithTimeout(ctx, peerTimeout)
	defer cancel()
	src, err := p.source(pctx)
	if err == nil {
		var out map[int64]inventory.TemplateInfo
		if out, err = src.Templates(pctx, p.DB, ids); err == nil {
			return out, nil
		}
	}
	s.m.peerErrors.WithLabelValues(p.Name).Inc()
	return nil, fmt.Errorf("read the template table on source %s (it holds it; this cdc waits for it): %w", p.Name, err)
}

// templateFeed follows the template source's rules (above).
type templateFeed struct {
	noCheck
	s    *Sink
	last time.Time // the last read of the template source's state
}

func (c *templateFeed) on() bool {
	return c.s.followsTemplates() && c.s.cfg.Mapping.TemplateElsewhere()
}

// load makes each rule the template source's cdc holds, for a template
// this cdc has rules of, in force from b on: a change of b (before and
// after alike: the whole batch is judged by it).
func (c *templateFeed) load(ctx context.Context, b *batch) error {
	s := c.s
	if time.Since(c.last) < templateFeedEvery {
		return nil
	}
	p := s.templatePeer()
	if p == nil {
		return nil
	}
	pctx, cancel := context.WithTimeout(ctx, peerTimeout)
	defer cancel()
	rules, err := readTemplateState(pctx, p.DB, p.Name)
	if err != nil {
		s.m.peerErrors.WithLabelValues(p.Name).Inc()
		s.log.Warn("the template source could not be asked; the rules stay those last learnt from it", "peer", p.Name, "err", err)
		return nil
	}
	c.last = time.Now()
	for id, v := range rules {
		old, known := s.tpl[id]
		if _, changed := b.templates[id]; changed || !known || old.SameRules(v) {
			continue
		}
		b.templates[id] = tplChange{before: v, after: v}
		b.decide = true // a heartbeat saves it too
	}
	return nil
}

// waiting: a heartbeat reads the template source's rules too.
func (c *templateFeed) waiting() (int, bool) {
	return 0, c.on() && time.Since(c.last) >= templateFeedEvery
}

// save keeps the rules a heartbeat learnt (a batch's are kept by the
// mirror after its commit).
func (c *templateFeed) save(_ context.Context, b *batch) error {
	if b.idle && len(b.templates) > 0 {
		c.s.mu.Lock()
		for id, ch := range b.templates {
			c.s.setTemplate(id, ch.after)
		}
		c.s.mu.Unlock()
	}
	return nil
}

// readTemplateState reads the template rules saved with a checkpoint
// (name) in db's cdc_template_state.
func readTemplateState(ctx context.Context, db *sql.DB, name string) (map[int64]inventory.TemplateInfo, error) {
	rows, err := db.QueryContext(ctx, `SELECT template_id, budget, per_user_limit, end_time, unlimited, off_shelf, fixed_window, start_time FROM cdc_template_state WHERE name = ?`, name)
	if err != nil {
		return nil, fmt.Errorf("read template state: %w", err)
	}
	defer rows.Close()
	out := map[int64]inventory.TemplateInfo{}
	for rows.Next() {
		var v inventory.TemplateInfo
		var budget sql.NullInt64
		var end sql.NullTime
		var start sql.NullTime
		if err := rows.Scan(&v.ID, &budget, &v.PerUserLimit, &end, &v.Unlimited, &v.OffShelf, &v.Window, &start); err != nil {
			return nil, fmt.Errorf("read template state: %w", err)
		}
		v.Budget, v.HasBudget = budget.Int64, budget.Valid
		if end.Valid {
			v.EndTime = end.Time.UTC()
		}
		if start.Valid {
			v.StartTime = start.Time.UTC()
		}
		out[v.ID] = v
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read template state: %w", err)
	}
	return out, nil
}
