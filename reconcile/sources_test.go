package reconcile_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/internal/cdcenv"
	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/inventory"
	"github.com/couponlink/couponlink/reconcile"
	"github.com/couponlink/couponlink/sink"
)

// sourcesYAML maps a legacy shop sharded over two servers the way a
// sharding middleware splits it: a user's shard is user % 8, schemas
// shard_0 and shard_1 (two coupon and two write-off tables each) on
// east, shard_2 and shard_3 on west; the template table is a broadcast
// table, a copy on each server.
const sourcesYAML = `
user_coupon: {table: "shard_*.t_user_coupon_*", id: id, template: tpl_id, status: state, order: order_no, user: uid}
status: {AVAILABLE: [0], USED: [1], EXPIRED: [2], RETURNED: [3, 9]}
redemption_log: {table: "shard_*.t_writeoff_*", id: id, coupon: coupon_id, order: order_no}
template: {table: legacy.t_coupon_tpl, id: id, total_quota: budget, issued: issued, used: used}
default_channel: legacy
redis: {template_stock: "%slg:stock:{template}"}
sources:
  - {name: east, dsn: %q, user_coupon: "shard_{0..1}.t_user_coupon_{0..1}", redemption_log: "shard_{0..1}.t_writeoff_{0..1}"}
  - {name: west, dsn: %q, user_coupon: "shard_{2..3}.t_user_coupon_{0..1}", redemption_log: "shard_*.t_writeoff_*"}
`

// twoSources is the sharded shop on two private MariaDB servers, each
// with couponlink's database and a cdc of its own (the source's name as
// its checkpoint, the source's mapping).
type twoSources struct {
	t      *testing.T
	east   *env
	west   *env
	server map[string]*testenv.MariaDB
	m      *canal.Mapping
	yaml   string
	ids    atomic.Int64 // the shop's global id generator
	taken  map[int64]int64
	// oneCopy: the template table is on east only (template.source)
	oneCopy bool
}

func sourceServer(t *testing.T) (*env, *testenv.MariaDB) {
	e, server := cdcenv.OwnServer(t)
	return &env{Env: e}, server
}

func newTwoSources(t *testing.T) *twoSources {
	s := &twoSources{t: t, server: map[string]*testenv.MariaDB{}, taken: map[int64]int64{}}
	s.east, s.server["east"] = sourceServer(t)
	s.west, s.server["west"] = sourceServer(t)
	s.ids.Store(1000)
	for i, e := range []*env{s.east, s.west} {
		for sch := 2 * i; sch < 2*i+2; sch++ {
			e.exec(fmt.Sprintf("CREATE DATABASE shard_%d", sch))
			for n := range 2 {
				e.exec(fmt.Sprintf("CREATE TABLE shard_%d.t_user_coupon_%d (id BIGINT NOT NULL PRIMARY KEY, uid VARCHAR(32) NOT NULL, "+
					"tpl_id INT NOT NULL, state TINYINT NOT NULL, order_no VARCHAR(64) NULL, KEY (tpl_id, state))", sch, n))
				e.exec(fmt.Sprintf("CREATE TABLE shard_%d.t_writeoff_%d (id BIGINT NOT NULL PRIMARY KEY, coupon_id BIGINT NOT NULL, "+
					"order_no VARCHAR(64) NOT NULL, KEY (coupon_id))", sch, n))
			}
		}
		e.exec("CREATE DATABASE legacy")
		e.exec("CREATE TABLE legacy.t_coupon_tpl (id INT NOT NULL PRIMARY KEY, budget BIGINT NOT NULL, " +
			"issued BIGINT NOT NULL DEFAULT 0, used BIGINT NOT NULL DEFAULT 0)")
	}
	s.yaml = fmt.Sprintf(sourcesYAML, s.east.Keys.Prefix, s.east.DSN, s.west.DSN)
	var err error
	s.m, err = canal.LoadMapping([]byte(s.yaml))
	require.NoError(t, err)
	return s
}

// startCDCs runs `couponlink cdc -source NAME` for each source, in process.
func (s *twoSources) startCDCs() {
	for name, e := range map[string]*env{"east": s.east, "west": s.west} {
		sm, _, err := s.m.ForSource(name)
		require.NoError(s.t, err)
		e.StartCDC(sm, func(cfg *sink.Config, _ *sink.Daemon) {
			cfg.Name, cfg.RedisMode = name, inventory.RedisOff // the legacy front end owns its keys
		})
	}
}

// waitCDCs waits until each source's cdc has saved a checkpoint at or past
// its server's binlog end as of the call.
func (s *twoSources) waitCDCs() {
	for name, e := range map[string]*env{"east": s.east, "west": s.west} {
		target, err := canal.CurrentPosition(e.Ctx, e.DB)
		require.NoError(s.t, err)
		cdctest.WaitFor(s.t, 60*time.Second, "the cdc of "+name+" reaches "+target.String(), func() bool {
			cp, found, err := inventory.LoadCheckpoint(e.Ctx, e.DB, name)
			require.NoError(s.t, err)
			return found && cp.Pos.File != "" && cp.Pos.Compare(target) >= 0
		})
	}
}

// serverOf is the server of a user's shard, and the shard's coupon table.
func (s *twoSources) serverOf(user int64) (*env, string) {
	n := user % 8
	e := s.east
	if n >= 4 {
		e = s.west
	}
	return e, fmt.Sprintf("shard_%d.t_user_coupon_%d", n/2, n%2)
}

// both runs a statement on the broadcast table's copy on each server, as
// the middleware does.
func (s *twoSources) both(q string, args ...any) {
	s.east.exec(q, args...)
	if !s.oneCopy {
		s.west.exec(q, args...)
	}
}

func (s *twoSources) template(id, budget int64) {
	s.both("INSERT INTO legacy.t_coupon_tpl (id, budget) VALUES (?, ?)", id, budget)
}

// claim is the shop's claim of a coupon of tpl by user, with the id given
// (0: the next of the generator); it returns the id.
func (s *twoSources) claim(tpl, user, id int64) int64 {
	if id == 0 {
		id = s.ids.Add(1)
	}
	e, table := s.serverOf(user)
	e.exec("INSERT INTO "+table+" (id, uid, tpl_id, state) VALUES (?, ?, ?, 0)", id, fmt.Sprint(user), tpl)
	s.both("UPDATE legacy.t_coupon_tpl SET issued = issued + 1 WHERE id = ?", tpl)
	s.taken[tpl]++
	return id
}

// claimOn claims n coupons of tpl by users whose shards are on one
// server (east: shards 0-3, west: 4-7); it returns the users and the ids.
func (s *twoSources) claimOn(server string, tpl int64, n int) [][2]int64 {
	var out [][2]int64
	for i := range n {
		user := int64(8*i + i%4)
		if server == "west" {
			user += 4
		}
		out = append(out, [2]int64{user, s.claim(tpl, user, 0)})
	}
	return out
}

func (s *twoSources) redeem(tpl, user, id int64) {
	e, table := s.serverOf(user)
	n := user % 8
	tx, err := e.DB.BeginTx(e.Ctx, nil)
	require.NoError(s.t, err)
	_, err = tx.Exec("UPDATE "+table+" SET state = 1, order_no = ? WHERE id = ?", fmt.Sprint("o", id), id)
	require.NoError(s.t, err)
	_, err = tx.Exec(fmt.Sprintf("INSERT INTO shard_%d.t_writeoff_%d (id, coupon_id, order_no) VALUES (?, ?, ?)", n/2, n%2),
		s.ids.Add(1), id, fmt.Sprint("o", id))
	require.NoError(s.t, err)
	require.NoError(s.t, tx.Commit())
	s.both("UPDATE legacy.t_coupon_tpl SET used = used + 1 WHERE id = ?", tpl)
}

func (s *twoSources) key(tpl int64) string {
	return fmt.Sprintf("%slg:stock:%d", s.east.Keys.Prefix, tpl)
}

func (s *twoSources) setKey(tpl, v int64) {
	require.NoError(s.t, s.east.RDB.Set(s.east.Ctx, s.key(tpl), v, 0).Err())
}

func (s *twoSources) reconciler(reg prometheus.Registerer) *reconcile.Sources {
	var dbs []reconcile.SourceDB
	for name, e := range map[string]*env{"east": s.east, "west": s.west} {
		binlog, err := canal.ConfigFromDSN(e.DSN)
		require.NoError(s.t, err)
		dbs = append(dbs, reconcile.SourceDB{Name: name, DB: e.DB, Binlog: binlog})
	}
	r, err := reconcile.NewSources(reconcile.Config{Mapping: s.m, Redis: s.east.RDB, QuietWindow: testQuiet, CatchUpWait: testCatchUp,
		AbsThreshold: testAbs, RelThreshold: 0.05, Logger: testenv.QuietLogger(), Registerer: reg}, dbs)
	require.NoError(s.t, err)
	return r
}

// pass runs a pass over the sources; each part's task is recorded on its
// source's server (the cross-source step's on east's) as reported, its
// differences with their source.
func (s *twoSources) pass(r *reconcile.Sources) *reconcile.SourcesReport {
	s.t.Helper()
	sr, err := r.Pass(s.east.Ctx)
	require.NoError(s.t, err)
	require.Len(s.t, sr.Parts, 2)
	for i, e := range []*env{s.east, s.east, s.west} {
		rep := append([]*reconcile.Report{sr.Sum}, sr.Parts...)[i]
		s.t.Logf("task %d: %s", rep.TaskID, rep.Summary())
		task := e.task(rep.TaskID)
		require.Equal(s.t, rep.Status, task.Status, "%s's task %d", rep.Source, rep.TaskID)
		require.Equal(s.t, sourced(rep.Differences), sourced(task.Differences), "%s's task %d", rep.Source, rep.TaskID)
	}
	require.Equal(s.t, []string{"east", "west"}, []string{sr.Parts[0].Source, sr.Parts[1].Source})
	require.Equal(s.t, reconcile.AllSources, sr.Sum.Source)
	return sr
}

// sourced is the differences in short, each with its source first.
func sourced(ds []reconcile.Difference) []string {
	out := []string{}
	for _, d := range ds {
		out = append(out, d.Source+": "+diff(d))
	}
	return out
}

func (s *twoSources) cliFlags() []string {
	path := filepath.Join(s.t.TempDir(), "sources.yaml")
	require.NoError(s.t, os.WriteFile(path, []byte(s.yaml), 0o600))
	return []string{"-mapping", path, "-redis", testenv.RedisAddr(s.t), "-quiet", testQuiet.String(), "-catch-up-wait", testCatchUp.String(),
		"-abs-threshold", "5", "-log-level", "error", "-metrics-addr", ""}
}

// A legacy shop sharded over two servers, one cdc per source: each source
// is reconciled at its own position and its differences said to be its;
// the checks of a template's whole use the sum over the sources.
func TestSourcesReconcileEachAndTheSum(t *testing.T) {
	s := newTwoSources(t)
	s.template(1, 100)
	s.template(2, 10)
	s.startCDCs()
	redeemed := map[string]int64{}
	for _, server := range []string{"east", "west"} {
		c := s.claimOn(server, 1, 5)[1]
		s.redeem(1, c[0], c[1])
		redeemed[server] = c[1]
	}
	s.waitCDCs()
	s.setKey(1, 100-s.taken[1]) // the front end's key, right: 90
	reg := prometheus.NewRegistry()
	r := s.reconciler(reg)

	// clean on both: a source's pass judges no budget or template count
	// on its part alone
	sr := s.pass(r)
	require.Equal(t, "clean", sr.Status(), "%v / %v / %v", sourced(sr.Parts[0].Differences), sourced(sr.Parts[1].Differences), sourced(sr.Sum.Differences))
	for _, rep := range sr.Parts {
		require.True(t, rep.CountersCompared, rep.Note)
	}
	require.Len(t, sr.Sum.SumOf, 2, "the sum of both sources' parts")
	require.Equal(t, int64(10), sr.Sum.Coupons)
	require.Equal(t, map[int64][3]int64{1: {100, 10, 2}, 2: {10, 0, 0}}, s.east.Triples(`SELECT id, budget, issued, used FROM legacy.t_coupon_tpl`))

	// a counter off on west: found by west's pass, said to be west's, fixed there
	s.west.exec("UPDATE inventory_counter SET used = used + 2 WHERE template_id = 1")
	sr = s.pass(r)
	require.Equal(t, "auto_fixed", sr.Status())
	require.Empty(t, sr.Parts[0].Differences)
	require.Equal(t, []string{"west: counter 1/legacy/used 1 3 fixed"}, sourced(sr.Parts[1].Differences))
	require.Empty(t, sr.Sum.Differences)
	require.Equal(t, []string{"counter 1/legacy/used 3->1"}, s.west.correctionsOf(sr.Parts[1].TaskID))
	require.Empty(t, s.east.corrections())
	require.Equal(t, map[inventory.Pair]inventory.Counts{{Template: 1, Channel: "legacy"}: {Held: 4, Used: 1}}, s.west.Counters(),
		"west's counters: its five coupons, one used")
	require.Contains(t, series(t, reg, "couponlink_reconcile_drift"), "channel=legacy,source=west,store=counter,template=1 2")
	for _, src := range []string{"east", "west", "all"} {
		_, ok := cdctest.Metric(t, reg, "couponlink_reconcile_last_success_timestamp_seconds", map[string]string{"source": src})
		require.True(t, ok, "the last success of %s", src)
	}
	require.Equal(t, []string{"source=all 0", "source=east 0", "source=west 0"}, series(t, reg, "couponlink_reconcile_cdc_behind"))

	// over-issue only the sum shows: 6 on each server, 10 in the budget
	s.claimOn("east", 2, 6)
	s.claimOn("west", 2, 6)
	s.setKey(2, 10-12)
	s.setKey(1, 999) // and the front end's key of template 1 is off
	s.waitCDCs()
	sr = s.pass(r)
	require.Equal(t, "needs_review", sr.Status())
	require.Empty(t, sr.Parts[0].Differences, "east's part alone is no over-issue")
	require.Empty(t, sr.Parts[1].Differences, "west's part alone is no over-issue")
	require.Equal(t, []string{
		"all sources: quota 2/over_issue 10 12 needs_review",
		"all sources: redis " + s.key(1) + " 90 999 fixed",
	}, sourced(sr.Sum.Differences), "the budget judged on the sum; the key set to budget − the summed coupons taken")
	require.Equal(t, "90", str(s.east.redisGet(s.key(1))))
	require.Equal(t, []string{"redis " + s.key(1) + " 999->90"}, s.east.correctionsOf(sr.Sum.TaskID))
	require.Equal(t, []string{"source=all 1", "source=east 0", "source=west 0"}, series(t, reg, "couponlink_reconcile_needs_review"),
		"the open item is the cross-source step's, on east's server")

	// an id handed out twice, once on each server
	id := s.ids.Add(1)
	s.claim(1, 3, id)
	s.claim(1, 6, id)
	require.NoError(t, s.east.RDB.DecrBy(s.east.Ctx, s.key(1), 2).Err())
	// and west's copy of the template table counts one coupon too many,
	// both copies one used too many
	s.west.exec("UPDATE legacy.t_coupon_tpl SET issued = issued + 1 WHERE id = 1")
	s.both("UPDATE legacy.t_coupon_tpl SET used = used + 1 WHERE id = 2")
	// east's redeemed coupon written off again, for its order, on west: a
	// duplicate redemption no one cdc sees
	w := redeemed["east"]
	s.west.exec("INSERT INTO shard_2.t_writeoff_0 (id, coupon_id, order_no) VALUES (?, ?, ?)", s.ids.Add(1), w, fmt.Sprint("o", w))
	s.waitCDCs()
	sr = s.pass(r)
	require.Empty(t, sr.Parts[0].Differences)
	require.Empty(t, sr.Parts[1].Differences)
	require.Equal(t, []string{
		"all sources: quota 2/over_issue 10 12 needs_review",
		"west: legacy 1/issued 12 13 needs_review",
		"all sources: legacy 2/used 0 1 needs_review",
		fmt.Sprintf("east, west: legacy coupon %d/sources 1 2 needs_review", id),
		fmt.Sprintf(`east, west: legacy coupon %d/order "o%d" 1 2 needs_review`, w, w),
	}, sourced(sr.Sum.Differences))
	require.Contains(t, find(t, sr.Sum.Differences, "legacy", fmt.Sprintf("coupon %d/sources", id)).Reason,
		fmt.Sprintf("east:shard_1.t_user_coupon_1, west:shard_3.t_user_coupon_0"))

	// the CLI: a report per source and the sum, the open item of the sum
	// listed on east and resolved there with -source
	bin := testenv.BuildCouponlink(t)
	flags := s.cliFlags()
	code, out, _ := cli(t, bin, append([]string{"-once"}, flags...)...)
	require.Equal(t, 1, code)
	require.Regexp(t, `== source east ==\n(.|\n)*== source west ==\n(.|\n)*== across sources(.|\n)*all sources +quota +2/over_issue`, out)
	_, out, _ = cli(t, bin, append([]string{"-list"}, flags...)...)
	require.Regexp(t, `== source east ==\n(.|\n)*all sources: needs_review(.|\n)*-resolve \d+ -source east`, out)
	code, _, stderr := cli(t, bin, append([]string{"-resolve", fmt.Sprint(sr.Sum.TaskID), "-note", "checked"}, flags...)...)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "-resolve with a mapping with sources needs -source")
	code, _, _ = cli(t, bin, append([]string{"-resolve", fmt.Sprint(sr.Sum.TaskID), "-source", "east", "-note", "checked"}, flags...)...)
	require.Equal(t, 0, code)

	// west down: east is reconciled all the same, the sum is not compared
	s.server["west"].Stop(syscall.SIGKILL)
	s.east.exec("UPDATE inventory_counter SET held = held + 1 WHERE template_id = 1")
	sr, err := r.Pass(s.east.Ctx)
	require.Error(t, err)
	require.Contains(t, err.Error(), "source west")
	require.Equal(t, "error", sr.Status())
	require.Equal(t, "error", sr.Parts[1].Status)
	require.Equal(t, []string{"east: counter 1/legacy/held 5 6 fixed"}, sourced(sr.Parts[0].Differences), "east's own pass ran")
	require.Equal(t, "skipped", sr.Sum.Status)
	require.Contains(t, sr.Sum.Note, "the pass of west failed, and a partial sum is never compared")
	code, out, _ = cli(t, bin, append([]string{"-once"}, flags...)...)
	require.Equal(t, 2, code, "a source down is an error")
	require.Regexp(t, `== source east ==\nreconcile task \d+: clean`, out)
	require.Contains(t, out, "a partial sum is never compared")
	s.server["west"].Start()
	s.waitCDCs()
	sr = s.pass(r)
	require.Equal(t, "needs_review", sr.Sum.Status, "the sum is compared again")

	// the daemon: a pass over the sources every -every, the metrics of
	// each with its source
	addr := testenv.FreeAddr(t)
	daemon := exec.Command(bin, append(append([]string{"reconcile", "-every", "200ms"}, flags...), "-metrics-addr", addr)...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "COUPONLINK_") {
			daemon.Env = append(daemon.Env, kv)
		}
	}
	require.NoError(t, daemon.Start())
	defer func() { _ = daemon.Process.Kill(); _ = daemon.Wait() }()
	cdctest.WaitFor(t, 60*time.Second, "the daemon's passes over both sources and the sum", func() bool {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return regexp.MustCompile(`\ncouponlink_reconcile_runs_total\{result="clean",source="west"\} [1-9]`).Match(body) &&
			regexp.MustCompile(`\ncouponlink_reconcile_runs_total\{result="needs_review",source="all"\} [1-9]`).Match(body)
	})
	require.NoError(t, daemon.Process.Signal(syscall.SIGTERM))
	require.NoError(t, daemon.Wait())
}
