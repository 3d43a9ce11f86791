package canal

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
)

// CheckReport is a mapping checked against a live server, as `couponlink
// mapping check` prints it: what each role names there, which checks are
// on and which are off, the errors (the cdc would refuse to start, or
// could not decode the columns) and the warnings (it runs, but rows may be
// undecodable or its queries slow).
type CheckReport struct {
	Reference bool
	Evidence  Evidence
	TimeZone  string       // the zone of the DATETIME columns (Mapping.ZoneText)
	Tables    []RoleTables // per role, its tables on the server
	Roles     []Role
	Checks    []CheckState
	Errors    []string
	Warnings  []string
}

// OK reports whether the check found no error (warnings allowed).
func (r *CheckReport) OK() bool { return len(r.Errors) == 0 }

// Role is one mapped column and what it is on the server.
type Role struct {
	Role     string // the mapping's key: user_coupon.status
	Table    string // schema.table
	Column   string
	Type     string // the column's type, e.g. tinyint(4); "" when it is missing
	Nullable bool
}

// Where is schema.table.column.
func (r Role) Where() string { return r.Table + "." + r.Column }

// columnInfo is one column of a table on the server.
type columnInfo struct {
	name, dataType, columnType string
	nullable                   bool
	scale                      int64
}

// Inspect checks the mapping against the server as Check does, and beyond
// it the mapped columns' types (ids, codes, budgets, limits and counts
// integer; end times DATETIME or TIMESTAMP; the rest any scalar), their
// NULLability (a nullable status or template column makes undecodable rows
// possible: a warning) and the indexes the checks' queries need (missing:
// a warning with the CREATE INDEX to add), shard by shard for a sharded
// role. The error is for a server that cannot be asked; what is wrong
// with the mapping is in the report.
func (m *Mapping) Inspect(ctx context.Context, db *sql.DB) (*CheckReport, error) {
	r := &CheckReport{Reference: m.reference, Evidence: m.RedemptionEvidence(), Checks: m.Checks(), TimeZone: m.ZoneText()}
	if err := m.Validate(); err != nil {
		r.Errors = flatten(err)
		return r, nil
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("check mapping: %w", err)
	}
	defer conn.Close()
	if err := checkBinlogSettings(ctx, conn); err != nil {
		r.Errors = append(r.Errors, flatten(err)...)
	}
	mm, err := m.bind(ctx, conn)
	if err != nil {
		r.Errors = append(r.Errors, flatten(err)...)
	}
	if mm == nil {
		return r, nil
	}
	r.TimeZone = mm.ZoneText() // SYSTEM read from the server
	for _, err := range mm.checkTables(ctx, conn) {
		r.Errors = append(r.Errors, flatten(err)...)
	}
	r.Tables = mm.RoleTables()
	for _, s := range mm.specs() {
		tables, err := mm.tablesOf(s)
		if err != nil {
			continue // checkTables said so
		}
		if err := mm.inspectRole(ctx, conn, r, s, tables); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// RoleTables is the tables a role names on the server: one, or the shards
// of a set (Written as the mapping writes it).
type RoleTables struct {
	Role, Written string
	Sharded       bool
	Tables        []string
}

// inspectRole adds the columns of a role's first table to the report, and
// each shard's nullability differences and missing indexes.
func (m *Mapping) inspectRole(ctx context.Context, conn *sql.Conn, r *CheckReport, s tableSpec, tables []TableName) error {
	var first TableName
	var firstCols []columnInfo
	for _, t := range tables {
		cols, err := readColumns(ctx, conn, t.Schema, t.Name)
		if err != nil {
			return err
		}
		if len(cols) == 0 {
			continue // Check said so
		}
		if firstCols == nil {
			first, firstCols = t, cols
			name := t.String()
			if m.Sharded(s.table) {
				name = m.qualified(s.table)
			}
			m.inspectColumns(r, s, name, cols)
		} else {
			r.Warnings = append(r.Warnings, nullDifferences(s, first, firstCols, t, cols)...)
		}
		idx, err := readIndexes(ctx, conn, t.Schema, t.Name)
		if err != nil {
			return err
		}
		r.Warnings = append(r.Warnings, m.missingIndexes(s, t.Schema, t.Name, idx)...)
	}
	return nil
}

// nullDifferences warns of each mapped column whose NULLability differs
// between a shard and the role's first.
func nullDifferences(s tableSpec, first TableName, firstCols []columnInfo, t TableName, cols []columnInfo) []string {
	var out []string
	for _, c := range s.cols {
		a, b := findColumn(firstCols, c.column), findColumn(cols, c.column)
		if a == nil || b == nil || a.nullable == b.nullable {
			continue
		}
		w := fmt.Sprintf("%s.%s: column %q of shard %s allows NULL, unlike %s's", s.key, c.key, c.column, t, first)
		if !b.nullable {
			w = fmt.Sprintf("%s.%s: column %q of shard %s is NOT NULL, unlike %s's", s.key, c.key, c.column, t, first)
		} else if why := nullableWarning(s.kind, c.key); why != "" {
			w += ": " + why
		}
		out = append(out, w)
	}
	return out
}

// inspectColumns adds the roles of one table and what is wrong with their
// columns.
func (m *Mapping) inspectColumns(r *CheckReport, s tableSpec, table string, cols []columnInfo) {
	for _, c := range s.cols {
		if c.column == "" {
			continue
		}
		role := Role{Role: s.key + "." + c.key, Table: table, Column: c.column}
		i := slices.IndexFunc(cols, func(ci columnInfo) bool { return strings.EqualFold(ci.name, c.column) })
		if i < 0 {
			r.Roles = append(r.Roles, role) // Check reported it missing
			continue
		}
		ci := cols[i]
		role.Type, role.Nullable = ci.columnType, ci.nullable
		r.Roles = append(r.Roles, role)
		if want, ok := typeProblem(c.key, m.timeColumn(s.key, c.key).Unit, ci); !ok {
			r.Errors = append(r.Errors, fmt.Sprintf("mapping: %s names %s, a %s column; it must be %s",
				role.Role, role.Where(), ci.columnType, want))
		}
		if ci.nullable {
			if why := nullableWarning(s.kind, c.key); why != "" {
				r.Warnings = append(r.Warnings, fmt.Sprintf("%s (%s) allows NULL: %s", role.Role, role.Where(), why))
			}
		}
	}
}

// Column classes by what couponlink reads from them.
const (
	classInt    = "an integer column (TINYINT .. BIGINT, or DECIMAL without a fraction)"
	classTime   = "a DATETIME or TIMESTAMP column (or, with unit: unix_seconds or unix_millis, an integer)"
	classScalar = "a scalar column (a number, a string, a date), not JSON or a geometry"
)

// classOf is what a mapped column must hold.
func classOf(key, unit string) string {
	switch {
	case key == "channel" || key == "order" || key == "user" || key == "name" || key == "kind":
		return classScalar
	case (key == "end_time" || key == "start_time" || key == "expires_at") && unit == "":
		return classTime
	}
	return classInt // ids, template, coupon, status codes, budgets, limits, counts, seq
}

// typeProblem says what the column should be when it is not.
func typeProblem(key, unit string, c columnInfo) (want string, ok bool) {
	want = classOf(key, unit)
	t := strings.ToLower(c.dataType)
	switch want {
	case classInt:
		switch t {
		case "tinyint", "smallint", "mediumint", "int", "integer", "bigint":
			return want, true
		case "decimal", "numeric":
			return want, c.scale == 0
		}
		return want, false
	case classTime:
		return want, t == "datetime" || t == "timestamp"
	}
	switch t {
	case "json", "geometry", "point", "linestring", "polygon", "multipoint", "multilinestring", "multipolygon", "geometrycollection":
		return want, false
	}
	return want, true
}

// nullableWarning is what a NULL in the column does, when it is worth a
// warning.
func nullableWarning(kind tableKind, key string) string {
	const undecodable = "undecodable rows are possible: a row with NULL there is an undecodable_row anomaly, counted nowhere (-strict stops the cdc instead)"
	switch {
	case kind == kindUserCoupon && (key == "status" || key == "template"):
		return undecodable
	case (kind == kindRedemption || kind == kindFlow) && key == "coupon":
		return undecodable
	case kind == kindTemplate && key == "total_quota":
		return "a template with a NULL budget is not judged for over-issue until it has one"
	case kind == kindOrder && (key == "template" || key == "user"):
		return "an order with NULL there is matched to no coupon"
	}
	return ""
}

func readColumns(ctx context.Context, conn *sql.Conn, sch, tbl string) ([]columnInfo, error) {
	rows, err := conn.QueryContext(ctx, `SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, IS_NULLABLE, COALESCE(NUMERIC_SCALE, 0)
		FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION`, sch, tbl)
	if err != nil {
		return nil, fmt.Errorf("check mapping: read columns of %s.%s: %w", sch, tbl, err)
	}
	defer rows.Close()
	var out []columnInfo
	for rows.Next() {
		var c columnInfo
		var nullable string
		if err := rows.Scan(&c.name, &c.dataType, &c.columnType, &nullable, &c.scale); err != nil {
			return nil, fmt.Errorf("check mapping: read columns of %s.%s: %w", sch, tbl, err)
		}
		c.nullable = strings.EqualFold(nullable, "YES")
		out = append(out, c)
	}
	return out, rows.Err()
}

// readIndexes is each index of a table with its columns in order.
func readIndexes(ctx context.Context, conn *sql.Conn, sch, tbl string) (map[string][]string, error) {
	rows, err := conn.QueryContext(ctx, `SELECT INDEX_NAME, COLUMN_NAME FROM information_schema.STATISTICS
		WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY INDEX_NAME, SEQ_IN_INDEX`, sch, tbl)
	if err != nil {
		return nil, fmt.Errorf("check mapping: read indexes of %s.%s: %w", sch, tbl, err)
	}
	defer rows.Close()
	out := map[string][]string{}
	for rows.Next() {
		var name string
		var col sql.NullString // NULL for an index on an expression
		if err := rows.Scan(&name, &col); err != nil {
			return nil, fmt.Errorf("check mapping: read indexes of %s.%s: %w", sch, tbl, err)
		}
		out[name] = append(out[name], col.String)
	}
	return out, rows.Err()
}

// indexNeed is an index a check's query needs: its leading columns, in
// any order.
type indexNeed struct {
	keys []string // column keys of the table spec
	why  string
}

// indexNeeds lists the indexes the queries on a mapped table need.
func (m *Mapping) indexNeeds(kind tableKind) []indexNeed {
	switch kind {
	case kindUserCoupon:
		needs := []indexNeed{{[]string{"template"}, "the reconciler and the cdc count a template's coupons"}}
		if m.Template.PerUserLimit != "" || m.RedemptionEvidence() == EvidenceOrderTable {
			needs = append(needs, indexNeed{[]string{"template", "user"}, "per-user checks count a user's coupons of a template"})
		}
		return needs
	case kindRedemption:
		return []indexNeed{{[]string{"coupon"}, "used_without_redemption looks up a coupon's write-off rows"}}
	case kindOrder:
		if m.RedemptionEvidence() == EvidenceCouponOrder {
			return []indexNeed{{[]string{"order"}, "an order kept on a coupon row is looked up by its number"}}
		}
		return []indexNeed{{[]string{"template", "user"}, "the order checks count the orders of a (template, user)"}}
	case kindTemplate:
		return []indexNeed{{[]string{"id"}, "templates are read by id"}}
	case kindQuota:
		return []indexNeed{{[]string{"template"}, "a template's channel buckets are read together"}}
	}
	return nil
}

// missingIndexes warns of each needed index the table lacks, with the
// statement that adds it; one index serves a need that its leading
// columns cover.
func (m *Mapping) missingIndexes(s tableSpec, sch, tbl string, idx map[string][]string) []string {
	type missing struct {
		cols []string
		why  []string
	}
	var miss []*missing
	for _, need := range m.indexNeeds(s.kind) {
		cols := make([]string, 0, len(need.keys))
		for _, k := range need.keys {
			i := slices.IndexFunc(s.cols, func(c colRef) bool { return c.key == k })
			if i < 0 || s.cols[i].column == "" {
				cols = nil
				break
			}
			cols = append(cols, s.cols[i].column)
		}
		if cols != nil && !hasLeading(idx, cols) {
			miss = append(miss, &missing{cols: cols, why: []string{need.why}})
		}
	}
	var out []string
	for i, e := range miss {
		covered := slices.ContainsFunc(miss[i+1:], func(f *missing) bool {
			if len(f.cols) > len(e.cols) && slices.Equal(f.cols[:len(e.cols)], e.cols) {
				f.why = append(e.why, f.why...)
				return true
			}
			return false
		})
		if covered {
			continue
		}
		name := "idx_couponlink_" + strings.ToLower(strings.Join(e.cols, "_"))
		if len(name) > 64 {
			name = name[:64]
		}
		out = append(out, fmt.Sprintf("%s.table %s.%s has no index on (%s): %s; add one: CREATE INDEX `%s` ON `%s`.`%s` (`%s`);",
			s.key, sch, tbl, strings.Join(e.cols, ", "), strings.Join(e.why, ", and "), name, sch, tbl, strings.Join(e.cols, "`, `")))
	}
	return out
}

// hasLeading reports whether an index starts with cols, in any order.
func hasLeading(idx map[string][]string, cols []string) bool {
	for _, ic := range idx {
		if len(ic) < len(cols) {
			continue
		}
		lead := ic[:len(cols)]
		all := true
		for _, c := range cols {
			if !containsFold(lead, c) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

// flatten lists the messages of a joined error, one per error.
func flatten(err error) []string {
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []string{err.Error()}
	}
	var out []string
	for _, e := range j.Unwrap() {
		out = append(out, flatten(e)...)
	}
	return out
}
