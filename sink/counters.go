package sink

import (
	"context"
	"database/sql"
	"strings"

	"github.com/couponlink/couponlink/internal/sqltx"
	"github.com/couponlink/couponlink/inventory"
)

// writeCounters upserts the pairs' counters: added to the stored values
// (delta) or replacing them; stamp is the binlog stamp of the change.
func writeCounters(ctx context.Context, tx *sql.Tx, pairs []inventory.Pair, counts map[inventory.Pair]*inventory.Counts, delta bool, stamp int64) error {
	st, ok := countersStatement(pairs, counts, delta, stamp)
	if !ok {
		return nil
	}
	_, err := st.exec(ctx, tx)
	return err
}

// countersStatement is writeCounters' statement; false when there are no
// pairs.
func countersStatement(pairs []inventory.Pair, counts map[inventory.Pair]*inventory.Counts, delta bool, stamp int64) (statement, bool) {
	if len(pairs) == 0 {
		return statement{}, false
	}
	var b strings.Builder
	args := make([]any, 0, 8*len(pairs))
	b.WriteString("INSERT INTO inventory_counter (template_id, channel, held, used, expired, returned, released, stamp) VALUES ")
	for i, p := range pairs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(?, ?, ?, ?, ?, ?, ?, ?)")
		c := counts[p]
		args = append(args, p.Template, p.Channel, c.Held, c.Used, c.Expired, c.Returned, c.Released, stamp)
	}
	if delta {
		b.WriteString(` ON DUPLICATE KEY UPDATE held = held + VALUES(held), used = used + VALUES(used),
			expired = expired + VALUES(expired), returned = returned + VALUES(returned), released = released + VALUES(released),
			stamp = VALUES(stamp)`)
	} else {
		b.WriteString(` ON DUPLICATE KEY UPDATE held = VALUES(held), used = VALUES(used),
			expired = VALUES(expired), returned = VALUES(returned), released = VALUES(released), stamp = VALUES(stamp)`)
	}
	return statement{what: "write counters", query: b.String(), args: args}, true
}

// refreshTemplates writes the cached counts of coupon_template (reference
// schema only: a legacy template table belongs to its application) from
// inventory_counter, in the counters' transaction: the cache always equals
// the counters, whoever corrected them.
func (s *Sink) refreshTemplates(ctx context.Context, tx *sql.Tx, templates []int64) error {
	st, ok := s.templatesStatement(templates)
	if !ok {
		return nil
	}
	_, err := st.exec(ctx, tx)
	return err
}

// templatesStatement is refreshTemplates' statement; false when it has
// nothing to do.
func (s *Sink) templatesStatement(templates []int64) (statement, bool) {
	if !s.cfg.CacheTemplateCounts || len(templates) == 0 {
		return statement{}, false
	}
	q := `UPDATE coupon_template t JOIN (
		SELECT template_id, SUM(held + used + expired + returned) AS issued, SUM(used) AS used, SUM(expired) AS expired
		FROM inventory_counter WHERE template_id IN (` + sqltx.Placeholders(len(templates)) + `) GROUP BY template_id) v
		ON v.template_id = t.id
		SET t.issued_count = v.issued, t.used_count = v.used, t.expired_count = v.expired`
	return statement{what: "refresh template counts", query: q, args: sqltx.Int64Args(templates)}, true
}
