package inventory

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/internal/sqltx"
)

// Counter is one inventory_counter row: its counts and the binlog stamp
// of its last change.
type Counter struct {
	Counts
	Stamp int64
}

// TemplateCache is coupon_template's cached counts of one template.
type TemplateCache struct {
	Issued, Used, Expired int64
}

// Counters are the cdc's counters (and, when asked for, the template
// cache) with the checkpoint they reflect, read in one snapshot: the cdc
// writes all three in one transaction.
type Counters struct {
	Rows      map[Pair]Counter
	Templates map[int64]TemplateCache // nil unless asked for
	At        canal.Position          // the checkpoint
	Age       time.Duration           // how long ago the checkpoint was saved
}

// ReadCounters reads the counters of the named checkpoint, with the
// template cache when withTemplates.
func ReadCounters(ctx context.Context, db *sql.DB, checkpoint string, withTemplates bool) (Counters, error) {
	var c Counters
	var ageMicros int64
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return c, fmt.Errorf("read counters: %w", err)
	}
	defer tx.Rollback()
	if err := tx.QueryRowContext(ctx, `SELECT binlog_file, binlog_pos, gtid_set, TIMESTAMPDIFF(MICROSECOND, updated_at, NOW(6))
		FROM cdc_checkpoint WHERE name = ?`, checkpoint).Scan(&c.At.File, &c.At.Pos, &c.At.GTID, &ageMicros); err != nil {
		return c, fmt.Errorf("read checkpoint %q: %w", checkpoint, err)
	}
	c.Age = time.Duration(ageMicros) * time.Microsecond
	c.Rows, err = sqltx.Map(ctx, tx, `SELECT template_id, channel, held, used, expired, returned, released, stamp FROM inventory_counter`, nil,
		func(rows *sql.Rows) (p Pair, r Counter, err error) {
			err = rows.Scan(&p.Template, &p.Channel, &r.Held, &r.Used, &r.Expired, &r.Returned, &r.Released, &r.Stamp)
			return p, r, err
		})
	if err != nil {
		return c, fmt.Errorf("read counters: %w", err)
	}
	if withTemplates {
		if c.Templates, err = readTemplateCache(ctx, tx); err != nil {
			return c, err
		}
	}
	return c, tx.Commit()
}

func readTemplateCache(ctx context.Context, tx *sql.Tx) (map[int64]TemplateCache, error) {
	out, err := sqltx.Map(ctx, tx, `SELECT id, issued_count, used_count, expired_count FROM coupon_template`, nil,
		func(rows *sql.Rows) (id int64, c TemplateCache, err error) {
			err = rows.Scan(&id, &c.Issued, &c.Used, &c.Expired)
			return id, c, err
		})
	if err != nil {
		return nil, fmt.Errorf("read template counts: %w", err)
	}
	return out, nil
}

// LoadCounters reads every inventory_counter row, or those of the given
// templates.
func LoadCounters(ctx context.Context, q Querier, templates ...int64) (map[Pair]*Counts, error) {
	query := `SELECT template_id, channel, held, used, expired, returned, released FROM inventory_counter`
	if len(templates) > 0 {
		query += ` WHERE template_id IN (` + sqltx.Placeholders(len(templates)) + `)`
	}
	out, err := sqltx.Map(ctx, q, query, sqltx.Int64Args(templates),
		func(rows *sql.Rows) (p Pair, c *Counts, err error) {
			c = &Counts{}
			err = rows.Scan(&p.Template, &p.Channel, &c.Held, &c.Used, &c.Expired, &c.Returned, &c.Released)
			return p, c, err
		})
	if err != nil {
		return nil, fmt.Errorf("read counters: %w", err)
	}
	return out, nil
}
