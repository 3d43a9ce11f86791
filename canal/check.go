package canal

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// Check verifies the mapping against a server: every named table exists
// and has every named column, every subscribed table has a PRIMARY KEY, and
// the server writes a binlog (log_bin ON) in ROW format with FULL row
// images. Unqualified tables are looked up in Schema, or in the database of
// db's connection when Schema is empty. All problems are reported together.
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

	mm := m
	if m.Schema == "" {
		var cur sql.NullString
		if err := conn.QueryRowContext(ctx, "SELECT DATABASE()").Scan(&cur); err != nil {
			return fmt.Errorf("check mapping: %w", err)
		}
		mm = m.withSchema(cur.String)
	}
	for _, s := range mm.specs() {
		sch, tbl := mm.split(s.table)
		if sch == "" {
			errs = append(errs, fmt.Errorf("mapping: %s.table %q has no schema, and neither the mapping (schema:) nor the connection names a database", s.key, s.table))
			continue
		}
		if err := checkTable(ctx, conn, s, sch, tbl); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func checkBinlogSettings(ctx context.Context, conn *sql.Conn) error {
	var logBin, format, image sql.NullString
	err := conn.QueryRowContext(ctx, "SELECT @@GLOBAL.log_bin, @@GLOBAL.binlog_format, @@GLOBAL.binlog_row_image").
		Scan(&logBin, &format, &image)
	if err != nil {
		return fmt.Errorf("check binlog settings: %w", err)
	}
	var errs []error
	if v := strings.ToUpper(logBin.String); v != "1" && v != "ON" {
		errs = append(errs, errors.New("server: the binlog is off (log_bin=OFF); start the server with --log-bin"))
	}
	if v := strings.ToUpper(format.String); v != "ROW" {
		errs = append(errs, fmt.Errorf("server: binlog_format is %s, couponlink needs ROW (SET GLOBAL binlog_format=ROW and in the server config)", v))
	}
	if v := strings.ToUpper(image.String); v != "FULL" {
		errs = append(errs, fmt.Errorf("server: binlog_row_image is %s, couponlink needs FULL (SET GLOBAL binlog_row_image=FULL and in the server config)", v))
	}
	return errors.Join(errs...)
}

func checkTable(ctx context.Context, conn *sql.Conn, s tableSpec, sch, tbl string) error {
	cols, err := stringList(ctx, conn,
		"SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION", sch, tbl)
	if err != nil {
		return fmt.Errorf("check mapping: read columns of %s.%s: %w", sch, tbl, err)
	}
	if len(cols) == 0 {
		tables, err := stringList(ctx, conn,
			"SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? ORDER BY TABLE_NAME", sch)
		if err != nil {
			return fmt.Errorf("check mapping: list tables of %s: %w", sch, err)
		}
		if len(tables) == 0 {
			return fmt.Errorf("mapping: %s.table names %s.%s but there is no database %q (or it has no table this user can see)", s.key, sch, tbl, sch)
		}
		return fmt.Errorf("mapping: %s.table names %s.%s but there is no such table (%s has: %s)", s.key, sch, tbl, sch, shortList(tables))
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
			return fmt.Errorf("check mapping: read primary key of %s.%s: %w", sch, tbl, err)
		}
		if n == 0 {
			errs = append(errs, fmt.Errorf("mapping: %s.table %s.%s has no PRIMARY KEY; the binlog of a table without one cannot be followed reliably", s.key, sch, tbl))
		}
	}
	return errors.Join(errs...)
}

func stringList(ctx context.Context, conn *sql.Conn, q string, args ...any) ([]string, error) {
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
