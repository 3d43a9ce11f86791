package canal

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// A role that a sharding middleware splits by user (user_coupon,
// redemption_log, orders) may name a set of tables: numeric brace ranges
// in the schema and/or the table part (shard_{0..1}.user_coupon_{00..63},
// zero padding kept) or * patterns matched against the server's tables
// when the mapping is resolved (Resolve). The other roles name one table.

// MaxShards is the most tables one role's set may stand for.
const MaxShards = 4096

// shardable says which roles may name a set of tables.
func shardable(kind tableKind) bool {
	return kind == kindUserCoupon || kind == kindRedemption || kind == kindOrder
}

// TableName is one concrete table: its schema ("" when none is known) and
// its name.
type TableName struct{ Schema, Name string }

// String is schema.table, or the bare table when no schema is known.
func (t TableName) String() string {
	if t.Schema == "" {
		return t.Name
	}
	return t.Schema + "." + t.Name
}

// segment is one part of a name pattern: literal text, a numeric range
// {lo..hi} (zero-padded to width) or a * wildcard.
type segment struct {
	lit           string
	star, isRange bool
	lo, hi        int64
	width         int
}

// namePattern is a schema or table part as written, parsed.
type namePattern []segment

// parsePattern parses a schema or table part: literal text, {lo..hi}
// ranges and * wildcards.
func parsePattern(s string) (namePattern, error) {
	var p namePattern
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			p = append(p, segment{lit: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '{':
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				return nil, fmt.Errorf("%q has a { without its }", s)
			}
			r, err := parseRange(s[i+1 : i+end])
			if err != nil {
				return nil, err
			}
			flush()
			p = append(p, r)
			i += end
		case '}':
			return nil, fmt.Errorf("%q has a } without its {", s)
		case '*':
			flush()
			if len(p) == 0 || !p[len(p)-1].star {
				p = append(p, segment{star: true})
			}
		case '`', 0, ' ', '\t', '\n', '.':
			return nil, fmt.Errorf("%q holds %q", s, string(c))
		default:
			lit.WriteByte(c)
		}
	}
	flush()
	return p, nil
}

// parseRange parses the inside of {lo..hi}: two unsigned numbers, lo ≤ hi.
// A bound written with a leading zero pads every number to the wider
// bound's width, as a shell's brace expansion does.
func parseRange(in string) (segment, error) {
	a, b, ok := strings.Cut(in, "..")
	lo, errA := strconv.ParseUint(a, 10, 31)
	hi, errB := strconv.ParseUint(b, 10, 31)
	if !ok || errA != nil || errB != nil || strings.ContainsAny(a+b, "+-") {
		return segment{}, fmt.Errorf("{%s} is not a numeric range (write {0..63}, or {00..63} for zero-padded names)", in)
	}
	if lo > hi {
		return segment{}, fmt.Errorf("{%s} counts down; write {%s..%s}", in, b, a)
	}
	r := segment{isRange: true, lo: int64(lo), hi: int64(hi)}
	if (len(a) > 1 && a[0] == '0') || (len(b) > 1 && b[0] == '0') {
		r.width = max(len(a), len(b))
	}
	return r, nil
}

// count is how many names the ranges expand to (a * counts once).
func (p namePattern) count() int64 {
	n := int64(1)
	for _, s := range p {
		if s.isRange {
			n *= s.hi - s.lo + 1
			if n > MaxShards {
				return MaxShards + 1 // large enough to refuse, without overflow
			}
		}
	}
	return n
}

func (p namePattern) hasStar() bool {
	return slices.ContainsFunc(p, func(s segment) bool { return s.star })
}

func (p namePattern) isSet() bool {
	return slices.ContainsFunc(p, func(s segment) bool { return s.star || s.isRange })
}

// expand lists the names the ranges stand for, in order; a * stays a * in
// them (a glob for match).
func (p namePattern) expand() []string {
	out := []string{""}
	for _, s := range p {
		switch {
		case s.star:
			for i := range out {
				out[i] += "*"
			}
		case s.isRange:
			next := make([]string, 0, len(out)*int(s.hi-s.lo+1))
			for _, prefix := range out {
				for n := s.lo; n <= s.hi; n++ {
					next = append(next, fmt.Sprintf("%s%0*d", prefix, s.width, n))
				}
			}
			out = next
		default:
			for i := range out {
				out[i] += s.lit
			}
		}
	}
	return out
}

// tableSet is a mapped table name as written, parsed: one table, or a set.
type tableSet struct {
	schema, table namePattern
	noSchema      bool // neither the name nor the mapping names a schema
}

// splitName splits a written table name at its first dot outside braces.
func splitName(written string) (schema, table string, qualified bool) {
	depth := 0
	for i := 0; i < len(written); i++ {
		switch written[i] {
		case '{':
			depth++
		case '}':
			depth--
		case '.':
			if depth == 0 {
				return written[:i], written[i+1:], true
			}
		}
	}
	return "", written, false
}

// parseSet parses a written table name, its schema defaulting to m.Schema.
func (m *Mapping) parseSet(written string) (tableSet, error) {
	sch, tbl := m.split(written)
	var ts tableSet
	var err error
	if ts.table, err = parsePattern(tbl); err != nil || len(ts.table) == 0 {
		return ts, fmt.Errorf("%q is not a valid table name (write table or schema.table): %w", written, orEmpty(err))
	}
	if ts.noSchema = sch == ""; !ts.noSchema {
		if ts.schema, err = parsePattern(sch); err != nil {
			return ts, fmt.Errorf("%q is not a valid table name (write table or schema.table): %w", written, err)
		}
	}
	for _, part := range []namePattern{ts.schema, ts.table} {
		for _, s := range part {
			if len(s.lit) > 64 {
				return ts, fmt.Errorf("%q: a name is longer than 64 characters", written)
			}
		}
	}
	if n := ts.schema.count() * ts.table.count(); n > MaxShards {
		return ts, fmt.Errorf("%q stands for more than %d tables", written, MaxShards)
	}
	return ts, nil
}

func orEmpty(err error) error {
	if err == nil {
		return fmt.Errorf("the name is empty")
	}
	return err
}

func (t tableSet) isSet() bool   { return t.schema.isSet() || t.table.isSet() }
func (t tableSet) hasStar() bool { return t.schema.hasStar() || t.table.hasStar() }

// names lists the tables a set stands for, ranges expanded; a * stays in
// them.
func (t tableSet) names() []TableName {
	schemas, tables := t.schemas(), t.table.expand()
	out := make([]TableName, 0, len(schemas)*len(tables))
	for _, s := range schemas {
		for _, n := range tables {
			out = append(out, TableName{s, n})
		}
	}
	return out
}

// globMatch reports whether name matches pattern, where * stands for any
// run of characters.
func globMatch(pattern, name string) bool {
	for len(pattern) > 0 {
		if pattern[0] == '*' {
			rest := pattern[1:]
			for i := 0; i <= len(name); i++ {
				if globMatch(rest, name[i:]) {
					return true
				}
			}
			return false
		}
		if len(name) == 0 || name[0] != pattern[0] {
			return false
		}
		pattern, name = pattern[1:], name[1:]
	}
	return len(name) == 0
}

// globsMeet reports whether some name matches both globs.
func globsMeet(a, b string) bool {
	memo := map[[2]int]bool{}
	var meet func(i, j int) bool
	meet = func(i, j int) bool {
		key := [2]int{i, j}
		if v, ok := memo[key]; ok {
			return v
		}
		var ok bool
		switch {
		case i == len(a) && j == len(b):
			ok = true
		case i < len(a) && a[i] == '*':
			ok = meet(i+1, j) || (j < len(b) && meet(i, j+1))
		case j < len(b) && b[j] == '*':
			ok = meet(i, j+1) || (i < len(a) && meet(i+1, j))
		case i < len(a) && j < len(b) && a[i] == b[j]:
			ok = meet(i+1, j+1)
		}
		memo[key] = ok
		return ok
	}
	return meet(0, 0)
}

// partsMeet reports whether two lists of globs share a name, and one when
// both are concrete.
func partsMeet(a, b []string) (example string, ok bool) {
	if !slices.ContainsFunc(append(slices.Clip(a), b...), func(s string) bool { return strings.Contains(s, "*") }) {
		set := make(map[string]bool, len(a))
		for _, s := range a {
			set[s] = true
		}
		for _, s := range b {
			if set[s] {
				return s, true
			}
		}
		return "", false
	}
	for _, x := range a {
		for _, y := range b {
			if globsMeet(x, y) {
				if !strings.Contains(x, "*") {
					return x, true
				}
				if !strings.Contains(y, "*") {
					return y, true
				}
				return "", true
			}
		}
	}
	return "", false
}

// overlap reports whether two sets can name one table (the schema and the
// table parts are independent, so both must meet), with an example name
// when one is known.
func overlap(a, b tableSet) (string, bool) {
	schema, ok := partsMeet(a.schemas(), b.schemas())
	if !ok {
		return "", false
	}
	table, ok := partsMeet(a.table.expand(), b.table.expand())
	switch {
	case !ok:
		return "", false
	case table == "" || (schema == "" && !a.noSchema):
		return "", true
	}
	return TableName{schema, table}.String(), true
}

// schemas lists the schema part's names ("" when there is none), as
// expand does.
func (t tableSet) schemas() []string {
	if t.noSchema {
		return []string{""}
	}
	return t.schema.expand()
}

// FewOf is up to n items of a list, then "… N more".
func FewOf(list []string, n int) string {
	if len(list) > n {
		return strings.Join(list[:n], ", ") + fmt.Sprintf(", … %d more", len(list)-n)
	}
	return strings.Join(list, ", ")
}
