package canal

import (
	"fmt"
	"time"

	"go.yaml.in/yaml/v3"
)

// TimeColumn is a mapped time column. Written as a column name, it is a
// DATETIME or TIMESTAMP; written {column: end_time, unit: unix_seconds}
// (or unix_millis), an integer of Unix time, as shops written on PHP
// frameworks keep every time. time_zone applies to DATETIME only.
type TimeColumn struct {
	Column string `yaml:"column"`
	Unit   string `yaml:"unit,omitempty"`
}

// The units of an integer time column.
const (
	UnixSeconds = "unix_seconds"
	UnixMillis  = "unix_millis"
)

// UnmarshalYAML reads a column name or {column, unit}.
func (c *TimeColumn) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*c = TimeColumn{}
		return n.Decode(&c.Column)
	}
	type plain TimeColumn
	return n.Decode((*plain)(c))
}

// Integer says whether the column holds Unix time as an integer.
func (c TimeColumn) Integer() bool { return c.Unit != "" }

// validUnit says what is wrong with the unit ("": nothing).
func (c TimeColumn) validUnit() string {
	switch c.Unit {
	case "", UnixSeconds, UnixMillis:
		return ""
	}
	return fmt.Sprintf("unit %q is not %s or %s", c.Unit, UnixSeconds, UnixMillis)
}

// FromUnix is the instant an integer of the column's unit names; 0 (a
// shop's "no time") is the zero time.
func (c TimeColumn) FromUnix(n int64) time.Time {
	switch {
	case n == 0:
		return time.Time{}
	case c.Unit == UnixMillis:
		return time.UnixMilli(n).UTC()
	}
	return time.Unix(n, 0).UTC()
}

// timeColumn is the time column of a table's role (its YAML keys), or
// none: user_coupon.expires_at, template.end_time and template.start_time.
func (m *Mapping) timeColumn(table, key string) TimeColumn {
	switch {
	case table == "user_coupon" && key == "expires_at":
		return m.UserCoupon.ExpiresAt
	case table == "template" && key == "end_time":
		return m.Template.EndTime
	case table == "template" && key == "start_time":
		return m.Template.StartTime
	}
	return TimeColumn{}
}

// PastSQL is the SQL condition "the column's time is before at" (quoted:
// the quoted column) and its argument: a DATETIME or TIMESTAMP before the
// mapping's wall clock of at; an integer from 1 to before at in its unit
// (0: no time).
func (m *Mapping) PastSQL(c TimeColumn, quoted string, at time.Time) (string, any) {
	switch c.Unit {
	case UnixSeconds:
		return fmt.Sprintf("%s > 0 AND %s < ?", quoted, quoted), at.Unix()
	case UnixMillis:
		return fmt.Sprintf("%s > 0 AND %s < ?", quoted, quoted), at.UnixMilli()
	}
	return quoted + " < ?", m.WallClock(at)
}

// ReadTime is the instant a value of column c read by the driver names:
// a DATETIME's wall clock in the mapping's zone, an integer of c's unit;
// NULL (and an integer 0) is the zero time.
func (m *Mapping) ReadTime(c TimeColumn, v any) (time.Time, error) {
	return instant(v, c, true, m.Location())
}
