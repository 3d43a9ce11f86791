package sink

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/inventory"
)

// The template cache (a legacy mapping that follows its template table,
// canal.Mapping.FollowsTemplates): each template's budget (or that it is
// unlimited), per-user limit, end time and shelf state in force at the
// checkpoint. A bootstrap seeds it from its
// snapshot (exact at its position); the binlog changes it from then on
// (canal.TemplateChange), and each batch saves what it changed in
// cdc_template_state with the checkpoint, so that a restart judges the
// binlog it replays by the rules in force at each point of it, not by
// the template table as it is at the restart. A template the cache does
// not hold yet (a checkpoint older than that table, or no row at the
// snapshot) is read from the template table when a batch first touches
// it. Inside a batch, a cursor (tplCursor) gives the rules in force at
// each transition: the batch's template changes apply from their place
// among its transitions (TemplateChange.After) on.
//
// A template with no row, a NULL budget, no per-user limit or no end time
// has none of them: nothing is judged against what it lacks.

// followsTemplates reports whether the sink keeps the template cache.
func (s *Sink) followsTemplates() bool { return s.cfg.Mapping.FollowsTemplates() }

// templateRules keeps the cache in the pipeline: seeded by a bootstrap,
// read back at a start, completed from the template table before a batch
// is judged, saved with the batch. The cache itself is part of the mirror
// (Sink.tpl, read by the metrics); dirty is what was read from the
// template table and not saved yet (a heartbeat leaves it to the next
// batch).
type templateRules struct {
	noCheck
	s     *Sink
	dirty map[int64]bool
}

func (c *templateRules) on() bool { return c.s.followsTemplates() }

func (c *templateRules) seed(ctx context.Context, sd *seeding) ([]Anomaly, error) {
	return nil, c.seedTemplates(ctx, sd.tx, sd.snap, sd.infos)
}

func (c *templateRules) resume(ctx context.Context, _ bool) error {
	if !c.on() {
		return nil
	}
	return c.loadTemplates(ctx)
}

// load completes the cache with the rules of the templates b touches, and
// hands b what the cache read since the last batch, to be saved with it.
func (c *templateRules) load(ctx context.Context, b *batch) error {
	if b.idle {
		return nil
	}
	if err := c.learnTemplates(ctx, b); err != nil {
		return err
	}
	b.rulesRead, c.dirty = c.dirty, map[int64]bool{}
	return nil
}

func (c *templateRules) save(ctx context.Context, b *batch) error { return c.saveTemplates(ctx, b) }

// tplChange is a batch's net change of a template: its rules before its
// first change (the before image the binlog carries) and after its last.
type tplChange struct{ before, after inventory.TemplateInfo }

// templateChanges is the batch's template changes (a deleted row leaves
// the template with no rules, as a fresh read would).
func templateChanges(b *canal.Batch) map[int64]tplChange {
	out := map[int64]tplChange{}
	for i := range b.Templates {
		tc := &b.Templates[i]
		c, ok := out[tc.Template]
		if !ok {
			c.before = inventory.TemplateInfo{ID: tc.Template, Budget: tc.PrevQuota, HasBudget: tc.PrevKnown,
				PerUserLimit: tc.PrevLimit, EndTime: tc.PrevEnd, Unlimited: tc.PrevUnlimited, OffShelf: tc.PrevOffShelf, Window: tc.PrevWindow,
				StartTime: tc.PrevStart}
		}
		c.after = infoAfter(tc)
		out[tc.Template] = c
	}
	return out
}

// infoAfter is a template's rules after one change.
func infoAfter(tc *canal.TemplateChange) inventory.TemplateInfo {
	if tc.Deleted {
		return inventory.TemplateInfo{ID: tc.Template}
	}
	return inventory.TemplateInfo{ID: tc.Template, Budget: tc.Quota, HasBudget: tc.Known, PerUserLimit: tc.Limit, EndTime: tc.End,
		Unlimited: tc.Unlimited, OffShelf: tc.OffShelf, Window: tc.Window, StartTime: tc.Start}
}

// tplAt is a template's rules at the start of the batch: the before image
// of its first change in the batch, else the cache.
func (s *Sink) tplAt(b *batch, tpl int64) inventory.TemplateInfo {
	if c, ok := b.templates[tpl]; ok {
		return c.before
	}
	return s.tpl[tpl]
}

// tplCursor walks a batch's transitions in order and gives the rules of a
// template in force at each.
type tplCursor struct {
	s       *Sink
	b       *batch
	changes []canal.TemplateChange
	next    int
	now     map[int64]inventory.TemplateInfo // changed so far in the batch
}

func (s *Sink) tplCursor(b *batch) *tplCursor {
	return &tplCursor{s: s, b: b, changes: b.Templates, now: map[int64]inventory.TemplateInfo{}}
}

// at is the rules of tpl in force at the batch's transition i; i never
// goes down from one call to the next.
func (c *tplCursor) at(i int, tpl int64) inventory.TemplateInfo {
	for ; c.next < len(c.changes) && c.changes[c.next].After <= i; c.next++ {
		tc := &c.changes[c.next]
		c.now[tc.Template] = infoAfter(tc)
	}
	if v, ok := c.now[tpl]; ok {
		return v
	}
	return c.s.tplAt(c.b, tpl)
}

// loadTemplates replaces the cache with the rules saved with the
// checkpoint, and reads from the template table those of the counters'
// templates it lacks (a checkpoint older than cdc_template_state).
func (c *templateRules) loadTemplates(ctx context.Context) error {
	s := c.s
	cache, err := readTemplateState(ctx, s.db, s.cfg.Name)
	if err != nil {
		return err
	}
	s.mu.Lock() // the metrics collector reads it
	s.tpl, c.dirty = cache, map[int64]bool{}
	s.mu.Unlock()
	var missing []int64
	for _, id := range templatesIn(s.counts) {
		if _, ok := cache[id]; !ok {
			missing = append(missing, id)
		}
	}
	return c.readTemplates(ctx, missing)
}

// learnTemplates reads the rules of the templates the batch touches that
// the cache lacks (unless the batch itself carries their rules).
func (c *templateRules) learnTemplates(ctx context.Context, b *batch) error {
	var unknown []inventory.Pair
	for p := range b.deltas {
		_, cached := c.s.tpl[p.Template]
		_, changed := b.templates[p.Template]
		if !cached && !changed {
			unknown = append(unknown, p)
		}
	}
	return c.readTemplates(ctx, templatesOf(unknown))
}

// readTemplates caches the rules of ids as the template table holds them
// now, to be saved with the next batch; the binlog keeps them from then on.
func (c *templateRules) readTemplates(ctx context.Context, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	s := c.s
	info, err := s.templateRows(ctx, s.db, ids) // on this server, or on the source that holds it (templatesource.go)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		v := info[id]
		v.ID = id
		s.setTemplate(id, v)
		c.dirty[id] = true
	}
	return nil
}

// setTemplate caches a template's rules and, when budgets are judged, says
// once, when its budget becomes unknown, that its over-issue is not judged.
// The caller holds s.mu.
func (s *Sink) setTemplate(tpl int64, v inventory.TemplateInfo) {
	v.Name, v.Remaining = "", nil // not followed: only the rules are kept
	old, had := s.tpl[tpl]
	s.tpl[tpl] = v
	if s.quotas == nil && !v.HasBudget && !v.Unlimited && (!had || old.HasBudget || old.Unlimited) {
		s.log.Warn("template has no known budget (NULL, or no row in the template table): over-issue is not judged for it until one is set",
			"template", tpl, "table", s.cfg.Mapping.Template.Table, "column", s.cfg.Mapping.Template.TotalQuota)
	}
}

// saveTemplates writes the rules the batch changed or read (its templates
// and rulesRead) into cdc_template_state, in its transaction.
func (c *templateRules) saveTemplates(ctx context.Context, b *batch) error {
	var rows []inventory.TemplateInfo
	for _, ch := range b.templates {
		rows = append(rows, ch.after)
	}
	for id := range b.rulesRead {
		if _, changed := b.templates[id]; !changed {
			rows = append(rows, c.s.tpl[id])
		}
	}
	return c.writeTemplateState(ctx, b.tx, rows)
}

// writeTemplateState upserts rows of cdc_template_state, in tx.
func (c *templateRules) writeTemplateState(ctx context.Context, tx *sql.Tx, rows []inventory.TemplateInfo) error {
	ins := &rowInserter{tx: tx, what: "save template state", cols: 9,
		head: "INSERT INTO cdc_template_state (name, template_id, budget, per_user_limit, end_time, unlimited, off_shelf, fixed_window, start_time) VALUES ",
		tail: " ON DUPLICATE KEY UPDATE budget = VALUES(budget), per_user_limit = VALUES(per_user_limit), end_time = VALUES(end_time)," +
			" unlimited = VALUES(unlimited), off_shelf = VALUES(off_shelf), fixed_window = VALUES(fixed_window), start_time = VALUES(start_time)"}
	for _, v := range rows {
		budget := sql.NullInt64{Int64: v.Budget, Valid: v.HasBudget}
		end := sql.NullTime{Time: v.EndTime.UTC(), Valid: !v.EndTime.IsZero()}
		start := sql.NullTime{Time: v.StartTime.UTC(), Valid: !v.StartTime.IsZero()}
		if err := ins.add(ctx, c.s.cfg.Name, v.ID, budget, v.PerUserLimit, end, v.Unlimited, v.OffShelf, v.Window, start); err != nil {
			return err
		}
	}
	return ins.flush(ctx)
}

// seedTemplates is a bootstrap's part: it rewrites the checkpoint's
// template rules in tx from the template rows of its snapshot (infos), and
// gives the counted templates without a row no rules.
func (c *templateRules) seedTemplates(ctx context.Context, tx *sql.Tx, snap inventory.Snapshot, infos map[int64]inventory.TemplateInfo) error {
	if _, err := tx.ExecContext(ctx, "DELETE FROM cdc_template_state WHERE name = ?", c.s.cfg.Name); err != nil {
		return fmt.Errorf("clear template state: %w", err)
	}
	rows := make([]inventory.TemplateInfo, 0, len(infos))
	for _, v := range infos {
		rows = append(rows, v)
	}
	for _, id := range templatesIn(snap.Counts) {
		if _, ok := infos[id]; !ok {
			rows = append(rows, inventory.TemplateInfo{ID: id})
		}
	}
	return c.writeTemplateState(ctx, tx, rows)
}
