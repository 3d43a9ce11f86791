package sink_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/inventory"
	"github.com/couponlink/couponlink/sink"
)

const legacyMappingYAML = `
user_coupon: {table: LEGACY.t_user_coupon, id: id, template: tpl_id, channel: source, status: state, order: order_no, user: uid}
status: {AVAILABLE: [0], USED: [1], EXPIRED: [2], RETURNED: [3, 9]}
redemption_log: {table: LEGACY.t_writeoff, id: id, coupon: coupon_id, order: order_no}
template: {table: LEGACY.t_coupon_tpl, id: id, total_quota: budget}
default_channel: legacy
`

// legacyCodes are the stored codes of each state in the legacy schema.
var legacyCodes = map[coupon.Status][]int{coupon.Available: {0}, coupon.Used: {1}, coupon.Expired: {2}, coupon.Returned: {3, 9}}

// legacyEnv is a legacy coupon system's schema on the test server, beside
// couponlink's own tables in the test database.
type legacyEnv struct {
	*env
	schema string
	tq     func(string) string // qualifies a legacy table name
	yaml   string              // its mapping, LEGACY standing for schema: legacyMappingYAML by default
	codes  map[coupon.Status][]int
}

func newLegacyEnv(t *testing.T) *legacyEnv {
	e := newEnv(t)
	schema := "legacy_" + strings.TrimSuffix(testenv.KeyPrefix(t), ":")
	_, err := e.DB.Exec("CREATE DATABASE `" + schema + "`")
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = e.DB.Exec("DROP DATABASE IF EXISTS `" + schema + "`") })
	l := &legacyEnv{env: e, schema: schema, tq: func(tbl string) string { return "`" + schema + "`.`" + tbl + "`" },
		yaml: legacyMappingYAML, codes: legacyCodes}
	for _, q := range []string{
		`CREATE TABLE ` + l.tq("t_coupon_tpl") + ` (id BIGINT NOT NULL PRIMARY KEY, budget BIGINT NOT NULL, title VARCHAR(64) NOT NULL DEFAULT '')`,
		`CREATE TABLE ` + l.tq("t_user_coupon") + ` (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, tpl_id BIGINT NOT NULL,
			source VARCHAR(32) NULL, state TINYINT NOT NULL, order_no VARCHAR(64) NULL, uid VARCHAR(64) NOT NULL, KEY (tpl_id, source, state))`,
		// no unique key on (coupon_id, order_no): duplicates can happen
		`CREATE TABLE ` + l.tq("t_writeoff") + ` (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, coupon_id BIGINT NOT NULL,
			order_no VARCHAR(64) NOT NULL, KEY (coupon_id))`,
	} {
		_, err := e.DB.Exec(q)
		require.NoError(t, err, q)
	}
	return l
}

func (l *legacyEnv) mapping() *canal.Mapping {
	m, err := canal.LoadMapping([]byte(strings.ReplaceAll(l.yaml, "LEGACY", l.schema)))
	require.NoError(l.T, err)
	return m
}

// legacyTruth counts t_user_coupon per (tpl_id, source) and state, with
// the legacy codes (l.codes); a NULL or unmapped state is skipped, as the
// cdc does.
func (l *legacyEnv) legacyTruth() map[inventory.Pair]inventory.Counts {
	l.T.Helper()
	state := map[int]coupon.Status{}
	for st, codes := range l.codes {
		for _, c := range codes {
			state[c] = st
		}
	}
	rows, err := l.DB.Query(`SELECT tpl_id, COALESCE(source, 'legacy'), state, COUNT(*) FROM ` + l.tq("t_user_coupon") + ` GROUP BY 1, 2, 3`)
	require.NoError(l.T, err)
	defer rows.Close()
	out := map[inventory.Pair]inventory.Counts{}
	for rows.Next() {
		var p inventory.Pair
		var code sql.NullInt64
		var n int64
		require.NoError(l.T, rows.Scan(&p.Template, &p.Channel, &code, &n))
		c := out[p]
		if !code.Valid || !cdctest.Add(&c, state[int(code.Int64)], n) {
			continue // NULL or unmapped: undecodable, counted nowhere
		}
		out[p] = c
	}
	require.NoError(l.T, rows.Err())
	return out
}

// The legacy test: a schema with other table names, column names and
// status codes (RETURNED has two), mapped from YAML, written only by raw
// SQL by three goroutines. Counters follow the legacy codes; the anomalies
// are exactly the illegal transitions, deletes, USED coupons without a
// t_writeoff row after the grace, duplicate t_writeoff rows of one (order,
// coupon), and the one over-issue of a template past its budget (summed
// over its channels). Redis is in corrector mode: the cdc writes no stock key.
func TestLegacySchema(t *testing.T) {
	l := newLegacyEnv(t)
	ctx := context.Background()
	_, err := l.DB.Exec(`INSERT INTO ` + l.tq("t_coupon_tpl") + ` (id, budget) VALUES (1, 50), (2, 100000), (3, 100000)`)
	require.NoError(t, err)
	// coupons before the cdc's first start: counted by the bootstrap
	var vals []string
	for i := range 60 {
		src := []string{"'app'", "'h5'", "NULL"}[i%3]
		vals = append(vals, fmt.Sprintf("(%d, %s, %d, 'pre%d')", 2+i%2, src, []int{0, 1, 2, 3, 9}[i%5], i))
	}
	_, err = l.DB.Exec(`INSERT INTO ` + l.tq("t_user_coupon") + ` (tpl_id, source, state, uid) VALUES ` + strings.Join(vals, ", "))
	require.NoError(t, err)

	c := l.StartCDC(l.mapping(), func(cfg *sink.Config, _ *sink.Daemon) { cfg.RedemptionGrace = 2 * time.Second })
	l.WaitCheckpoint()
	require.Equal(t, l.legacyTruth(), l.Counters(), "bootstrap with the legacy codes")

	lw := &legacyWorkload{l: l}
	var wg sync.WaitGroup
	for i := range 3 {
		k := &legacyWorker{w: lw, id: i, rng: rand.New(rand.NewPCG(rand.Uint64(), uint64(i)))}
		wg.Go(func() { k.run(ctx, 600) })
	}
	wg.Wait()
	require.Empty(t, lw.errs, "unexpected errors in the legacy workload")

	// over-issue of template 1 (budget 50) across two channels: 40, then 20 more
	insert := func(n int, src string) {
		var vals []string
		for i := range n {
			vals = append(vals, fmt.Sprintf("(1, '%s', 0, 'over%d')", src, i))
		}
		_, err := l.DB.Exec(`INSERT INTO ` + l.tq("t_user_coupon") + ` (tpl_id, source, state, uid) VALUES ` + strings.Join(vals, ", "))
		require.NoError(t, err)
	}
	insert(20, "app")
	insert(20, "h5")
	l.WaitCheckpoint() // 40 <= 50: no over-issue yet
	insert(20, "h5")   // 60 > 50: one over-issue
	l.WaitCheckpoint()
	insert(5, "app") // still over: no new one
	_, err = l.DB.Exec(`UPDATE ` + l.tq("t_user_coupon") + ` SET state = 1, order_no = CONCAT('ovr', id) WHERE tpl_id = 1 LIMIT 10`)
	require.NoError(t, err)
	_, err = l.DB.Exec(`INSERT INTO ` + l.tq("t_writeoff") + ` (coupon_id, order_no) SELECT id, order_no FROM ` + l.tq("t_user_coupon") + ` WHERE tpl_id = 1 AND state = 1`)
	require.NoError(t, err)

	l.waitSettled(c, 60*time.Second)
	require.Equal(t, l.legacyTruth(), l.Counters(), "counters differ from GROUP BY over t_user_coupon with the legacy codes")
	want := map[string]int{inventory.AnomalyOverIssue: 1}
	for k, v := range map[string]int64{inventory.AnomalyIllegalTransition: lw.illegal.Load(), inventory.AnomalyDeletedCoupon: lw.deleted.Load(),
		inventory.AnomalyUsedWithoutRedemption: lw.usedNoRow.Load(), inventory.AnomalyDuplicateRedemption: lw.dups.Load()} {
		require.Positive(t, v, "the legacy workload caused no %s", k)
		want[k] = int(v)
	}
	t.Logf("legacy workload: %s; anomalies caused: %v", lw.summary(), want)
	require.Equal(t, want, l.anomalies(), "anomalies recorded differ from the ones the legacy workload caused")

	// corrector mode: no stock key written
	keys, _, err := l.RDB.Scan(ctx, 0, l.Keys.Prefix+"*", 1000).Result()
	require.NoError(t, err)
	require.Empty(t, keys, "the cdc wrote Redis keys in corrector mode")
}

// legacyWorkload is raw SQL on the legacy tables, counting the anomalies
// it causes (see workload for the rules that keep the counts exact).
type legacyWorkload struct {
	l                                 *legacyEnv
	seq                               atomic.Int64
	illegal, deleted, usedNoRow, dups atomic.Int64
	mu                                sync.Mutex
	errs                              []string
	tally                             sync.Map
}

func (w *legacyWorkload) fail(op string, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.errs = append(w.errs, op+": "+err.Error())
}

func (w *legacyWorkload) count(op string) {
	v, _ := w.tally.LoadOrStore(op, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

func (w *legacyWorkload) summary() string {
	var parts []string
	w.tally.Range(func(k, v any) bool {
		parts = append(parts, fmt.Sprintf("%s=%d", k, v.(*atomic.Int64).Load()))
		return true
	})
	return strings.Join(parts, " ")
}

type lgCoupon struct {
	id       int64
	st       coupon.Status
	order    string // its t_writeoff row's order, when redeemed
	redeemed bool
	retired  bool
}

type legacyWorker struct {
	w       *legacyWorkload
	id      int
	rng     *rand.Rand
	coupons []*lgCoupon
}

func (k *legacyWorker) code(st coupon.Status) int {
	c := legacyCodes[st]
	return c[k.rng.IntN(len(c))]
}

func (k *legacyWorker) pick(ok func(*lgCoupon) bool) *lgCoupon {
	for range 30 {
		if len(k.coupons) == 0 {
			return nil
		}
		c := k.coupons[k.rng.IntN(len(k.coupons))]
		if !c.retired && ok(c) {
			return c
		}
	}
	return nil
}

// exec runs one statement (or a transaction of several) and reports
// whether the first changed exactly one row; only then is the rest run.
func (k *legacyWorker) exec(ctx context.Context, op string, stmts ...[]any) bool {
	tx, err := k.w.l.DB.BeginTx(ctx, nil)
	if err != nil {
		k.w.fail(op, err)
		return false
	}
	defer func() { _ = tx.Rollback() }()
	for i, st := range stmts {
		res, err := tx.ExecContext(ctx, st[0].(string), st[1:]...)
		if err != nil {
			k.w.fail(op, err)
			return false
		}
		n, err := res.RowsAffected()
		if err != nil {
			k.w.fail(op, err)
			return false
		}
		if i == 0 && n != 1 {
			k.w.count(op + ":skipped")
			return false
		}
	}
	if err := tx.Commit(); err != nil {
		k.w.fail(op, err)
		return false
	}
	k.w.count(op)
	return true
}

func (k *legacyWorker) run(ctx context.Context, ops int) {
	uc, wo := k.w.l.tq("t_user_coupon"), k.w.l.tq("t_writeoff")
	setState := `UPDATE ` + uc + ` SET state = ? WHERE id = ? AND state = ?`
	setUsed := `UPDATE ` + uc + ` SET state = 1, order_no = ? WHERE id = ? AND state = ?`
	writeoff := `INSERT INTO ` + wo + ` (coupon_id, order_no) VALUES (?, ?)`
	// move changes a coupon's state by its current code, whatever code of
	// the state it has (RETURNED is 3 or 9): one UPDATE per candidate code.
	move := func(op string, c *lgCoupon, to coupon.Status, order string, extra ...[]any) bool {
		for _, from := range legacyCodes[c.st] {
			var first []any
			if to == coupon.Used {
				first = []any{setUsed, order, c.id, from}
			} else {
				first = []any{setState, k.code(to), c.id, from}
			}
			if k.exec(ctx, op, append([][]any{first}, extra...)...) {
				c.st = to
				return true
			}
		}
		return false
	}
	taint := func(c *lgCoupon) {
		k.w.usedNoRow.Add(1)
		c.retired = true
		switch k.rng.IntN(3) {
		case 0:
			if move("illegal_after_ghost", c, coupon.Expired, "") {
				k.w.illegal.Add(1)
			}
		case 1:
			if k.exec(ctx, "delete_after_ghost", []any{`DELETE FROM ` + uc + ` WHERE id = ?`, c.id}) {
				k.w.deleted.Add(1)
			}
		}
	}
	for range ops {
		order := fmt.Sprintf("lg-%d-%d", k.id, k.w.seq.Add(1))
		switch r := k.rng.IntN(100); {
		case r < 25 || len(k.coupons) < 10: // claim
			var src any = []string{"app", "h5"}[k.rng.IntN(2)]
			if k.rng.IntN(5) == 0 {
				src = nil // the default channel
			}
			res, err := k.w.l.DB.ExecContext(ctx, `INSERT INTO `+uc+` (tpl_id, source, state, uid) VALUES (?, ?, 0, ?)`, 2+k.rng.IntN(2), src, order)
			if err != nil {
				k.w.fail("claim", err)
				continue
			}
			id, _ := res.LastInsertId()
			k.coupons = append(k.coupons, &lgCoupon{id: id, st: coupon.Available})
			k.w.count("claim")
		case r < 40: // redemption with its t_writeoff row, in one transaction or just after
			c := k.pick(func(c *lgCoupon) bool { return c.st == coupon.Available })
			if c == nil {
				continue
			}
			if r < 35 {
				if move("redeem", c, coupon.Used, order, []any{writeoff, c.id, order}) {
					c.order, c.redeemed = order, true
				}
			} else if move("redeem_late_row", c, coupon.Used, order) {
				if k.exec(ctx, "late_row", []any{writeoff, c.id, order}) {
					c.order, c.redeemed = order, true
				}
			}
		case r < 44: // USED without a t_writeoff row
			if c := k.pick(func(c *lgCoupon) bool { return c.st == coupon.Available }); c != nil && move("used_no_row", c, coupon.Used, "ghost-"+order) {
				taint(c)
			}
		case r < 46: // a coupon inserted as USED: illegal, and no t_writeoff row
			res, err := k.w.l.DB.ExecContext(ctx, `INSERT INTO `+uc+` (tpl_id, source, state, order_no, uid) VALUES (3, 'app', 1, ?, ?)`, "ghost-"+order, order)
			if err != nil {
				k.w.fail("insert_used", err)
				continue
			}
			id, _ := res.LastInsertId()
			k.w.count("insert_used")
			k.w.illegal.Add(1)
			c := &lgCoupon{id: id, st: coupon.Used}
			k.coupons = append(k.coupons, c)
			taint(c)
		case r < 52: // a duplicate t_writeoff row of one (order, coupon)
			if c := k.pick(func(c *lgCoupon) bool { return c.redeemed }); c != nil && k.exec(ctx, "duplicate_writeoff", []any{writeoff, c.id, c.order}) {
				k.w.dups.Add(1)
			}
		case r < 58: // refund, back to the wallet (clears the order)
			if c := k.pick(func(c *lgCoupon) bool { return c.st == coupon.Used && c.redeemed }); c != nil &&
				k.exec(ctx, "restore", []any{`UPDATE ` + uc + ` SET state = 0, order_no = NULL WHERE id = ? AND state = 1`, c.id}) {
				c.st, c.redeemed = coupon.Available, false
			}
		case r < 63: // refund, recycled
			if c := k.pick(func(c *lgCoupon) bool { return c.st == coupon.Used && c.redeemed }); c != nil && move("recycle", c, coupon.Returned, "") {
				c.redeemed = false
			}
		case r < 70: // void or expiry
			to := coupon.Returned
			if r < 66 {
				to = coupon.Expired
			}
			if c := k.pick(func(c *lgCoupon) bool { return c.st == coupon.Available }); c != nil {
				move("to_"+strings.ToLower(to.String()), c, to, "")
			}
		case r < 74: // RETURNED 3 <-> 9: the same state, no transition
			if c := k.pick(func(c *lgCoupon) bool { return c.st == coupon.Returned }); c != nil {
				k.exec(ctx, "returned_recode", []any{`UPDATE ` + uc + ` SET state = 12 - state WHERE id = ? AND state IN (3, 9)`, c.id})
			}
		case r < 92: // illegal
			c := k.pick(func(c *lgCoupon) bool { return c.st != coupon.Available })
			if c == nil {
				continue
			}
			targets := illegalTargets[c.st]
			to := targets[k.rng.IntN(len(targets))]
			if move("illegal", c, to, "ghost-"+order) {
				k.w.illegal.Add(1)
				c.redeemed = false
				if to == coupon.Used {
					taint(c)
				}
			}
		default: // delete
			if c := k.pick(func(*lgCoupon) bool { return true }); c != nil {
				c.retired = true
				if k.exec(ctx, "delete", []any{`DELETE FROM ` + uc + ` WHERE id = ?`, c.id}) {
					k.w.deleted.Add(1)
				}
			}
		}
	}
}
