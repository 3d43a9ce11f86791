package canal

import (
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// A state a shop marks by any of several columns: a row is soft-deleted,
// an order closed, a campaign off the shelf when one of its conditions
// holds, e.g. is_del = 1 OR refund_status = 2. Every role that names
// "the codes that mean X" takes such a list; the decode (Matches), the
// truth queries (SQL, NotSQL) and mapping check read it alike.

// Condition is one column of a table and the stored integer values that
// put a row in the state, e.g. {column: is_del, values: [1]}. A NULL
// matches no value.
type Condition struct {
	Column string  `yaml:"column"`
	Values []int64 `yaml:"values"`
}

// AnyOf is a state that holds when any of its conditions does (none: the
// mapping names no such state). In YAML it is one condition, as mappings
// always wrote it ({column: deleted, values: [1]}), or a sequence of them.
type AnyOf []Condition

// UnmarshalYAML reads one {column, values} or a sequence of them.
func (a *AnyOf) UnmarshalYAML(n *yaml.Node) error {
	return decodeOneOrList(n, (*[]Condition)(a))
}

// Columns are the columns the conditions name, in their order (a column
// named twice is listed twice).
func (a AnyOf) Columns() []string {
	out := make([]string, len(a))
	for i, c := range a {
		out[i] = c.Column
	}
	return out
}

// Matches says whether a row is in the state: vals[i] is the value of
// a[i].Column as the binlog or the driver hands it. A NULL matches no
// condition; a value that is no integer is an error.
func (a AnyOf) Matches(vals []any) (bool, error) {
	return a.match(func(i int) any { return vals[i] })
}

// matchRow is Matches over a row whose column i of the state is at
// row[idx[i]].
func (a AnyOf) matchRow(row []any, idx []int) (bool, error) {
	return a.match(func(i int) any { return row[idx[i]] })
}

func (a AnyOf) match(val func(i int) any) (bool, error) {
	for i, c := range a {
		v, null, err := asInt(val(i))
		if err != nil {
			return false, fmt.Errorf("column %s: %w", c.Column, err)
		}
		if !null && slices.Contains(c.Values, v) {
			return true, nil
		}
	}
	return false, nil
}

// SQL is the condition "the row is in the state" ("" when a is empty),
// its columns written by quote; the values are integers from the mapping,
// written as literals. A NULL column makes its condition not true.
func (a AnyOf) SQL(quote func(string) string) string {
	if len(a) == 0 {
		return ""
	}
	parts := make([]string, len(a))
	for i, c := range a {
		parts[i] = fmt.Sprintf("%s IN (%s)", quote(c.Column), literals(c.Values))
	}
	return "(" + strings.Join(parts, " OR ") + ")"
}

// NotSQL is the condition "the row is not in the state" ("" when a is
// empty): every column NULL or none of its values.
func (a AnyOf) NotSQL(quote func(string) string) string {
	if len(a) == 0 {
		return ""
	}
	parts := make([]string, len(a))
	for i, c := range a {
		q := quote(c.Column)
		parts[i] = fmt.Sprintf("(%s IS NULL OR %s NOT IN (%s))", q, q, literals(c.Values))
	}
	return strings.Join(parts, " AND ")
}

func literals(vals []int64) string {
	lits := make([]string, len(vals))
	for i, v := range vals {
		lits[i] = fmt.Sprint(v)
	}
	return strings.Join(lits, ", ")
}

// Text is the state for people: "shop.t.is_del in [1] or shop.t.refund in [2]"
// (col qualifies a column).
func (a AnyOf) Text(col func(string) string) string {
	parts := make([]string, len(a))
	for i, c := range a {
		parts[i] = fmt.Sprintf("%s in %v", col(c.Column), c.Values)
	}
	return strings.Join(parts, " or ")
}

// roleKey is the YAML key of condition i of a role written under key:
// key itself for a single condition, key[i] in a list of several.
func (a AnyOf) roleKey(key string, i int) string {
	if len(a) == 1 {
		return key
	}
	return fmt.Sprintf("%s[%d]", key, i)
}

// colRefs are the columns of the state as roles of its table (mapping
// check finds each one and wants an integer).
func (a AnyOf) colRefs(key string) []colRef {
	out := make([]colRef, len(a))
	for i, c := range a {
		out[i] = colRef{a.roleKey(key, i), c.Column, false}
	}
	return out
}

// validate says what is wrong with each condition, naming it by
// table.key or table.key[i]; value names what the values are (e.g.
// "value", "off_shelf code") and example is a condition written right.
func (a AnyOf) validate(table, key, value, example string) []error {
	var errs []error
	for i, c := range a {
		role := table + "." + a.roleKey(key, i)
		switch {
		case c.Column == "" || !validIdent(c.Column):
			errs = append(errs, fmt.Errorf("mapping: %s needs a column: e.g. %s: %s", role, key, example))
		case len(c.Values) == 0:
			errs = append(errs, fmt.Errorf("mapping: %s lists no %s: the stored integers that put the row in the state, e.g. %s", role, value, example))
		}
	}
	return errs
}

// decodeOneOrList reads a YAML mapping as a list of one, or a sequence as
// the list: how every "one condition, or several" role is written.
func decodeOneOrList[T any](n *yaml.Node, out *[]T) error {
	if n.Kind == yaml.SequenceNode {
		return n.Decode(out)
	}
	var one T
	if err := n.Decode(&one); err != nil {
		return err
	}
	*out = []T{one}
	return nil
}
