package inventory_test

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/internal/mysqlconn"
	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/inventory"
	"github.com/couponlink/couponlink/inventory/view"
)

// sourcesYAML maps a legacy shop whose tables have the same names on
// every source (each source's database); SOURCES are its sources.
const sourcesYAML = `
user_coupon: {table: t_user_coupon, id: id, template: tpl_id, channel: get_type, status: use_status}
status: {AVAILABLE: [0], USED: [1], EXPIRED: [2]}
redemption_log: {table: t_writeoff, id: id, coupon: coupon_id, order: order_no}
template: {table: t_coupon_tpl, id: id, total_quota: budget, name: name}
default_channel: "0"
sources:
SOURCES`

// source is one source's database on the test server, with its
// checkpoint and counters written as its cdc would have.
type source struct {
	name string
	db   *sql.DB
	dsn  string
}

func newSource(t *testing.T, name string, tpls string, counters string) source {
	db, dsn := testenv.MySQL(t)
	s := source{name: name, db: db, dsn: dsn}
	for _, q := range []string{
		"CREATE TABLE t_coupon_tpl (id BIGINT NOT NULL PRIMARY KEY, name VARCHAR(64) NOT NULL, budget BIGINT NULL)",
		"INSERT INTO t_coupon_tpl VALUES " + tpls,
		"INSERT INTO inventory_counter (template_id, channel, held, used, expired) VALUES " + counters,
		"INSERT INTO cdc_checkpoint (name, binlog_file, binlog_pos, gtid_set, event_time, events_applied, batches) " +
			"VALUES ('" + name + "', 'mysql-bin.000001', 4, '', NOW(6) - INTERVAL 2 SECOND, 10, 2)",
	} {
		_, err := db.Exec(q)
		require.NoError(t, err, q)
	}
	return s
}

func sourcesMapping(t *testing.T, srcs ...source) *canal.Mapping {
	var lines []string
	for _, s := range srcs {
		lines = append(lines, fmt.Sprintf("  - {name: %s, dsn: %q}", s.name, s.dsn))
	}
	m, err := canal.LoadMapping([]byte(strings.Replace(sourcesYAML, "SOURCES", strings.Join(lines, "\n")+"\n", 1)))
	require.NoError(t, err)
	return m
}

func openSource(dsn string) (*sql.DB, error) { return mysqlconn.Open(dsn, 2) }

type sumRow struct {
	counts view.Counts
	in     []string
	left   []string
}

func pairSums(a inventory.Across) map[inventory.Pair]sumRow {
	out := map[inventory.Pair]sumRow{}
	for _, p := range a.Pairs {
		out[p.Pair] = sumRow{p.Counts, p.Sources, p.Left}
	}
	return out
}

// ReadSources reads every source at once and sums their counters per
// pair and their templates (the budget from the template row, claimable
// = budget − the summed taken), each sum naming its sources; a source
// that is down, that does not answer within the timeout or whose cdc has
// not run is shown so, and every sum says it leaves it out.
func TestReadSources(t *testing.T) {
	ctx := context.Background()
	east := newSource(t, "east", "(1, 'spring', 20), (2, 'winter', 10)", "(1, '0', 3, 1, 0), (1, '1', 2, 0, 0), (2, '1', 0, 4, 0)")
	west := newSource(t, "west", "(1, 'spring', 25), (3, 'autumn', NULL)", "(1, '0', 5, 0, 1), (3, '0', 1, 0, 0)")
	down := source{name: "north", dsn: "root@tcp(" + testenv.FreeAddr(t) + ")/couponlink"}

	a, err := inventory.ReadSources(ctx, sourcesMapping(t, east, west), openSource, 5*time.Second)
	require.NoError(t, err)
	require.True(t, a.Complete())
	require.Equal(t, []inventory.SourceState{inventory.SourceUp, inventory.SourceUp}, []inventory.SourceState{a.Sources[0].State, a.Sources[1].State})
	both := []string{"east", "west"}
	require.Equal(t, map[inventory.Pair]sumRow{
		{Template: 1, Channel: "0"}: {view.Counts{Held: 8, Used: 1, Expired: 1}, both, nil},
		{Template: 1, Channel: "1"}: {view.Counts{Held: 2}, []string{"east"}, nil},
		{Template: 2, Channel: "1"}: {view.Counts{Used: 4}, []string{"east"}, nil},
		{Template: 3, Channel: "0"}: {view.Counts{Held: 1}, []string{"west"}, nil},
	}, pairSums(a))
	require.Len(t, a.Templates, 3)
	spring := a.Templates[0]
	claimable, known := spring.Claimable()
	assert.Equal(t, []any{int64(1), "spring", int64(20), int64(20 - 12), true, both},
		[]any{spring.ID, spring.Name, spring.Budget, claimable, known, spring.Sources}, "held 10 + used 1 + frozen 1 taken of east's budget")
	assert.Equal(t, "budget 20 on east, 25 on west", spring.Differ)
	assert.Equal(t, []view.Channel{{Name: "0", Counts: view.Counts{Held: 8, Used: 1, Expired: 1}}, {Name: "1", Counts: view.Counts{Held: 2}}}, spring.Channels)
	winter, autumn := a.Templates[1], a.Templates[2]
	claimable, _ = winter.Claimable()
	assert.Equal(t, []any{int64(6), []string{"east"}, ""}, []any{claimable, winter.Sources, winter.Differ})
	_, known = autumn.Claimable()
	assert.Equal(t, []any{"autumn", false, []string{"west"}}, []any{autumn.Name, known, autumn.Sources}, "a NULL budget: claimable unknown")
	for _, s := range a.Sources {
		assert.GreaterOrEqual(t, s.Status.Lag(), 2*time.Second, "%s: behind its server's binlog end by its last event's age", s.Name)
		assert.Equal(t, int64(10), s.Status.Checkpoint.EventsApplied)
	}

	// north is down: shown with its reason, and every sum leaves it out
	a, err = inventory.ReadSources(ctx, sourcesMapping(t, east, west, down), openSource, 5*time.Second)
	require.NoError(t, err)
	require.False(t, a.Complete())
	require.False(t, a.AllDown())
	require.Equal(t, []string{"north"}, a.Left())
	require.Equal(t, inventory.SourceDown, a.Sources[2].State)
	require.ErrorContains(t, a.Sources[2].Err, "connect: ")
	for p, row := range pairSums(a) {
		require.Equal(t, []string{"north"}, row.left, "pair %v", p)
	}
	require.Equal(t, view.Counts{Held: 8, Used: 1, Expired: 1}, pairSums(a)[inventory.Pair{Template: 1, Channel: "0"}].counts)
	for _, tpl := range a.Templates {
		require.False(t, tpl.Complete(), "template %d", tpl.ID)
	}

	// west's cdc has not run: no checkpoint, left out of the sums
	_, err = west.db.Exec("DELETE FROM cdc_checkpoint")
	require.NoError(t, err)
	a, err = inventory.ReadSources(ctx, sourcesMapping(t, east, west), openSource, 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, inventory.SourceNotStarted, a.Sources[1].State)
	require.Equal(t, []string{"west"}, a.Left())
	require.Equal(t, sumRow{view.Counts{Held: 3, Used: 1}, []string{"east"}, []string{"west"}}, pairSums(a)[inventory.Pair{Template: 1, Channel: "0"}])

	// a server that takes the connection and never answers: down once the timeout is over
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	testenv.AcceptEach(t, ln, func(c net.Conn) { t.Cleanup(func() { _ = c.Close() }) })
	slow := source{name: "slow", dsn: "root@tcp(" + ln.Addr().String() + ")/couponlink"}
	start := time.Now()
	a, err = inventory.ReadSources(ctx, sourcesMapping(t, east, slow), openSource, 300*time.Millisecond)
	require.NoError(t, err)
	require.Less(t, time.Since(start), 5*time.Second)
	require.Equal(t, inventory.SourceDown, a.Sources[1].State)
	require.ErrorContains(t, a.Sources[1].Err, "no answer within 300ms")
	require.Equal(t, inventory.SourceUp, a.Sources[0].State)

	a, err = inventory.ReadSources(ctx, sourcesMapping(t, down, slow), openSource, 300*time.Millisecond)
	require.NoError(t, err)
	require.True(t, a.AllDown())
	require.Empty(t, a.Pairs)

	_, err = inventory.ReadSources(ctx, canal.DefaultMapping(), openSource, time.Second)
	require.ErrorContains(t, err, "the mapping names no sources")
}

// ReadSourcesTemplate sums one template over the sources, with each
// source's part; a template no source has is NotFound.
func TestReadSourcesTemplate(t *testing.T) {
	ctx := context.Background()
	east := newSource(t, "east", "(1, 'spring', 20)", "(1, '0', 3, 1, 0), (1, '1', 2, 0, 0)")
	west := newSource(t, "west", "(1, 'spring', 20)", "(1, '0', 5, 0, 1)")
	down := source{name: "north", dsn: "root@tcp(" + testenv.FreeAddr(t) + ")/couponlink"}

	a, err := inventory.ReadSourcesTemplate(ctx, sourcesMapping(t, east, west, down), openSource, 5*time.Second, 1)
	require.NoError(t, err)
	require.Len(t, a.Templates, 1)
	tpl := a.Templates[0]
	require.Equal(t, view.Counts{Held: 10, Used: 1, Expired: 1}, tpl.Counts)
	require.Equal(t, []string{"east", "west"}, tpl.Sources)
	require.Equal(t, []string{"north"}, tpl.Left)
	require.Equal(t, view.Counts{Held: 5, Expired: 1}, tpl.Parts[1].Counts)
	require.Equal(t, []view.Channel{{Name: "0", Counts: view.Counts{Held: 8, Used: 1, Expired: 1}}, {Name: "1", Counts: view.Counts{Held: 2}}}, tpl.Channels)
	require.Empty(t, tpl.Differ)
	require.Equal(t, inventory.SourceDown, a.Sources[2].State)
	require.GreaterOrEqual(t, a.Sources[0].Status.Lag(), 2*time.Second)

	a, err = inventory.ReadSourcesTemplate(ctx, sourcesMapping(t, east, west), openSource, 5*time.Second, 99)
	e, ok := coupon.AsError(err)
	require.True(t, ok, "%v", err)
	require.Equal(t, coupon.NotFound("template", 99).Error(), e.Error())
	require.Len(t, a.Sources, 2)
}

// With the template table on one source (template.source), the other
// sources have no row of a campaign: their coupons are judged by the row
// on its source, as that source's own are. A campaign that has ended
// shows every AVAILABLE coupon of every source as expired; a fixed-window
// campaign's coupons past the end they copied at claim time are not
// expired while its window (since extended) is open.
func TestReadSourcesJudgeByTheTemplateRow(t *testing.T) {
	ctx := context.Background()
	const yaml = `
user_coupon: {table: t_user_coupon, id: id, template: tpl_id, channel: get_type, status: use_status, expires_at: end_at}
status: {AVAILABLE: [0], USED: [1], EXPIRED: [2]}
redemption_log: {table: t_writeoff, id: id, coupon: coupon_id, order: order_no}
template: {table: t_coupon_tpl, id: id, total_quota: budget, name: name, end_time: end_time,
           fixed_window: {column: kind, values: [1]}, source: east}
default_channel: "0"
sources:
SOURCES`
	setUp := func(name string, queries ...string) source {
		db, dsn := testenv.MySQL(t)
		for _, q := range append([]string{
			"CREATE TABLE t_user_coupon (id BIGINT NOT NULL PRIMARY KEY, tpl_id BIGINT NOT NULL, get_type VARCHAR(8) NULL, use_status INT NOT NULL, end_at DATETIME NULL)",
			"INSERT INTO cdc_checkpoint (name, binlog_file, binlog_pos, gtid_set, event_time, events_applied, batches) " +
				"VALUES ('" + name + "', 'mysql-bin.000001', 4, '', NOW(6), 10, 2)",
		}, queries...) {
			_, err := db.Exec(q)
			require.NoError(t, err, q)
		}
		return source{name: name, db: db, dsn: dsn}
	}
	// campaign 1: a fixed window, open until tomorrow (extended: its
	// coupons copied yesterday's end); campaign 2: ended yesterday
	east := setUp("east",
		"CREATE TABLE t_coupon_tpl (id BIGINT NOT NULL PRIMARY KEY, name VARCHAR(64) NOT NULL, budget BIGINT NULL, end_time DATETIME NULL, kind INT NOT NULL)",
		"INSERT INTO t_coupon_tpl VALUES (1, 'window', 20, NOW() + INTERVAL 1 DAY, 1), (2, 'ended', 20, NOW() - INTERVAL 1 DAY, 2)",
		"INSERT INTO t_user_coupon VALUES (1, 1, '0', 0, NOW() - INTERVAL 1 DAY), (2, 2, '0', 0, NOW() - INTERVAL 1 DAY)",
		"INSERT INTO inventory_counter (template_id, channel, held, used, expired) VALUES (1, '0', 1, 0, 0), (2, '0', 1, 0, 0)")
	west := setUp("west",
		"INSERT INTO t_user_coupon VALUES (11, 1, '0', 0, NOW() - INTERVAL 1 DAY), (12, 1, '0', 0, NOW() - INTERVAL 1 DAY), "+
			"(13, 2, '0', 0, NOW() + INTERVAL 1 DAY), (14, 2, '0', 0, NULL)",
		"INSERT INTO inventory_counter (template_id, channel, held, used, expired) VALUES (1, '0', 2, 0, 0), (2, '0', 2, 0, 0)")
	var lines []string
	for _, s := range []source{east, west} {
		lines = append(lines, fmt.Sprintf("  - {name: %s, dsn: %q}", s.name, s.dsn))
	}
	m, err := canal.LoadMapping([]byte(strings.Replace(yaml, "SOURCES", strings.Join(lines, "\n")+"\n", 1)))
	require.NoError(t, err)

	a, err := inventory.ReadSources(ctx, m, openSource, 5*time.Second)
	require.NoError(t, err)
	require.True(t, a.Complete())
	require.Equal(t, view.Counts{Held: 3}, pairSums(a)[inventory.Pair{Template: 1, Channel: "0"}].counts,
		"a fixed-window campaign's coupons past the end they copied were shown as expired")
	require.Equal(t, view.Counts{Expired: 3}, pairSums(a)[inventory.Pair{Template: 2, Channel: "0"}].counts,
		"an ended campaign's coupons on a source without its row were shown as available")
	require.Len(t, a.Templates, 2)
	window, ended := a.Templates[0], a.Templates[1]
	require.Equal(t, []any{view.Counts{Held: 3}, int64(0), false}, []any{window.Counts, window.PastEnd, window.Ended})
	require.Equal(t, []any{view.Counts{Expired: 3}, int64(3), true}, []any{ended.Counts, ended.PastEnd, ended.Ended})
	require.Equal(t, []any{"west", view.Counts{Expired: 2}, true}, []any{ended.Parts[1].Source, ended.Parts[1].Counts, ended.Parts[1].Ended},
		"west's part is judged by east's row")

	for id, want := range map[int64]view.Counts{1: {Held: 3}, 2: {Expired: 3}} {
		one, err := inventory.ReadSourcesTemplate(ctx, m, openSource, 5*time.Second, id)
		require.NoError(t, err)
		require.Equal(t, want, one.Templates[0].Counts, "template %d alone", id)
	}
}
