package canal

import (
	"context"
	"strings"
	"testing"
	"time"

	gocanal "github.com/go-mysql-org/go-mysql/canal"
	"github.com/go-mysql-org/go-mysql/schema"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/internal/testenv"
)

// withoutExpiry is ts with no coupon expiry, for the tests that are not
// about it.
func withoutExpiry(ts []Transition) []Transition {
	out := make([]Transition, len(ts))
	for i, t := range ts {
		t.Expires = time.Time{}
		out[i] = t
	}
	return out
}

// shopYAML is a shop with per-coupon expiry, unlimited budgets, campaigns
// off the shelf by status or soft delete, and its times in Shanghai.
const shopYAML = `
schema: shop
user_coupon: {table: t_uc, id: id, template: tpl, status: st, user: uid, expires_at: expire_time}
status: {AVAILABLE: [0], USED: [1], EXPIRED: [2]}
redemption_evidence: none
template: {table: t_tpl, id: id, total_quota: budget, end_time: end_at, unlimited: [0],
           status: {column: state, off_shelf: [0, 2]}, deleted: {column: deleted, values: [1]}}
time_zone: Asia/Shanghai
`

// datetimeTable is a table whose columns named in datetimes are DATETIME.
func datetimeTable(sch, name string, datetimes []string, cols ...string) *schema.Table {
	t := table(sch, name, cols...)
	for i := range t.Columns {
		for _, d := range datetimes {
			if t.Columns[i].Name == d {
				t.Columns[i].Type = schema.TYPE_DATETIME
			}
		}
	}
	return t
}

func TestMappingShelfAndTimeZoneKeys(t *testing.T) {
	m, err := LoadMapping([]byte(shopYAML))
	require.NoError(t, err)
	require.True(t, m.FollowsTemplates())
	require.Equal(t, "Asia/Shanghai", m.Location().String())
	require.True(t, m.Template.IsUnlimited(0))
	require.False(t, m.Template.IsUnlimited(10))
	off := func(status, deleted any) bool {
		ok, err := m.Template.OffShelfWhen().Matches([]any{status, deleted})
		require.NoError(t, err)
		return ok
	}
	require.True(t, off(int64(2), int64(0)))
	require.False(t, off(int64(1), int64(0)))
	require.False(t, off(nil, nil), "NULLs are on the shelf")
	require.True(t, off(int64(1), int64(1)), "soft-deleted")

	// a Shanghai wall clock is 8 hours ahead of UTC
	wall := time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)
	require.Equal(t, time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC), m.WallTime(wall))
	require.Equal(t, wall, m.WallClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)))
	require.True(t, m.WallTime(time.Time{}).IsZero())

	plain, err := LoadMapping([]byte(legacyYAML))
	require.NoError(t, err)
	require.Equal(t, time.UTC, plain.Location(), "no time_zone: UTC, as before")
	require.Equal(t, wall, plain.WallTime(wall))

	for _, c := range []struct{ from, to, want string }{
		{"time_zone: Asia/Shanghai", "time_zone: Mars/Olympus", `time_zone "Mars/Olympus" is not a known zone`},
		{"status: {column: state, off_shelf: [0, 2]}", "status: {column: state}", "template.status lists no off_shelf code"},
		{"status: {column: state, off_shelf: [0, 2]}", "status: {off_shelf: [0]}", "template.status needs a column"},
		{"deleted: {column: deleted, values: [1]}", "deleted: {column: deleted}", "template.deleted lists no value"},
		{"unlimited: [0]", "unlimited: 0", "cannot unmarshal"},
	} {
		_, err := LoadMapping([]byte(strings.Replace(shopYAML, c.from, c.to, 1)))
		require.ErrorContains(t, err, c.want, c.to)
	}
}

func TestServerZone(t *testing.T) {
	for _, c := range []struct {
		tz, system string
		offset     int64
		name       string
		at         int // the offset in seconds at 2026-07-01
	}{
		{"SYSTEM", "Asia/Shanghai", 8 * 3600, "Asia/Shanghai", 8 * 3600},
		{"SYSTEM", "UTC", 0, "UTC", 0},
		{"+08:00", "UTC", 0, "+08:00", 8 * 3600},
		{"-03:30", "UTC", 0, "-03:30", -(3*3600 + 30*60)},
		{"Europe/Berlin", "CET", 3600, "Europe/Berlin", 2 * 3600},
		{"SYSTEM", "CST", 8 * 3600, "CST (UTC+08:00)", 8 * 3600}, // an abbreviation: the offset now
	} {
		loc, err := ServerZone(c.tz, c.system, c.offset)
		require.NoError(t, err, c.tz)
		require.Equal(t, c.name, loc.String())
		_, off := time.Date(2026, 7, 1, 0, 0, 0, 0, loc).Zone()
		require.Equal(t, c.at, off, c.tz)
	}
	_, err := ServerZone("+8h", "UTC", 0)
	require.Error(t, err)
}

// A template's unlimited budget, shelf state and Shanghai end time, and a
// coupon's own expiry, as the decoder reads them.
func TestDecodeShelfAndZone(t *testing.T) {
	m, err := LoadMapping([]byte(shopYAML))
	require.NoError(t, err)
	d := newDecoder(m)
	tpl := datetimeTable("shop", "t_tpl", []string{"end_at"}, "id", "budget", "end_at", "state", "deleted")
	endWall := time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC) // 20:00 in Shanghai
	end := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	row := func(budget, state, deleted any) []any { return []any{int32(9), budget, endWall, state, deleted} }
	var b Batch
	for _, e := range []*gocanal.RowsEvent{
		ev(tpl, gocanal.InsertAction, row(int32(0), int8(1), int8(0))),                                  // unlimited, on the shelf
		ev(tpl, gocanal.UpdateAction, row(int32(0), int8(1), int8(0)), row(int32(0), int8(2), int8(0))), // off by its status
		ev(tpl, gocanal.UpdateAction, row(int32(0), int8(2), int8(0)), row(int32(5), int8(1), int8(1))), // limited, soft-deleted
		ev(tpl, gocanal.UpdateAction, row(int32(5), int8(1), int8(1)), row(int32(5), int8(1), nil)),     // undeleted (NULL)
	} {
		_, err := d.decode(e, &b)
		require.NoError(t, err)
	}
	require.Equal(t, []TemplateChange{
		{Template: 9, Unlimited: true, End: end, Inserted: true},
		{Template: 9, Unlimited: true, OffShelf: true, End: end, PrevUnlimited: true, PrevEnd: end},
		{Template: 9, Quota: 5, Known: true, OffShelf: true, End: end, PrevUnlimited: true, PrevOffShelf: true, PrevEnd: end},
		{Template: 9, Quota: 5, Known: true, End: end, PrevQuota: 5, PrevKnown: true, PrevOffShelf: true, PrevEnd: end},
	}, b.Templates)

	uc := datetimeTable("shop", "t_uc", []string{"expire_time"}, "id", "uid", "tpl", "st", "expire_time")
	_, err = d.decode(ev(uc, gocanal.InsertAction, []any{int64(1), "u", int32(9), int8(0), endWall}), &b)
	require.NoError(t, err)
	require.Equal(t, end, b.Transitions[0].Expires, "a DATETIME expiry read in Shanghai")
	require.Equal(t, coupon.Available, b.Transitions[0].To)

	// a TIMESTAMP column is an instant: no zone applies
	ts := table("shop", "t_uc", "id", "uid", "tpl", "st", "expire_time")
	ts.Columns[4].Type = schema.TYPE_TIMESTAMP
	d2 := newDecoder(m)
	b = Batch{}
	_, err = d2.decode(ev(ts, gocanal.InsertAction, []any{int64(2), "u", int32(9), int8(0), end}), &b)
	require.NoError(t, err)
	require.Equal(t, end, b.Transitions[0].Expires)
}

// time_zone SYSTEM is read from the server when the mapping is resolved.
func TestResolveTimeZoneSystem(t *testing.T) {
	db, _ := testenv.MySQL(t)
	ctx := context.Background()
	var tz, system string
	var offset int64
	require.NoError(t, db.QueryRowContext(ctx, "SELECT @@global.time_zone, @@system_time_zone, TIMESTAMPDIFF(SECOND, UTC_TIMESTAMP(), NOW())").Scan(&tz, &system, &offset))
	want, err := ServerZone(tz, system, offset)
	require.NoError(t, err)
	m, err := LoadMapping([]byte(strings.Replace(legacyYAML, "default_channel: legacy", "default_channel: legacy\ntime_zone: SYSTEM", 1)))
	require.NoError(t, err)
	require.Equal(t, time.UTC, m.Location(), "unresolved: UTC")
	require.Equal(t, "SYSTEM (the server's zone)", m.ZoneText())
	conn, err := db.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, m.resolveTimeZone(ctx, conn))
	require.Equal(t, want.String(), m.Location().String())
	require.Equal(t, "SYSTEM: "+want.String(), m.ZoneText())
}
