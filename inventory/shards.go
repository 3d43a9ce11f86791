package inventory

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/internal/sqltx"
)

// The queries on a sharded role (user_coupon, redemption_log or orders
// naming a set of tables, canal.Mapping.TablesOf) run over all its shards
// here, in one of two ways: each, a query per shard on the same querier
// (one snapshot when it is a transaction) whose answers add up — lookups
// by id, counts merged into a map; or unionAll, one statement over every
// shard, for a grouping whose groups may span shards (a coupon's
// redemption rows in two shards are one group). A single table is the
// one-shard case of both.

// tables quotes every table a mapped table name stands for.
func (s *Queries) tables(name string) ([]string, error) {
	ts, err := s.m.TablesOf(name)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = quoteTable(t)
	}
	return out, nil
}

// quoteTable quotes schema.table for MySQL.
func quoteTable(t canal.TableName) string {
	if t.Schema == "" {
		return quoteIdent(t.Name)
	}
	return quoteIdent(t.Schema) + "." + quoteIdent(t.Name)
}

// each calls fn with every table (quoted) of the mapped table name, in
// turn; fn adds what each answers to its result.
func (s *Queries) each(name string, fn func(table string) error) error {
	tables, err := s.tables(name)
	if err != nil {
		return err
	}
	for _, t := range tables {
		if err := fn(t); err != nil {
			return err
		}
	}
	return nil
}

// unionAll is inner(table) for every table of the mapped table name,
// joined by UNION ALL, with args repeated for each: the rows of all the
// shards, for an outer query to group.
func (s *Queries) unionAll(name string, inner func(table string) string, args []any) (string, []any, error) {
	tables, err := s.tables(name)
	if err != nil {
		return "", nil, err
	}
	parts := make([]string, len(tables))
	all := make([]any, 0, len(args)*len(tables))
	for i, t := range tables {
		parts[i] = inner(t)
		all = append(all, args...)
	}
	return strings.Join(parts, " UNION ALL "), all, nil
}

// groupCount is `SELECT keys..., COUNT(*)` over the mapped table name,
// rows matching where (may be ""), grouped by the keys, groups kept by
// having (e.g. "> 1"; may be ""). Over a set, each shard groups its rows
// and the groups are summed across the shards before having applies.
func (s *Queries) groupCount(name string, keys []string, where string, args []any, having string) (string, []any, error) {
	by := make([]string, len(keys))
	for i := range keys {
		by[i] = fmt.Sprint(i + 1)
	}
	if where != "" {
		where = " WHERE " + where
	}
	if !s.m.Sharded(name) {
		q := fmt.Sprintf("SELECT %s, COUNT(*) FROM %s%s GROUP BY %s", strings.Join(keys, ", "), s.table(name), where, strings.Join(by, ", "))
		if having != "" {
			q += " HAVING COUNT(*) " + having
		}
		return q, args, nil
	}
	named := make([]string, len(keys))
	outer := make([]string, len(keys))
	for i, k := range keys {
		outer[i] = fmt.Sprintf("k%d", i)
		named[i] = k + " AS " + outer[i]
	}
	union, all, err := s.unionAll(name, func(t string) string {
		return fmt.Sprintf("SELECT %s, COUNT(*) AS n FROM %s%s GROUP BY %s", strings.Join(named, ", "), t, where, strings.Join(by, ", "))
	}, args)
	if err != nil {
		return "", nil, err
	}
	q := fmt.Sprintf("SELECT %s, SUM(n) FROM (%s) u GROUP BY %s", strings.Join(outer, ", "), union, strings.Join(by, ", "))
	if having != "" {
		q += " HAVING SUM(n) " + having
	}
	return q, all, nil
}

// DuplicateID is a coupon id found in more than one shard.
type DuplicateID struct {
	ID     int64
	Tables []string // the shards that hold it
}

// DuplicateCouponIDs looks for coupon ids held by more than one shard of a
// sharded coupon table, in one consistent snapshot, and returns up to
// limit of them (none for a single table). Coupon ids must be unique
// across shards (a sharding middleware's id generator): the counters do
// not need it, but the per-coupon checks key redemptions and anomalies by
// id. Each shard is read once in primary-key order, a chunk at a time,
// and the chunks merged up to the lowest id every shard has reached:
// memory stays a chunk per shard.
func (s *Queries) DuplicateCouponIDs(ctx context.Context, db *sql.DB, limit int) ([]DuplicateID, error) {
	uc := s.m.UserCoupon
	if !s.m.Sharded(uc.Table) {
		return nil, nil
	}
	tables, err := s.m.TablesOf(uc.Table)
	if err != nil {
		return nil, err
	}
	var out []DuplicateID
	err = consistentSnapshot(ctx, db, func(tx *sql.Tx) error {
		shards := make([]*idCursor, len(tables))
		for i, t := range tables {
			shards[i] = &idCursor{table: quoteTable(t), name: t.String(), after: math.MinInt64, chunk: s.idChunk}
		}
		for len(out) < limit {
			bound, live := int64(math.MaxInt64), false
			for _, c := range shards {
				if err := c.fill(ctx, tx, quoteIdent(uc.ID)); err != nil {
					return fmt.Errorf("read the ids of %s: %w", c.name, err)
				}
				if !c.done {
					bound = min(bound, c.after)
				}
				live = live || len(c.ids) > 0
			}
			if !live {
				return nil
			}
			held := map[int64][]string{}
			var ids []int64
			for _, c := range shards {
				n := len(c.ids) // every id ≤ bound
				if bound < math.MaxInt64 {
					n, _ = slices.BinarySearch(c.ids, bound+1)
				}
				for _, id := range c.ids[:n] {
					if held[id] = append(held[id], c.name); len(held[id]) == 2 {
						ids = append(ids, id)
					}
				}
				c.ids = c.ids[n:]
			}
			slices.Sort(ids)
			for _, id := range ids[:min(len(ids), limit-len(out))] {
				out = append(out, DuplicateID{ID: id, Tables: held[id]})
			}
		}
		return nil
	})
	return out, err
}

// idCursor reads one shard's ids in order, a chunk at a time.
type idCursor struct {
	table string  // quoted
	name  string  // schema.table
	ids   []int64 // read, not merged yet
	after int64   // the last id read
	chunk int     // ids a read
	done  bool
}

// fill reads the next chunk when every id read is merged.
func (c *idCursor) fill(ctx context.Context, tx *sql.Tx, id string) error {
	if c.done || len(c.ids) > 0 {
		return nil
	}
	// DISTINCT: a primary key's values as they are; a column with repeats
	// (a write-off table's coupon) once each, by its index
	query := fmt.Sprintf("SELECT DISTINCT %s FROM %s WHERE %s > ? ORDER BY %s LIMIT %d", id, c.table, id, id, c.chunk)
	err := sqltx.EachRow(ctx, tx, query, []any{c.after}, func(rows *sql.Rows) error {
		var v int64
		if err := rows.Scan(&v); err != nil {
			return err
		}
		c.ids = append(c.ids, v)
		c.after = v
		return nil
	})
	c.done = err == nil && len(c.ids) < c.chunk
	return err
}
