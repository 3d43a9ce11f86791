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
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/inventory"
	"github.com/couponlink/couponlink/reconcile"
	"github.com/couponlink/couponlink/sink"
)

// A shop sharded the way a sharding middleware splits it, on one server:
// two schemas of four user_coupon_N and four redemption_log_N tables
// each (16 tables), the user's shard user_id % 8, ids from one global
// generator, templates in one table. The mapping names the coupons by a
// range and the redemption log by a pattern.
const shardedMappingYAML = `
user_coupon: {table: "SHARD_{0..1}.user_coupon_{0..3}", id: id, template: tpl_id, channel: source, status: state, order: order_no, user: uid}
status: {AVAILABLE: [0], USED: [1], EXPIRED: [2], RETURNED: [3]}
redemption_log: {table: "SHARD_*.redemption_log_*", id: id, coupon: coupon_id, order: order_no}
template: {table: SHARD_0.coupon_tpl, id: id, total_quota: budget}
default_channel: legacy
`

const shardCount = 8

// shardedShop is the sharded shop's schemas on the test server.
type shardedShop struct {
	*env
	prefix  string       // the schemas are prefix0 and prefix1
	ids     atomic.Int64 // the global id generator of coupons and redemption rows
	mu      sync.Mutex
	want    map[string]int
	tpls    []int64
	channel []string
}

func newShardedShop(t *testing.T) *shardedShop {
	e := newEnv(t)
	s := &shardedShop{env: e, prefix: "sh_" + strings.TrimSuffix(testenv.KeyPrefix(t), ":") + "_", want: map[string]int{},
		tpls: []int64{1, 2, 3}, channel: []string{"app", "h5"}}
	s.ids.Store(1000)
	for sch := range 2 {
		name := fmt.Sprintf("%s%d", s.prefix, sch)
		s.exec("CREATE DATABASE `" + name + "`")
		t.Cleanup(func() { _, _ = e.DB.Exec("DROP DATABASE IF EXISTS `" + name + "`") })
		for i := range 4 {
			s.exec(fmt.Sprintf("CREATE TABLE `%s`.user_coupon_%d (id BIGINT NOT NULL PRIMARY KEY, tpl_id BIGINT NOT NULL, source VARCHAR(32) NULL, "+
				"state TINYINT NOT NULL, order_no VARCHAR(64) NULL, uid BIGINT NOT NULL, KEY (tpl_id, source, state))", name, i))
			// no unique key on (coupon_id, order_no): duplicates can happen
			s.exec(fmt.Sprintf("CREATE TABLE `%s`.redemption_log_%d (id BIGINT NOT NULL PRIMARY KEY, coupon_id BIGINT NOT NULL, "+
				"order_no VARCHAR(64) NOT NULL, KEY (coupon_id))", name, i))
		}
	}
	s.exec("CREATE TABLE `" + s.prefix + "0`.coupon_tpl (id BIGINT NOT NULL PRIMARY KEY, budget BIGINT NOT NULL)")
	s.exec("INSERT INTO `" + s.prefix + "0`.coupon_tpl (id, budget) VALUES (1, 1000000), (2, 1000000), (3, 1000000)")
	return s
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

func (s *shardedShop) exec(q string, args ...any) {
	s.T.Helper()
	_, err := s.DB.Exec(q, args...)
	require.NoError(s.T, err, q)
}

// table is a user's shard of a table: user_id % 8, four tables a schema.
func (s *shardedShop) table(base string, user int64) string {
	n := user % shardCount
	return fmt.Sprintf("`%s%d`.%s_%d", s.prefix, n/4, base, n%4)
}

func (s *shardedShop) expect(kind string) {
	s.mu.Lock()
	s.want[kind]++
	s.mu.Unlock()
}

func (s *shardedShop) expected() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for k, n := range s.want {
		out[k] = n
	}
	return out
}

// shardCoupon is a coupon and its user (who names its shard).
type shardCoupon struct{ id, user int64 }

func (s *shardedShop) claim(q execer, rng *rand.Rand, user int64) (shardCoupon, error) {
	c := shardCoupon{id: s.ids.Add(1), user: user}
	_, err := q.Exec("INSERT INTO "+s.table("user_coupon", user)+" (id, tpl_id, source, state, uid) VALUES (?, ?, ?, 0, ?)",
		c.id, s.tpls[rng.IntN(len(s.tpls))], []any{"app", "h5", nil}[rng.IntN(3)], user)
	return c, err
}

// setState moves a coupon from one code to another; the shop's code
// checks the old state, a script does not.
func (s *shardedShop) setState(q execer, c shardCoupon, from, to int) error {
	_, err := q.Exec("UPDATE "+s.table("user_coupon", c.user)+" SET state = ? WHERE id = ? AND state = ?", to, c.id, from)
	return err
}

// redeem marks a coupon used and writes its redemption row in the shard
// of user `in` (the coupon's own user normally), in one transaction.
func (s *shardedShop) redeem(c shardCoupon, in int64) error {
	tx, err := s.DB.Begin()
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	order := fmt.Sprint("o", c.id)
	if _, err := tx.Exec("UPDATE "+s.table("user_coupon", c.user)+" SET state = 1, order_no = ? WHERE id = ? AND state = 0", order, c.id); err != nil {
		return err
	}
	if err := s.writeOff(tx, c, in); err != nil {
		return err
	}
	return tx.Commit()
}

// writeOff inserts a redemption row of a coupon's order into the shard of
// user `in`.
func (s *shardedShop) writeOff(q execer, c shardCoupon, in int64) error {
	_, err := q.Exec("INSERT INTO "+s.table("redemption_log", in)+" (id, coupon_id, order_no) VALUES (?, ?, ?)", s.ids.Add(1), c.id, fmt.Sprint("o", c.id))
	return err
}

type execer interface {
	Exec(query string, args ...any) (sql.Result, error)
}

// work is the shop's legal traffic from users spread over the shards.
func (s *shardedShop) work(rng *rand.Rand, ops int) error {
	var mine []shardCoupon
	for range ops {
		r := rng.IntN(10)
		if r < 5 || len(mine) == 0 {
			c, err := s.claim(s.DB, rng, 1+rng.Int64N(500))
			if err != nil {
				return err
			}
			mine = append(mine, c)
			continue
		}
		k := rng.IntN(len(mine))
		c := mine[k]
		mine = append(mine[:k], mine[k+1:]...)
		var err error
		switch {
		case r < 8:
			err = s.redeem(c, c.user)
		case r == 8:
			err = s.setState(s.DB, c, 0, 2)
		default:
			err = s.setState(s.DB, c, 0, 3)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// faults are the shop's bugs and scripts, once each, and a redemption row
// a middleware routed by another key: in another shard than its coupon,
// which is no anomaly.
func (s *shardedShop) faults(rng *rand.Rand) {
	s.T.Helper()
	user := func() int64 { return 1 + rng.Int64N(500) }
	c, err := s.claim(s.DB, rng, user()) // expired, then back to available
	require.NoError(s.T, err)
	require.NoError(s.T, s.setState(s.DB, c, 0, 2))
	require.NoError(s.T, s.setState(s.DB, c, 2, 0))
	s.expect(sink.AnomalyIllegalTransition)

	c, err = s.claim(s.DB, rng, user()) // deleted by a clean-up script
	require.NoError(s.T, err)
	s.exec("DELETE FROM "+s.table("user_coupon", c.user)+" WHERE id = ?", c.id)
	s.expect(sink.AnomalyDeletedCoupon)

	c, err = s.claim(s.DB, rng, user()) // redeemed, its order written off again in another shard
	require.NoError(s.T, err)
	require.NoError(s.T, s.redeem(c, c.user))
	require.NoError(s.T, s.writeOff(s.DB, c, c.user+3))
	s.expect(sink.AnomalyDuplicateRedemption)

	c, err = s.claim(s.DB, rng, user()) // redeemed with its row in another shard: fine
	require.NoError(s.T, err)
	require.NoError(s.T, s.redeem(c, c.user+1))

	c, err = s.claim(s.DB, rng, user()) // its row written off first, in another shard, then used
	require.NoError(s.T, err)
	require.NoError(s.T, s.writeOff(s.DB, c, c.user+5))
	s.exec("UPDATE "+s.table("user_coupon", c.user)+" SET state = 1, order_no = ? WHERE id = ?", fmt.Sprint("o", c.id), c.id)

	c, err = s.claim(s.DB, rng, user()) // used with no redemption row anywhere
	require.NoError(s.T, err)
	require.NoError(s.T, s.setState(s.DB, c, 0, 1))
	s.expect(sink.AnomalyUsedWithoutRedemption)
}

// allCoupons is the rows of the eight coupon shards, by hand.
func (s *shardedShop) allCoupons() string {
	var parts []string
	for n := range shardCount {
		parts = append(parts, "SELECT * FROM "+s.table("user_coupon", int64(n)))
	}
	return strings.Join(parts, " UNION ALL ")
}

// sqlTruth counts the 16 tables by hand: per (template, channel) and
// state, summed over the eight coupon shards.
func (s *shardedShop) sqlTruth() map[inventory.Pair]inventory.Counts {
	s.T.Helper()
	rows, err := s.DB.Query("SELECT tpl_id, COALESCE(source, 'legacy'), state, COUNT(*) FROM (" + s.allCoupons() + ") u GROUP BY 1, 2, 3")
	require.NoError(s.T, err)
	defer rows.Close()
	state := map[int]coupon.Status{0: coupon.Available, 1: coupon.Used, 2: coupon.Expired, 3: coupon.Returned}
	out := map[inventory.Pair]inventory.Counts{}
	for rows.Next() {
		var p inventory.Pair
		var code int
		var n int64
		require.NoError(s.T, rows.Scan(&p.Template, &p.Channel, &code, &n))
		c := out[p]
		require.True(s.T, cdctest.Add(&c, state[code], n))
		out[p] = c
	}
	require.NoError(s.T, rows.Err())
	return out
}

// assertShardTruth: the counters equal the truth over the 16 tables,
// counted by hand and through the mapping.
func (s *shardedShop) assertShardTruth(when string) {
	s.T.Helper()
	s.WaitCheckpoint()
	truth := s.sqlTruth()
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
	c, err := s.claim(s.DB, rng, 7) // a cross-shard duplicate the bootstrap finds
	require.NoError(t, err)
	require.NoError(t, s.redeem(c, 7))
	require.NoError(t, s.writeOff(s.DB, c, 12))
	s.expect(sink.AnomalyDuplicateRedemption)

	runner := newCDCRunner(t, s.env, testenv.RedisAddr(t))
	runner.args = append(runner.args, "-mapping", s.mappingFile())
	p := runner.start()
	s.assertShardTruth("after the bootstrap")
	require.Equal(t, s.expected(), s.anomalies(), "the duplicate across shards, found at the snapshot")
	// a redemption row the cdc applied before its coupon became USED, in
	// another shard: the cdc looks it up in every shard
	c, err = s.claim(s.DB, rng, 9)
	require.NoError(t, err)
	require.NoError(t, s.writeOff(s.DB, c, 10))
	s.WaitCheckpoint()
	s.exec("UPDATE "+s.table("user_coupon", 9)+" SET state = 1, order_no = ? WHERE id = ?", fmt.Sprint("o", c.id), c.id)

	kills := 0
	for round := range 3 {
		// the shop writes and breaks things while the cdc is killed once
		var wg sync.WaitGroup
		errs := make(chan error, 3)
		var left atomic.Int64
		left.Store(3)
		for w := range 3 {
			r := rand.New(rand.NewPCG(rng.Uint64(), uint64(w)))
			wg.Go(func() {
				defer left.Add(-1)
				if err := s.work(r, 150); err != nil {
					errs <- err
				}
			})
		}
		s.faults(rng)
		start := s.checkpoint().Batches
		cdctest.WaitFor(t, 60*time.Second, "the cdc applies batches", func() bool {
			require.False(t, p.exited(), "couponlink cdc exited by itself: %v", p.err)
			return s.checkpoint().Batches > start || left.Load() == 0
		})
		time.Sleep(time.Duration(rng.IntN(30)) * time.Millisecond) // the random moment of the kill
		_ = p.signal(syscall.SIGKILL)
		kills++
		if round == 1 {
			s.faults(rng) // a backlog with faults while no cdc runs
		}
		p = runner.start()
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		s.assertShardTruth(fmt.Sprintf("after kill %d", kills))
	}

	cdctest.WaitFor(t, 60*time.Second, "every redemption check decided", func() bool { return s.pendingChecks() == 0 })
	s.WaitCheckpoint()
	require.Equal(t, s.expected(), s.anomalies(), "each injected anomaly once, across shards and kills")
	s.assertShardTruth("at the end")
	var unplaced int
	require.NoError(t, s.DB.QueryRow(`SELECT COUNT(*) FROM cdc_anomaly a LEFT JOIN (`+s.allCoupons()+`) c ON c.id = a.user_coupon_id
		WHERE a.kind = ? AND NOT (a.template_id <=> c.tpl_id AND a.channel <=> COALESCE(c.source, 'legacy'))`,
		sink.AnomalyDuplicateRedemption).Scan(&unplaced))
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
