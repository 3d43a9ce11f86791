package sink_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/inventory"
	"github.com/couponlink/couponlink/reconcile"
)

// A shop sharded the way a sharding middleware splits it, on one server:
// two schemas of four user_coupon_N and four redemption_log_N tables
// each (16 tables), the user's shard user_id % 8, ids from one global
// generator, templates in one table. The mapping names the coupons by a
// range and the redemption log by a pattern.
const shardedMappingYAML = shardCouponsYAML + `
redemption_log: {table: "SHARD_*.redemption_log_*", id: id, coupon: coupon_id, order: order_no}
template: {table: SHARD_0.coupon_tpl, id: id, total_quota: budget}
default_channel: legacy
`

// shardCouponsYAML maps the sharded shop's coupon tables (two schemas
// SHARD_0 and SHARD_1 of four user_coupon_N each) and their states: the
// start of every sharded mapping.
const shardCouponsYAML = `
user_coupon: {table: "SHARD_{0..1}.user_coupon_{0..3}", id: id, template: tpl_id, channel: source, status: state, order: order_no, user: uid}
status: {AVAILABLE: [0], USED: [1], EXPIRED: [2], RETURNED: [3]}
`

// shardedShop is the sharded shop's eight shards on the test server.
type shardedShop struct {
	*env
	*shardShop
}

func newShardedShop(t *testing.T) *shardedShop {
	e := newEnv(t)
	return &shardedShop{env: e, shardShop: newShardShop(t, []*sql.DB{e.DB}, 8)}
}

func (s *shardedShop) yaml() string {
	return strings.ReplaceAll(shardedMappingYAML, "SHARD_", s.prefix)
}

func (s *shardedShop) mapping() *canal.Mapping {
	m, err := canal.LoadMapping([]byte(s.yaml()))
	require.NoError(s.T, err)
	return m
}

func (s *shardedShop) mappingFile() string {
	path := filepath.Join(s.T.TempDir(), "sharded.yaml")
	require.NoError(s.T, os.WriteFile(path, []byte(s.yaml()), 0o600))
	return path
}

func (s *shardedShop) exec(q string, args ...any) { s.T.Helper(); s.execOn(s.DB, q, args...) }

// assertShardTruth: the counters equal the truth over the 16 tables,
// counted by hand and through the mapping.
func (s *shardedShop) assertShardTruth(when string) {
	s.T.Helper()
	s.WaitCheckpoint()
	truth := s.sqlTruth(0)
	require.Equal(s.T, truth, s.Counters(), "counters against the 16 tables counted by hand, %s", when)
	snap, err := inventory.TakeSnapshot(context.Background(), s.DB, s.mapping())
	require.NoError(s.T, err)
	mapped := map[inventory.Pair]inventory.Counts{}
	for p, c := range snap.Counts {
		mapped[p] = *c
	}
	require.Equal(s.T, truth, mapped, "the mapping's snapshot sums the shards, %s", when)
}

// The sharded shop attached with one mapping: the real `couponlink cdc`,
// killed -9 while the shop writes, follows all 16 tables; after each kill
// and at the end its counters equal the truth summed over the shards,
// every injected anomaly is reported once — a duplicate write-off in
// another shard is found, a redemption row in another shard than its
// coupon is no used_without_redemption — and a reconcile pass is clean,
// then finds a counter bumped by hand.
func TestShardedShop(t *testing.T) {
	s := newShardedShop(t)
	rng := rand.New(rand.NewPCG(rand.Uint64(), 14))
	require.NoError(t, s.work(rng, 200), "before the first start")
	c, err := s.claim(rng, 7) // a cross-shard duplicate the bootstrap finds
	require.NoError(t, err)
	require.NoError(t, s.redeem(c, 7))
	require.NoError(t, s.writeOff(c, 12))
	s.expect(inventory.AnomalyDuplicateRedemption)

	runner := newCDCRunner(t, s.env, testenv.RedisAddr(t))
	runner.args = append(runner.args, "-mapping", s.mappingFile())
	p := runner.start()
	s.assertShardTruth("after the bootstrap")
	require.Equal(t, s.expected(), s.anomalies(), "the duplicate across shards, found at the snapshot")
	// a redemption row the cdc applied before its coupon became USED, in
	// another shard: the cdc looks it up in every shard
	c, err = s.claim(rng, 9)
	require.NoError(t, err)
	require.NoError(t, s.writeOff(c, 10))
	s.WaitCheckpoint()
	s.exec("UPDATE "+s.table("user_coupon", 9)+" SET state = 1, order_no = ? WHERE id = ?", fmt.Sprint("o", c.id), c.id)

	kills := 0
	for round := range 3 {
		// the shop writes and breaks things while the cdc is killed once
		s.busy(rng, 3, 150, func(left *atomic.Int64) {
			s.faults(rng, 1)
			start := s.checkpoint().Batches
			cdctest.WaitFor(t, 60*time.Second, "the cdc applies batches", func() bool {
				require.False(t, p.exited(), "couponlink cdc exited by itself: %v", p.err)
				return s.checkpoint().Batches > start || left.Load() == 0
			})
			time.Sleep(time.Duration(rng.IntN(30)) * time.Millisecond) // the random moment of the kill
			_ = p.signal(syscall.SIGKILL)
			kills++
			if round == 1 {
				s.faults(rng, 1) // a backlog with faults while no cdc runs
			}
			p = runner.start()
		})
		s.assertShardTruth(fmt.Sprintf("after kill %d", kills))
	}

	cdctest.WaitFor(t, 60*time.Second, "every redemption check decided", func() bool { return s.pendingChecks() == 0 })
	s.WaitCheckpoint()
	require.Equal(t, s.expected(), s.anomalies(), "each injected anomaly once, across shards and kills")
	s.assertShardTruth("at the end")
	var unplaced int
	require.NoError(t, s.DB.QueryRow(`SELECT COUNT(*) FROM cdc_anomaly a LEFT JOIN (`+s.allCoupons(0)+`) c ON c.id = a.user_coupon_id
		WHERE a.kind = ? AND NOT (a.template_id <=> c.tpl_id AND a.channel <=> COALESCE(c.source, 'legacy'))`,
		inventory.AnomalyDuplicateRedemption).Scan(&unplaced))
	require.Zero(t, unplaced, "duplicate_redemption anomalies without their coupon's template and channel, found in its shard")

	status, err := exec.Command(runner.bin, "status", "-dsn", s.DSN, "-mapping", s.mappingFile()).CombinedOutput()
	require.NoError(t, err, string(status))
	require.Regexp(t, `\nuser_coupon +8 shards \(`+s.prefix+`\{0\.\.1\}\.user_coupon_\{0\.\.3\}\)\nredemption_log +8 shards \(`+
		s.prefix+`\*\.redemption_log_\*\)\n`, string(status))

	binlog, err := canal.ConfigFromDSN(s.DSN)
	require.NoError(t, err)
	r, err := reconcile.New(reconcile.Config{DB: s.DB, Mapping: s.mapping(), Binlog: binlog, Logger: testenv.QuietLogger(),
		Registerer: prometheus.NewRegistry()})
	require.NoError(t, err)
	rep, err := r.Pass(s.Ctx)
	require.NoError(t, err)
	require.True(t, rep.CountersCompared, rep.Note)
	require.Equal(t, "clean", rep.Status, rep.Summary())

	s.exec("UPDATE inventory_counter SET used = used + 4 WHERE template_id = 2 AND channel = 'h5'")
	rep, err = r.Pass(s.Ctx)
	require.NoError(t, err)
	require.Len(t, rep.Differences, 1, rep.Summary())
	d := rep.Differences[0]
	require.Equal(t, [4]any{reconcile.StoreCounter, int64(2), "h5", "used"}, [4]any{d.Store, d.Template, d.Channel, d.Field})
	require.EqualValues(t, 4, d.Delta())

	// an id the shop's generator handed out twice, in two shards: counted
	// all the same, and the reconciler says so
	s.exec("INSERT INTO "+s.table("user_coupon", 10)+" (id, tpl_id, source, state, uid) VALUES (?, 1, 'app', 0, 10)", c.id)
	s.assertShardTruth("with a repeated id")
	rep, err = r.Pass(s.Ctx)
	require.NoError(t, err)
	require.Len(t, rep.Differences, 1, rep.Summary())
	d = rep.Differences[0]
	require.Equal(t, [3]string{fmt.Sprintf("coupon %d/shards", c.id), reconcile.ActionNeedsReview, "needs_review"}, [3]string{d.Target, d.Action, rep.Status})
	require.Contains(t, d.Reason, fmt.Sprintf("coupon id %d is in 2 shards (%s0.user_coupon_1, %s0.user_coupon_2)", c.id, s.prefix, s.prefix))
	require.NoError(t, p.signal(syscall.SIGTERM))
}
