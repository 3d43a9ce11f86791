package sink_test

import (
	"database/sql"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/inventory"
)

// shardShop is a legacy shop sharded by user id the way a sharding
// middleware splits it: shards coupon tables and as many write-off
// tables, four a schema (prefix0, prefix1, ...), the schemas spread evenly
// over its servers; a user's shard is user_id % shards; ids come from one
// global generator; the template table (coupon_tpl) sits in each server's
// first schema, a broadcast copy.
type shardShop struct {
	t       *testing.T
	servers []*sql.DB
	shards  int
	prefix  string
	ids     atomic.Int64 // the global id generator of coupons and redemption rows
	mu      sync.Mutex
	want    map[string]int
	tpls    []int64
}

func newShardShop(t *testing.T, servers []*sql.DB, shards int) *shardShop {
	s := &shardShop{t: t, servers: servers, shards: shards, prefix: "sh_" + strings.TrimSuffix(testenv.KeyPrefix(t), ":") + "_",
		want: map[string]int{}, tpls: []int64{1, 2, 3}}
	s.ids.Store(1000)
	for sch := range shards / 4 {
		name := fmt.Sprintf("%s%d", s.prefix, sch)
		db := s.serverOfSchema(sch)
		s.execOn(db, "CREATE DATABASE `"+name+"`")
		t.Cleanup(func() { _, _ = db.Exec("DROP DATABASE IF EXISTS `" + name + "`") })
		for i := range 4 {
			s.execOn(db, fmt.Sprintf("CREATE TABLE `%s`.user_coupon_%d (id BIGINT NOT NULL PRIMARY KEY, tpl_id BIGINT NOT NULL, source VARCHAR(32) NULL, "+
				"state TINYINT NOT NULL, order_no VARCHAR(64) NULL, uid BIGINT NOT NULL, KEY (tpl_id, source, state))", name, i))
			// no unique key on (coupon_id, order_no): duplicates can happen
			s.execOn(db, fmt.Sprintf("CREATE TABLE `%s`.redemption_log_%d (id BIGINT NOT NULL PRIMARY KEY, coupon_id BIGINT NOT NULL, "+
				"order_no VARCHAR(64) NOT NULL, KEY (coupon_id))", name, i))
		}
	}
	for i, db := range servers {
		tpl := fmt.Sprintf("`%s%d`.coupon_tpl", s.prefix, s.firstSchema(i))
		s.execOn(db, "CREATE TABLE "+tpl+" (id BIGINT NOT NULL PRIMARY KEY, budget BIGINT NOT NULL)")
		s.execOn(db, "INSERT INTO "+tpl+" (id, budget) VALUES (1, 1000000), (2, 1000000), (3, 1000000)")
	}
	return s
}

// schemasPer is how many schemas each server holds.
func (s *shardShop) schemasPer() int { return s.shards / 4 / len(s.servers) }

// firstSchema is the number of server i's first schema.
func (s *shardShop) firstSchema(i int) int { return i * s.schemasPer() }

func (s *shardShop) serverOfSchema(sch int) *sql.DB { return s.servers[sch/s.schemasPer()] }

// server is the server of a user's shard.
func (s *shardShop) server(user int64) *sql.DB {
	return s.serverOfSchema(int(user%int64(s.shards)) / 4)
}

// sibling is a user whose shard is the next table of the user's schema.
func (s *shardShop) sibling(user int64) int64 {
	n := user % 4
	return user - n + (n+1)%4
}

// table is a user's shard of a table.
func (s *shardShop) table(base string, user int64) string {
	n := user % int64(s.shards)
	return fmt.Sprintf("`%s%d`.%s_%d", s.prefix, n/4, base, n%4)
}

func (s *shardShop) execOn(db *sql.DB, q string, args ...any) {
	s.t.Helper()
	_, err := db.Exec(q, args...)
	require.NoError(s.t, err, q)
}

func (s *shardShop) expect(kind string) {
	s.mu.Lock()
	s.want[kind]++
	s.mu.Unlock()
}

func (s *shardShop) expected() map[string]int {
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

func (s *shardShop) claim(rng *rand.Rand, user int64) (shardCoupon, error) {
	return s.claimOf(s.tpls[rng.IntN(len(s.tpls))], user, []any{"app", "h5", nil}[rng.IntN(3)])
}

// claimOf gives a user a coupon of a template, in a channel (nil: none).
func (s *shardShop) claimOf(tpl, user int64, channel any) (shardCoupon, error) {
	c := shardCoupon{id: s.ids.Add(1), user: user}
	_, err := s.server(user).Exec("INSERT INTO "+s.table("user_coupon", user)+" (id, tpl_id, source, state, uid) VALUES (?, ?, ?, 0, ?)",
		c.id, tpl, channel, user)
	return c, err
}

// setState moves a coupon from one code to another; the shop's code
// checks the old state, a script does not.
func (s *shardShop) setState(c shardCoupon, from, to int) error {
	_, err := s.server(c.user).Exec("UPDATE "+s.table("user_coupon", c.user)+" SET state = ? WHERE id = ? AND state = ?", to, c.id, from)
	return err
}

// redeem marks a coupon used and writes its redemption row in the shard
// of user `in` (the coupon's own user normally): in one transaction on
// one server, else one after the other, as a middleware without
// distributed transactions does.
func (s *shardShop) redeem(c shardCoupon, in int64) error {
	db := s.server(c.user)
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	order := fmt.Sprint("o", c.id)
	if _, err := tx.Exec("UPDATE "+s.table("user_coupon", c.user)+" SET state = 1, order_no = ? WHERE id = ? AND state = 0", order, c.id); err != nil {
		return err
	}
	if s.server(in) != db {
		if err := tx.Commit(); err != nil {
			return err
		}
		return s.writeOff(c, in)
	}
	if _, err := tx.Exec("INSERT INTO "+s.table("redemption_log", in)+" (id, coupon_id, order_no) VALUES (?, ?, ?)", s.ids.Add(1), c.id, order); err != nil {
		return err
	}
	return tx.Commit()
}

// writeOff inserts a redemption row of a coupon's order into the shard of
// user `in`.
func (s *shardShop) writeOff(c shardCoupon, in int64) error {
	_, err := s.server(in).Exec("INSERT INTO "+s.table("redemption_log", in)+" (id, coupon_id, order_no) VALUES (?, ?, ?)",
		s.ids.Add(1), c.id, fmt.Sprint("o", c.id))
	return err
}

// work is the shop's legal traffic from users spread over the shards.
func (s *shardShop) work(rng *rand.Rand, ops int) error {
	var mine []shardCoupon
	for range ops {
		r := rng.IntN(10)
		if r < 5 || len(mine) == 0 {
			c, err := s.claim(rng, 1+rng.Int64N(500))
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
			err = s.setState(c, 0, 2)
		default:
			err = s.setState(c, 0, 3)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// busy runs workers writers of ops operations each while during runs
// (left: the writers still writing), and returns when all are done.
func (s *shardShop) busy(rng *rand.Rand, workers, ops int, during func(left *atomic.Int64)) {
	s.t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	var left atomic.Int64
	left.Store(int64(workers))
	for w := range workers {
		r := rand.New(rand.NewPCG(rng.Uint64(), uint64(w)))
		wg.Go(func() {
			defer left.Add(-1)
			if err := s.work(r, ops); err != nil {
				errs <- err
			}
		})
	}
	during(&left)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(s.t, err)
	}
}

// faults are the shop's bugs and scripts, once each, and redemption rows
// a middleware routed by another key: in another shard than its coupon
// (other is how far, in shards: on another server when it crosses one),
// which is no anomaly.
func (s *shardShop) faults(rng *rand.Rand, other int64) {
	s.t.Helper()
	user := func() int64 { return 1 + rng.Int64N(500) }
	c, err := s.claim(rng, user()) // expired, then back to available
	require.NoError(s.t, err)
	require.NoError(s.t, s.setState(c, 0, 2))
	require.NoError(s.t, s.setState(c, 2, 0))
	s.expect(inventory.AnomalyIllegalTransition)

	c, err = s.claim(rng, user()) // deleted by a clean-up script
	require.NoError(s.t, err)
	s.execOn(s.server(c.user), "DELETE FROM "+s.table("user_coupon", c.user)+" WHERE id = ?", c.id)
	s.expect(inventory.AnomalyDeletedCoupon)

	c, err = s.claim(rng, user()) // redeemed, its order written off again in another shard of its schema
	require.NoError(s.t, err)
	require.NoError(s.t, s.redeem(c, c.user))
	require.NoError(s.t, s.writeOff(c, s.sibling(c.user)))
	s.expect(inventory.AnomalyDuplicateRedemption)

	c, err = s.claim(rng, user()) // redeemed with its row in another shard: fine
	require.NoError(s.t, err)
	require.NoError(s.t, s.redeem(c, c.user+other))

	c, err = s.claim(rng, user()) // its row written off first, in another shard, then used
	require.NoError(s.t, err)
	require.NoError(s.t, s.writeOff(c, c.user+other+1))
	s.execOn(s.server(c.user), "UPDATE "+s.table("user_coupon", c.user)+" SET state = 1, order_no = ? WHERE id = ?", fmt.Sprint("o", c.id), c.id)

	c, err = s.claim(rng, user()) // used with no redemption row anywhere
	require.NoError(s.t, err)
	require.NoError(s.t, s.setState(c, 0, 1))
	s.expect(inventory.AnomalyUsedWithoutRedemption)
}

// allCoupons is the rows of server i's coupon shards, by hand.
func (s *shardShop) allCoupons(i int) string {
	var parts []string
	for n := range s.shards {
		if s.server(int64(n)) == s.servers[i] {
			parts = append(parts, "SELECT * FROM "+s.table("user_coupon", int64(n)))
		}
	}
	return strings.Join(parts, " UNION ALL ")
}

// sqlTruth counts server i's coupon tables by hand: per (template,
// channel) and state, summed over its shards.
func (s *shardShop) sqlTruth(i int) map[inventory.Pair]inventory.Counts {
	s.t.Helper()
	rows, err := s.servers[i].Query("SELECT tpl_id, COALESCE(source, 'legacy'), state, COUNT(*) FROM (" + s.allCoupons(i) + ") u GROUP BY 1, 2, 3")
	require.NoError(s.t, err)
	defer rows.Close()
	state := map[int]coupon.Status{0: coupon.Available, 1: coupon.Used, 2: coupon.Expired, 3: coupon.Returned}
	out := map[inventory.Pair]inventory.Counts{}
	for rows.Next() {
		var p inventory.Pair
		var code int
		var n int64
		require.NoError(s.t, rows.Scan(&p.Template, &p.Channel, &code, &n))
		c := out[p]
		require.True(s.t, cdctest.Add(&c, state[code], n))
		out[p] = c
	}
	require.NoError(s.t, rows.Err())
	return out
}
