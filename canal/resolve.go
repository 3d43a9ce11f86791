package canal

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/couponlink/couponlink/internal/sqltx"
)

// validateTables checks each mapped table name on its own: a valid name or
// set, a set only where a role may be sharded, and no table in two roles.
func (m *Mapping) validateTables() []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("mapping: "+format, args...)) }
	type parsed struct {
		spec tableSpec
		set  tableSet
	}
	var seen []parsed
	for _, s := range m.specs() {
		if s.table == "" {
			bad("%s.table is required", s.key)
			continue
		}
		for _, c := range s.cols {
			switch {
			case c.column == "" && c.required:
				bad("%s.%s is required (the column that holds it in %s)", s.key, c.key, s.table)
			case !validIdent(c.column):
				bad("%s.%s %q is not a valid column name", s.key, c.key, c.column)
			}
		}
		ts, err := m.parseSet(s.table)
		if err != nil {
			bad("%s.table %v", s.key, err)
			continue
		}
		if ts.isSet() && !shardable(s.kind) {
			bad("%s.table %q is a set of tables; only user_coupon, redemption_log and orders may be sharded "+
				"(the template table, channel_quota and inventory_flow are single tables)", s.key, s.table)
			continue
		}
		for _, o := range seen {
			example, ok := overlap(o.set, ts)
			switch {
			case !ok:
			case !o.set.isSet() && !ts.isSet():
				bad("%s.table and %s.table both name %s; each mapped table must be different", o.spec.key, s.key, m.qualified(s.table))
			default:
				if example != "" {
					example = " (e.g. " + example + ")"
				}
				bad("%s.table %q and %s.table %q can name the same table%s; each table must belong to one role",
					o.spec.key, o.spec.table, s.key, s.table, example)
			}
		}
		seen = append(seen, parsed{s, ts})
	}
	return errs
}

// errUnresolved is a pattern's tables asked for before Resolve.
var errUnresolved = errors.New("a * pattern is matched against the server's tables: resolve the mapping first (Mapping.Resolve)")

// tablesOf lists the concrete tables of a mapped table: the table itself,
// or each table of its set (after Resolve, those found on the server).
func (m *Mapping) tablesOf(s tableSpec) ([]TableName, error) {
	if m.resolved && s.source {
		if t, ok := m.shards[s.kind]; ok {
			return t, nil
		}
	}
	ts, err := m.parseSet(s.table)
	if err != nil {
		return nil, fmt.Errorf("mapping: %s.table %w", s.key, err)
	}
	if ts.hasStar() {
		return nil, fmt.Errorf("mapping: %s.table %q: %w", s.key, s.table, errUnresolved)
	}
	return ts.names(), nil
}

// TablesOf lists the concrete tables that a mapped table name stands for
// (e.g. m.UserCoupon.Table): the table itself, or every shard of a set —
// a range expanded; a * pattern only once the mapping is resolved.
func (m *Mapping) TablesOf(table string) ([]TableName, error) {
	for _, s := range m.specs() {
		if s.table == table {
			return m.tablesOf(s)
		}
	}
	return m.tablesOf(tableSpec{key: "table", table: table})
}

// Sharded reports whether a mapped table name is a set of tables.
func (m *Mapping) Sharded(table string) bool {
	ts, err := m.parseSet(table)
	return err == nil && ts.isSet()
}

// RoleTables lists each mapped role's concrete tables (a * pattern not
// resolved yet stays as written).
func (m *Mapping) RoleTables() []RoleTables {
	var out []RoleTables
	for _, s := range m.specs() {
		rt := RoleTables{Role: s.key, Written: m.qualified(s.table), Sharded: m.Sharded(s.table)}
		tables, err := m.tablesOf(s)
		if err != nil {
			tables = []TableName{{Name: rt.Written}}
		}
		for _, t := range tables {
			rt.Tables = append(rt.Tables, t.String())
		}
		out = append(out, rt)
	}
	return out
}

// HasSets reports whether some role names a set of shard tables.
func (m *Mapping) HasSets() bool {
	for _, s := range m.specs() {
		if m.Sharded(s.table) {
			return true
		}
	}
	return false
}

// Resolved reports whether the mapping was bound to a server by Resolve.
func (m *Mapping) Resolved() bool { return m.resolved }

// Resolve binds the mapping to the server of db and returns the result, a
// copy: its schema defaults to the connection's database when it names
// none, and each set of shard tables is expanded — every table of a range
// must exist, each * pattern must match at least one table (one created
// later is followed after a restart). The cdc, the reconciler, status and
// mapping check resolve a mapping before anything else; SourceTables and
// TablesOf then list the concrete tables. It checks no column (Check
// does).
func (m *Mapping) Resolve(ctx context.Context, db *sql.DB) (*Mapping, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("resolve mapping: %w", err)
	}
	defer conn.Close()
	r, err := m.resolveOn(ctx, conn)
	if err != nil {
		return nil, err
	}
	return r, nil
}

// resolveOn is Resolve on conn. With an error it also returns the mapping
// resolved to the tables that do exist, for Check to look further.
func (m *Mapping) resolveOn(ctx context.Context, conn *sql.Conn) (*Mapping, error) {
	r := *m
	if r.Schema == "" {
		var cur sql.NullString
		if err := conn.QueryRowContext(ctx, "SELECT DATABASE()").Scan(&cur); err != nil {
			return nil, fmt.Errorf("resolve mapping: %w", err)
		}
		r.Schema = cur.String
	}
	if err := r.resolveTimeZone(ctx, conn); err != nil {
		return nil, err
	}
	r.resolved, r.shards = true, map[tableKind][]TableName{}
	var errs []error
	for _, s := range r.specs() {
		if !s.source {
			continue
		}
		ts, err := r.parseSet(s.table)
		if err != nil {
			return nil, fmt.Errorf("mapping: %s.table %w", s.key, err)
		}
		if !ts.isSet() {
			r.shards[s.kind] = ts.names()
			continue
		}
		tables, err := resolveSet(ctx, conn, s, ts)
		if err != nil {
			errs = append(errs, err)
		}
		r.shards[s.kind] = tables
	}
	return &r, errors.Join(errs...)
}

// resolveSet lists the tables of one role's set on the server: each name
// of its ranges that exists (the others are an error, named), and the
// tables each * pattern matches (none is an error).
func resolveSet(ctx context.Context, conn *sql.Conn, s tableSpec, ts tableSet) ([]TableName, error) {
	if ts.noSchema {
		return nil, fmt.Errorf("mapping: %s.table %q has no schema, and neither the mapping (schema:) nor the connection names a database", s.key, s.table)
	}
	have, err := listTables(ctx, conn, ts.schema)
	if err != nil {
		return nil, err
	}
	var out, missing []TableName
	var unmatched []string
	seen := map[TableName]bool{}
	for _, n := range ts.names() {
		if !strings.Contains(n.Schema+n.Name, "*") {
			if !slices.Contains(have, n) {
				missing = append(missing, n)
			} else if !seen[n] {
				seen[n] = true
				out = append(out, n)
			}
			continue
		}
		found := 0
		for _, t := range have {
			if globMatch(n.Schema, t.Schema) && globMatch(n.Name, t.Name) {
				found++
				if !seen[t] {
					seen[t] = true
					out = append(out, t)
				}
			}
		}
		if found == 0 {
			unmatched = append(unmatched, n.String())
		}
	}
	var errs []error
	if len(missing) > 0 {
		names := make([]string, len(missing))
		for i, t := range missing {
			names[i] = t.String()
		}
		errs = append(errs, fmt.Errorf("mapping: %s.table %q: %d of its %d tables are missing on the server: %s",
			s.key, s.table, len(missing), len(missing)+len(out), FewOf(names, 20)))
	}
	if len(unmatched) > 0 {
		errs = append(errs, fmt.Errorf("mapping: %s.table %q: %s matches no table on the server", s.key, s.table, strings.Join(unmatched, ", ")))
	}
	if len(out) > MaxShards {
		errs = append(errs, fmt.Errorf("mapping: %s.table %q matches %d tables; at most %d per role", s.key, s.table, len(out), MaxShards))
	}
	return out, errors.Join(errs...)
}

// listTables lists the base tables of the schemas a schema part names (of
// every schema but the server's own when it has a *), sorted with numbers
// in their order (user_coupon_2 before user_coupon_10).
func listTables(ctx context.Context, conn *sql.Conn, schema namePattern) ([]TableName, error) {
	q := "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES WHERE TABLE_TYPE <> 'VIEW' AND "
	var args []any
	if schema.hasStar() {
		q += "TABLE_SCHEMA NOT IN ('mysql', 'information_schema', 'performance_schema', 'sys')"
	} else {
		names := schema.expand()
		q += "TABLE_SCHEMA IN (" + sqltx.Placeholders(len(names)) + ")"
		for _, n := range names {
			args = append(args, n)
		}
	}
	var out []TableName
	err := sqltx.EachRow(ctx, conn, q, args, func(rows *sql.Rows) error {
		var t TableName
		if err := rows.Scan(&t.Schema, &t.Name); err != nil {
			return err
		}
		out = append(out, t)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("resolve mapping: list tables: %w", err)
	}
	slices.SortFunc(out, func(a, b TableName) int {
		if c := naturalCompare(a.Schema, b.Schema); c != 0 {
			return c
		}
		return naturalCompare(a.Name, b.Name)
	})
	return out, nil
}

// naturalCompare orders strings with their runs of digits compared as
// numbers.
func naturalCompare(a, b string) int {
	for a != "" && b != "" {
		da, db := digitRun(a), digitRun(b)
		if da > 0 && db > 0 {
			na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if c := len(na) - len(nb); c != 0 {
				return c
			}
			if c := strings.Compare(na, nb); c != 0 {
				return c
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return int(a[0]) - int(b[0])
		}
		a, b = a[1:], b[1:]
	}
	return len(a) - len(b)
}

func digitRun(s string) int {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}
