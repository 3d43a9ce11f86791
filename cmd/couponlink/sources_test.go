package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/inventory"
)

// A shop sharded over two servers (sources east and west, each with its
// own shard tables): `couponlink migrate -mapping` creates couponlink's
// tables on each source (or on -source's alone); with one cdc per source
// (its source's mapping, server and checkpoint name), `couponlink status`
// shows each source's checkpoint, lag and anomalies, and sums equal to
// the coupons of every shard table on both servers; `mapping check`
// checks each source on its own server and names a missing shard with its
// source. With west killed, status says west is down and that every sum
// leaves it out (not silently smaller); with both down, it fails.
func TestStatusAcrossSources(t *testing.T) {
	s := newSpreadShop(t)

	code, out, errs := cli(t, "migrate", "-mapping", s.mapping, "-source", "east")
	require.Equal(t, 0, code, errs+out)
	require.Regexp(t, `^source east: created database couponlink\nsource east: database couponlink migrated from schema version 0 to \d+\n$`, out)
	assert.Equal(t, 0, tableCount(t, s.west, "cdc_checkpoint"), "-source east leaves west alone")
	code, out, errs = cli(t, "migrate", "-mapping", s.mapping)
	require.Equal(t, 0, code, errs+out)
	require.Regexp(t, `^source east: database couponlink is at schema version \d+, nothing to apply\nsource west: created database couponlink\n`+
		`source west: database couponlink migrated from schema version 0 to \d+\n$`, out)
	for _, srv := range []*spreadServer{s.east, s.west} {
		for _, table := range []string{"cdc_checkpoint", "inventory_counter", "cdc_anomaly"} {
			assert.Equal(t, 1, tableCount(t, srv, table), "%s on %s", table, srv.name)
		}
	}

	// before the cdcs: counted by their bootstraps; users 0..7 cover the eight shards
	var ids []int64
	for u := range int64(16) {
		ids = append(ids, s.claim(1+u%2, []any{"app", "h5", nil}[u%3], u))
	}
	s.use(ids[2], 2)
	s.use(ids[5], 5)
	stopEast, stopWest := s.startCDC(s.east), s.startCDC(s.west)
	s.east.bootstrapped(t)
	s.west.bootstrapped(t)
	for u := range int64(8) { // streamed
		id := s.claim(1, "app", 100+u)
		if u%3 == 0 {
			s.use(id, 100+u)
		}
	}
	s.expire(ids[7], 7)
	west, table := s.shard("user_coupon", 6)
	west.exec("DELETE FROM "+table+" WHERE id = ?", ids[6]) // a deleted_coupon anomaly on west
	s.east.caughtUp(t)
	s.west.caughtUp(t)

	st := statusJSONOf(t, "-mapping", s.mapping)
	srcs := st["sources"].([]any)
	require.Len(t, srcs, 2)
	for i, name := range []string{"east", "west"} {
		src := srcs[i].(map[string]any)
		assert.Equal(t, []any{name, "up", name, true}, []any{src["name"], src["state"], src["checkpoint"], src["found"]})
		assert.Greater(t, src["events_applied"], 0.0, name)
		assert.Contains(t, src, "lag_seconds")
	}
	assert.Equal(t, map[string]any{}, srcs[0].(map[string]any)["anomalies"])
	assert.Equal(t, map[string]any{"deleted_coupon": 1.0}, srcs[1].(map[string]any)["anomalies"])
	assert.Equal(t, true, st["complete"])
	truth := s.truth(s.east, s.west)
	require.Equal(t, truth, jsonPairs(t, st["pairs"]), "the sums against every shard table of both servers")
	for _, p := range st["pairs"].([]any) {
		pm := p.(map[string]any)
		assert.Equal(t, []any{"east", "west"}, pm["sources"], "every pair has coupons on both servers: %v", pm)
		assert.Equal(t, true, pm["complete"])
		assert.Len(t, pm["parts"], 2)
	}
	tpls := st["templates"].([]any)
	require.Len(t, tpls, 2)
	spring := tpls[0].(map[string]any)
	springTaken := takenOf(truth, 1)
	assert.Equal(t, []any{1.0, "spring", 100.0, float64(100 - springTaken), []any{"east", "west"}, true},
		[]any{spring["template"], spring["name"], spring["budget"], spring["claimable"], spring["sources"], spring["complete"]})

	code, out, errs = cli(t, "status", "-mapping", s.mapping)
	require.Equal(t, 0, code, errs)
	assert.Contains(t, out, "summed over every source: east, west\n")
	assert.Regexp(t, `\n  east +up +\S+:\d+ .*\d+ in \d+ batches +0\n  west +up +\S+:\d+ .* +\d+ in \d+ batches +1\n`, out)
	assert.Equal(t, "east+west", lastField(fieldLine(t, out, "1")), "the pairs' sources")
	assert.Regexp(t, `\n1 +spring +100 +- +`+itoa(100-springTaken)+` .* east\+west\n`, out)

	// one template: summed, and each source's part
	code, out, errs = cli(t, "status", "-mapping", s.mapping, "-template", "1")
	require.Equal(t, 0, code, errs)
	assert.Equal(t, []string{"claimable", itoa(100 - springTaken)}, fieldLine(t, out, "claimable")[:2])
	assert.Contains(t, out, "\nper source: east+west\n")
	eastTruth := s.truth(s.east)
	assert.Regexp(t, `\n  east +100 +`+itoa(heldOf(eastTruth, 1))+` `, out)
	// one source alone, on its own server
	code, out, errs = cli(t, "status", "-mapping", s.mapping, "-source", "west")
	require.Equal(t, 0, code, errs)
	assert.Regexp(t, `\nuser_coupon +4 shards \(shard_\{2\.\.3\}\.user_coupon_\{0\.\.1\}\)\n`, out)

	code, out, errs = cli(t, "mapping", "check", "-mapping", s.mapping)
	require.Equal(t, 0, code, errs+out)
	assert.Regexp(t, `(?s)^mapping \S+, source east\n.*\n  user_coupon +→ shard_\{0\.\.1\}\.user_coupon_\{0\.\.1\} +\(4 shards: .*\nok\n\n`+
		`mapping \S+, source west\n.*\n  user_coupon +→ shard_\{2\.\.3\}\.user_coupon_\{0\.\.1\} +\(4 shards: .*\n  template +→ shard_2\.coupon_tpl\n.*\nok\n$`, out)

	// west behind: its lag shows
	stopEast()
	stopWest()
	s.claim(2, "app", 6)
	st = statusJSONOf(t, "-mapping", s.mapping)
	srcs = st["sources"].([]any)
	assert.Greater(t, srcs[1].(map[string]any)["lag_seconds"], 0.0, "west's checkpoint is behind its server")
	assert.NotEqual(t, srcs[1].(map[string]any)["server_position"], srcs[1].(map[string]any)["position"])

	// a shard missing on west: named with its source
	west.exec("DROP TABLE shard_3.user_coupon_1")
	code, out, errs = cli(t, "mapping", "check", "-mapping", s.mapping)
	assert.Equal(t, 1, code, errs+out)
	assert.Regexp(t, `(?s)source east\n.*\nok\n\nmapping \S+, source west\n.*user_coupon.table "shard_\{2\.\.3\}\.user_coupon_\{0\.\.1\}": `+
		`1 of its 4 tables are missing on the server: shard_3\.user_coupon_1\n`, out)
	assert.Equal(t, "couponlink mapping check: 1 error in source west of "+s.mapping+" (see above)\n", errs)

	// west down: shown, and every sum says it leaves west out
	s.west.maria.Stop(syscall.SIGKILL)
	st = statusJSONOf(t, "-mapping", s.mapping)
	srcs = st["sources"].([]any)
	assert.Equal(t, "up", srcs[0].(map[string]any)["state"])
	assert.Equal(t, "down", srcs[1].(map[string]any)["state"])
	assert.Contains(t, srcs[1].(map[string]any)["error"], "connect: ")
	assert.Equal(t, []any{false, []any{"west"}}, []any{st["complete"], st["left_out"]})
	require.Equal(t, eastTruth, jsonPairs(t, st["pairs"]), "east's coupons alone")
	for _, p := range st["pairs"].([]any) {
		pm := p.(map[string]any)
		assert.Equal(t, []any{[]any{"east"}, false, []any{"west"}}, []any{pm["sources"], pm["complete"], pm["left_out"]})
	}
	for _, tpl := range st["templates"].([]any) {
		assert.Equal(t, false, tpl.(map[string]any)["complete"])
	}
	code, out, errs = cli(t, "status", "-mapping", s.mapping)
	require.Equal(t, 0, code, errs)
	assert.Contains(t, out, "\nsource west is down: the sums below leave out its coupons\n")
	assert.Regexp(t, `\n  west +down: connect: `, out)
	assert.NotContains(t, out, "summed over every source")
	assert.True(t, strings.HasSuffix(strings.Join(fieldLine(t, out, "1"), " "), "east (west left out)"), out)
	code, out, errs = cli(t, "status", "-mapping", s.mapping, "-template", "1")
	require.Equal(t, 0, code, errs)
	assert.Contains(t, out, "\nper source: east (west left out)\n")
	assert.Regexp(t, `\n  west +left out\n`, out)
	code, out, errs = cli(t, "status", "-mapping", s.mapping, "-template", "1", "-json")
	require.Equal(t, 0, code, errs)
	var one map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &one), out)
	assert.Equal(t, []any{1.0, float64(100 - takenOf(eastTruth, 1)), false, []any{"west"}, []any{"east"}},
		[]any{one["template"], one["claimable"], one["complete"], one["left_out"], one["sources"]})
	require.Len(t, one["parts"], 1)
	assert.Equal(t, "east", one["parts"].([]any)[0].(map[string]any)["source"])
	states := one["source_states"].([]any)
	assert.Equal(t, []any{"up", "down"}, []any{states[0].(map[string]any)["state"], states[1].(map[string]any)["state"]})

	code, out, errs = cli(t, "status", "-mapping", s.mapping, "-template", "99")
	assert.Equal(t, 1, code)
	assert.Contains(t, out, "source west is down: the sums below leave out its coupons\n", "template 99 might be on west")
	assert.Equal(t, "couponlink status: template 99 does not exist\n", errs)
	code, out, errs = cli(t, "migrate", "-mapping", s.mapping)
	assert.Equal(t, 1, code)
	assert.Regexp(t, `^source east: database couponlink is at schema version \d+, nothing to apply\nsource west: .*connection refused`, out)
	assert.Equal(t, "couponlink migrate: 1 source not migrated: west (see above)\n", errs)

	// every source down
	s.east.maria.Stop(syscall.SIGKILL)
	code, out, errs = cli(t, "status", "-mapping", s.mapping)
	assert.Equal(t, 1, code)
	assert.Contains(t, out, "source east is down: the sums below leave out its coupons\n")
	assert.Equal(t, "couponlink status: every source is down (east, west): nothing to sum\n", errs)
	code, out, _ = cli(t, "status", "-mapping", s.mapping, "-json")
	assert.Equal(t, 1, code)
	var v map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &v), out)
	assert.Equal(t, []any{}, v["pairs"])
}

// tableCount says whether couponlink's database on srv has the table.
func tableCount(t *testing.T, srv *spreadServer, table string) int {
	t.Helper()
	var n int
	require.NoError(t, srv.db.QueryRow(`SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'couponlink' AND table_name = ?`, table).Scan(&n))
	return n
}

// jsonPairs reads the pairs of status -json as counts.
func jsonPairs(t *testing.T, v any) map[inventory.Pair]inventory.Counts {
	t.Helper()
	out := map[inventory.Pair]inventory.Counts{}
	for _, p := range v.([]any) {
		pm := p.(map[string]any)
		n := func(k string) int64 { return int64(pm[k].(float64)) }
		out[inventory.Pair{Template: n("template"), Channel: pm["channel"].(string)}] = inventory.Counts{Held: n("held"), Used: n("used"),
			Expired: n("expired"), Returned: n("returned"), Released: n("released")}
	}
	return out
}

// takenOf is a template's held + used + frozen in counts.
func takenOf(counts map[inventory.Pair]inventory.Counts, tpl int64) int64 {
	var n int64
	for p, c := range counts {
		if p.Template == tpl {
			n += c.Taken()
		}
	}
	return n
}

func heldOf(counts map[inventory.Pair]inventory.Counts, tpl int64) int64 {
	var n int64
	for p, c := range counts {
		if p.Template == tpl {
			n += c.Held
		}
	}
	return n
}

func lastField(fields []string) string { return fields[len(fields)-1] }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
