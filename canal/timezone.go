package canal

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
	_ "time/tzdata" // IANA names work without the system's zoneinfo (a scratch image)

	"github.com/couponlink/couponlink/internal/sqltx"
)

// The zone of a shop's DATETIME columns (time_zone): a DATETIME is a wall
// clock without a zone, and a shop writes it in its own (often the
// server's, by NOW()). couponlink reads end_time, expires_at and every
// DATETIME it compares as a wall clock in that zone: an IANA name
// (Asia/Shanghai), SYSTEM (the server's @@time_zone, or its
// @@system_time_zone when that is SYSTEM, read when the mapping is
// resolved), or none: UTC. A TIMESTAMP column is an instant (the binlog
// and the server convert it): the zone does not apply to it in the binlog.

// TimeZoneSystem is the time_zone value that reads the server's zone.
const TimeZoneSystem = "SYSTEM"

// validateTimeZone loads a named time_zone (SYSTEM waits for Resolve).
func (m *Mapping) validateTimeZone() []error {
	switch m.TimeZone {
	case "", TimeZoneSystem:
		return nil
	}
	loc, err := time.LoadLocation(m.TimeZone)
	if err != nil {
		return []error{fmt.Errorf("mapping: time_zone %q is not a known zone (want an IANA name such as Asia/Shanghai, or SYSTEM): %w", m.TimeZone, err)}
	}
	m.loc = loc
	return nil
}

// Location is the zone of the shop's DATETIME columns: UTC without
// time_zone (and for SYSTEM before the mapping is resolved).
func (m *Mapping) Location() *time.Location {
	if m.loc == nil {
		return time.UTC
	}
	return m.loc
}

// WallTime reads t, a DATETIME's wall clock as the driver and the binlog
// give it (in UTC), in the mapping's zone, and returns the instant in UTC.
// The zero time stays zero.
func (m *Mapping) WallTime(t time.Time) time.Time { return inZone(t, m.Location()) }

// WallClock is the wall clock of the instant t in the mapping's zone, as a
// UTC time.Time: the value to compare a DATETIME column with in SQL (the
// driver sends it as written).
func (m *Mapping) WallClock(t time.Time) time.Time {
	w := t.In(m.Location())
	return time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), w.Second(), w.Nanosecond(), time.UTC)
}

func inZone(t time.Time, loc *time.Location) time.Time {
	if t.IsZero() || loc == time.UTC {
		return t
	}
	u := t.UTC()
	return time.Date(u.Year(), u.Month(), u.Day(), u.Hour(), u.Minute(), u.Second(), u.Nanosecond(), loc).UTC()
}

// resolveTimeZone reads the server's zone for time_zone SYSTEM.
func (m *Mapping) resolveTimeZone(ctx context.Context, q sqltx.Querier) error {
	if m.TimeZone != TimeZoneSystem {
		return nil
	}
	var tz, system string
	var offset int64
	err := sqltx.EachRow(ctx, q, "SELECT @@global.time_zone, @@system_time_zone, TIMESTAMPDIFF(SECOND, UTC_TIMESTAMP(), NOW())", nil,
		func(rows *sql.Rows) error { return rows.Scan(&tz, &system, &offset) })
	if err != nil {
		return fmt.Errorf("mapping: time_zone SYSTEM: read the server's zone: %w", err)
	}
	loc, err := ServerZone(tz, system, offset)
	if err != nil {
		return err
	}
	m.loc = loc
	return nil
}

// WithServerZone is m, or for time_zone SYSTEM not yet read (an
// unresolved mapping: status, the API's views) a copy with the server's
// zone read through q.
func (m *Mapping) WithServerZone(ctx context.Context, q sqltx.Querier) (*Mapping, error) {
	if m.TimeZone != TimeZoneSystem || m.loc != nil {
		return m, nil
	}
	c := *m
	if err := c.resolveTimeZone(ctx, q); err != nil {
		return nil, err
	}
	return &c, nil
}

// ServerZone is the zone a server's NOW() writes in: its time_zone (a
// name, or an offset such as +08:00), or, when that is SYSTEM, its
// system_time_zone when Go knows the name. An abbreviation (CST, which
// names several zones) is taken as the server's current offset, which
// follows no daylight saving change: name the zone in time_zone instead.
func ServerZone(tz, system string, offset int64) (*time.Location, error) {
	name := tz
	if strings.EqualFold(tz, TimeZoneSystem) {
		name = system
	}
	if strings.HasPrefix(name, "+") || strings.HasPrefix(name, "-") {
		var h, mi int
		if _, err := fmt.Sscanf(name[1:], "%d:%d", &h, &mi); err != nil {
			return nil, fmt.Errorf("mapping: time_zone SYSTEM: the server's time_zone %q is not an offset", name)
		}
		secs := h*3600 + mi*60
		if name[0] == '-' {
			secs = -secs
		}
		return time.FixedZone(name, secs), nil
	}
	if strings.Contains(name, "/") || strings.EqualFold(name, "UTC") {
		if loc, err := time.LoadLocation(name); err == nil {
			return loc, nil
		}
	}
	return time.FixedZone(fmt.Sprintf("%s (UTC%+03d:%02d)", name, offset/3600, abs(offset%3600)/60), int(offset)), nil
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

// ZoneText is the zone of the DATETIME columns as mapping check shows it:
// "UTC (no time_zone)", "Asia/Shanghai", "SYSTEM: Asia/Shanghai" once
// resolved.
func (m *Mapping) ZoneText() string {
	switch m.TimeZone {
	case "":
		return "UTC (no time_zone)"
	case TimeZoneSystem:
		if m.loc == nil {
			return "SYSTEM (the server's zone)"
		}
		return "SYSTEM: " + m.loc.String()
	}
	return m.TimeZone
}
