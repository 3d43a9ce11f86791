package inventory

import (
	"fmt"
	"strings"

	"github.com/couponlink/couponlink/canal"
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
func (s *Source) tables(name string) ([]string, error) {
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
func (s *Source) each(name string, fn func(table string) error) error {
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
func (s *Source) unionAll(name string, inner func(table string) string, args []any) (string, []any, error) {
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
func (s *Source) groupCount(name string, keys []string, where string, args []any, having string) (string, []any, error) {
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
