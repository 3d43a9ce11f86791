package canal

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// asInt normalises a binlog or dump value to an int64. go-mysql gives
// integers as int8..int64 (uint8..uint64 for unsigned columns), and, from a
// dump or for DECIMAL, strings, []byte, float64 or a decimal type.
func asInt(v any) (n int64, null bool, err error) {
	switch x := v.(type) {
	case nil:
		return 0, true, nil
	case int64:
		return x, false, nil
	case int32:
		return int64(x), false, nil
	case int8:
		return int64(x), false, nil
	case int16:
		return int64(x), false, nil
	case int:
		return int64(x), false, nil
	case uint64:
		if x > math.MaxInt64 {
			return 0, false, fmt.Errorf("integer %d is out of range", x)
		}
		return int64(x), false, nil
	case uint32:
		return int64(x), false, nil
	case uint8:
		return int64(x), false, nil
	case uint16:
		return int64(x), false, nil
	case uint:
		if uint64(x) > math.MaxInt64 {
			return 0, false, fmt.Errorf("integer %d is out of range", x)
		}
		return int64(x), false, nil
	case bool:
		if x {
			return 1, false, nil
		}
		return 0, false, nil
	case float64:
		return floatInt(x)
	case float32:
		return floatInt(float64(x))
	case string:
		return parseInt(x)
	case []byte:
		return parseInt(string(x))
	case time.Time:
		return 0, false, fmt.Errorf("want an integer, got the time %s", x.Format(time.RFC3339))
	case fmt.Stringer: // decimal.Decimal and the like
		return parseInt(x.String())
	}
	return 0, false, fmt.Errorf("want an integer, got %T %v", v, v)
}

func floatInt(f float64) (int64, bool, error) {
	if f != math.Trunc(f) || f > math.MaxInt64 || f < math.MinInt64 {
		return 0, false, fmt.Errorf("want an integer, got %v", f)
	}
	return int64(f), false, nil
}

func parseInt(s string) (int64, bool, error) {
	s = strings.TrimSpace(s)
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, false, nil
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return floatInt(f)
	}
	return 0, false, fmt.Errorf("want an integer, got %q", s)
}

// asTime normalises a DATETIME, TIMESTAMP or DATE value to a UTC time;
// NULL and a zero date are the zero time. go-mysql gives a time.Time
// (DATETIME as its wall clock in UTC, like the driver with loc=UTC), or a
// string for a zero date, a date before 1970 or a dump's rows.
func asTime(v any) (time.Time, error) {
	switch x := v.(type) {
	case nil:
		return time.Time{}, nil
	case time.Time:
		return x.UTC(), nil
	case []byte:
		return parseTime(string(x))
	case string:
		return parseTime(x)
	}
	return time.Time{}, fmt.Errorf("want a time, got %T %v", v, v)
}

func parseTime(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "0000-00-00") {
		return time.Time{}, nil
	}
	for _, layout := range []string{"2006-01-02 15:04:05.999999999", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("want a time, got %q", s)
}

// timeCol reads a time column c as an instant in UTC: a DATETIME (wall)
// is a wall clock in the mapping's zone, a TIMESTAMP an instant already,
// an integer of Unix time (c.Unit) an instant too (0: none).
func (d *decoder) timeCol(v any, wall bool, c TimeColumn) (time.Time, error) {
	return instant(v, c, wall, d.loc)
}

// instant is a value of time column c: an integer of c's unit (0: none),
// or a DATETIME or TIMESTAMP (asTime), with wall a wall clock in loc;
// NULL is the zero time.
func instant(v any, c TimeColumn, wall bool, loc *time.Location) (time.Time, error) {
	if c.Integer() {
		n, null, err := asInt(v)
		if err != nil || null {
			return time.Time{}, err
		}
		return c.FromUnix(n), nil
	}
	t, err := asTime(v)
	if err != nil || !wall || t.IsZero() {
		return t, err
	}
	return inZone(t, loc), nil
}

// asString normalises a value to a string; NULL is "".
func asString(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case []byte:
		return string(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case int32:
		return strconv.FormatInt(int64(x), 10)
	case int8:
		return strconv.FormatInt(int64(x), 10)
	case int16:
		return strconv.FormatInt(int64(x), 10)
	case int:
		return strconv.Itoa(x)
	case uint64:
		return strconv.FormatUint(x, 10)
	case uint32:
		return strconv.FormatUint(uint64(x), 10)
	case uint8:
		return strconv.FormatUint(uint64(x), 10)
	case uint16:
		return strconv.FormatUint(uint64(x), 10)
	case time.Time:
		return x.Format("2006-01-02 15:04:05.999999")
	case fmt.Stringer:
		return x.String()
	}
	return fmt.Sprint(v)
}

// intCol reads an integer column; an unmapped column or NULL is 0.
func intCol(l *layout, row []any, i int, key string) (int64, error) {
	if i < 0 {
		return 0, nil
	}
	n, _, err := asInt(row[i])
	if err != nil {
		return 0, fmt.Errorf("decode %s (%s column): %w", l.name, key, err)
	}
	return n, nil
}

// requiredInt reads an integer column a record needs; ok is false when it
// is NULL (an unmapped column is 0, ok).
func requiredInt(l *layout, row []any, i int, key string) (n int64, ok bool, err error) {
	if i < 0 {
		return 0, true, nil
	}
	n, null, err := asInt(row[i])
	if err != nil {
		return 0, false, fmt.Errorf("decode %s (%s column): %w", l.name, key, err)
	}
	return n, !null, nil
}

// strCol reads a string column; an unmapped column or NULL is "".
func strCol(row []any, i int) string {
	if i < 0 {
		return ""
	}
	return asString(row[i])
}
