package canal

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Check verifies the mapping against a server: every named table exists
// and has every named column, every subscribed table has a PRIMARY KEY, the
// shards of a sharded role define their mapped columns alike, and the
// server writes a binlog (log_bin ON) in ROW format with FULL row images.
// Unqualified tables are looked up in Schema, or in the database of db's
// connection when Schema is empty. A mapping not yet resolved is resolved
// here (Resolve: missing shards, patterns matching nothing). All problems
// are reported together.
func (m *Mapping) Check(ctx context.Context, db *sql.DB) error {
	if err := m.Validate(); err != nil {
		return err
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("check mapping: %w", err)
	}
	defer conn.Close()

	var errs []error
	if err := checkBinlogSettings(ctx, conn); err != nil {
		errs = append(errs, err)
	}
	mm, err := m.bind(ctx, conn)
	if err != nil {
		errs = append(errs, err)
	}
	if mm != nil {
		errs = append(errs, mm.checkTables(ctx, conn)...)
	}
	return errors.Join(errs...)
}

// bind is m when it is resolved already, else m resolved on conn (with
// what exists of it when some shards are missing, and their error).
func (m *Mapping) bind(ctx context.Context, conn *sql.Conn) (*Mapping, error) {
	if m.resolved {
		return m, nil
	}
	return m.resolveOn(ctx, conn)
}

// checkTables checks every concrete table of every role, and the shards
// of a set against the role's first.
func (m *Mapping) checkTables(ctx context.Context, conn *sql.Conn) []error {
	var errs []error
	for _, s := range m.specs() {
		tables, err := m.tablesOf(s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var first TableName
		var firstCols []columnInfo
		for _, t := range tables {
			if t.Schema == "" {
				errs = append(errs, fmt.Errorf("mapping: %s.table %q has no schema, and neither the mapping (schema:) nor the connection names a database", s.key, s.table))
				break
			}
			cols, err := checkTable(ctx, conn, s, t.Schema, t.Name)
			if err != nil {
				errs = append(errs, err)
			}
			switch {
			case len(cols) == 0:
			case firstCols == nil:
				first, firstCols = t, cols
			default:
				errs = append(errs, compareShard(s, first, firstCols, t, cols)...)
			}
		}
	}
	return errs
}

// compareShard reports each mapped column that a shard defines otherwise
// than the role's first shard (a missing one checkTable reports).
func compareShard(s tableSpec, first TableName, firstCols []columnInfo, t TableName, cols []columnInfo) []error {
	var errs []error
	for _, c := range s.cols {
		a, b := findColumn(firstCols, c.column), findColumn(cols, c.column)
		if a == nil || b == nil || strings.EqualFold(a.columnType, b.columnType) {
			continue
		}
		errs = append(errs, fmt.Errorf("mapping: %s.%s: column %q of shard %s is %s, but of %s %s; every shard of a role must define its mapped columns alike",
			s.key, c.key, c.column, t, b.columnType, first, a.columnType))
	}
	return errs
}

// findColumn is the column named name (any case), or nil.
func findColumn(cols []columnInfo, name string) *columnInfo {
	if name == "" {
		return nil
	}
	i := slices.IndexFunc(cols, func(ci columnInfo) bool { return strings.EqualFold(ci.name, name) })
	if i < 0 {
		return nil
	}
	return &cols[i]
}

func checkBinlogSettings(ctx context.Context, conn *sql.Conn) error {
	s, err := readServerSettings(ctx, conn)
	if err != nil {
		return err
	}
	return s.problems()
}

// checkTable checks one table's mapped columns and primary key, and
// returns its columns (none when it does not exist).
func checkTable(ctx context.Context, conn *sql.Conn, s tableSpec, sch, tbl string) ([]columnInfo, error) {
	info, err := readColumns(ctx, conn, sch, tbl)
	if err != nil {
		return nil, err
	}
	if len(info) == 0 {
		tables, err := stringList(ctx, conn,
			"SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? ORDER BY TABLE_NAME", sch)
		if err != nil {
			return nil, fmt.Errorf("check mapping: list tables of %s: %w", sch, err)
		}
		if len(tables) == 0 {
			return nil, fmt.Errorf("mapping: %s.table names %s.%s but there is no database %q (or it has no table this user can see)", s.key, sch, tbl, sch)
		}
		return nil, fmt.Errorf("mapping: %s.table names %s.%s but there is no such table (%s has: %s)", s.key, sch, tbl, sch, shortList(tables))
	}
	cols := make([]string, len(info))
	for i, c := range info {
		cols[i] = c.name
	}
	var errs []error
	for _, c := range s.cols {
		if c.column == "" {
			continue
		}
		if !containsFold(cols, c.column) {
			errs = append(errs, fmt.Errorf("mapping: %s.%s names column %q but %s.%s has no such column (it has: %s)",
				s.key, c.key, c.column, sch, tbl, shortList(cols)))
		}
	}
	if s.source {
		var n int
		// STATISTICS, not TABLE_CONSTRAINTS: MariaDB shows the latter only
		// to a user with more than SELECT on the table
		err := conn.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.STATISTICS "+
			"WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND INDEX_NAME = 'PRIMARY'", sch, tbl).Scan(&n)
		if err != nil {
			return info, fmt.Errorf("check mapping: read primary key of %s.%s: %w", sch, tbl, err)
		}
		if n == 0 {
			errs = append(errs, fmt.Errorf("mapping: %s.table %s.%s has no PRIMARY KEY; the binlog of a table without one cannot be followed reliably", s.key, sch, tbl))
		}
	}
	return info, errors.Join(errs...)
}

func stringList(ctx context.Context, conn queryer, q string, args ...any) ([]string, error) {
	rows, err := conn.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

func shortList(list []string) string {
	const max = 30
	if len(list) > max {
		return strings.Join(list[:max], ", ") + fmt.Sprintf(", ... %d more", len(list)-max)
	}
	return strings.Join(list, ", ")
}
