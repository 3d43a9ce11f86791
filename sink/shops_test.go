package sink_test

import (
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/inventory"
)

// The four legacy shop layouts of deploy/legacy (docs/legacy-schemas.md), each attached as it is: its schema.sql and its mapping.yaml,
// written only by raw SQL the way such a shop's code writes, while the cdc
// is killed (-9) and restarted. Counters must equal the truth, and the
// anomalies must be exactly the faults the test injected, kind by kind.

// shopLayout is what the test needs to write a layout like its shop does.
type shopLayout struct {
	dir                                   string
	campaign, cID, cBudget, cLeft, cLimit string // cLeft "" = no remaining-stock column
	cEnds, cName                          string
	coupon, uID, uCampaign, uMember       string
	uChannel, uStatus                     string
	codes                                 map[coupon.Status]int64
	undecodable                           string   // a status value the mapping cannot decode
	channels                              []string // stored channel values
	// use marks a coupon used with the shop's evidence, in tx.
	use func(s *shopEnv, tx *sql.Tx, c shopCoupon, order string) error
	// bareUse marks it used with no evidence (used_without_redemption).
	bareUse func(s *shopEnv, c shopCoupon)
	// spendAgain writes evidence of a second use of a used coupon, and
	// says which anomaly it is.
	spendAgain func(s *shopEnv, c shopCoupon) string
	// at is a time as the layout stores it (nil: a DATETIME, in UTC).
	at func(time.Time) any
	// editStock is an admin's hand edit of the remaining-stock column, a
	// SET clause ("": the column taken down by 3).
	editStock string
	// readMinusOne: the shop also claims as racyClaims does.
	readMinusOne bool
}

type shopCoupon struct{ id, campaign, member int64 }

var shopLayouts = []shopLayout{
	{
		dir: "writeoff-table", campaign: "campaign", cID: "id", cBudget: "stock_total", cLeft: "stock_left", cLimit: "limit_per_user",
		cEnds: "ends_at", cName: "title", coupon: "coupon", uID: "id", uCampaign: "campaign_id", uMember: "member_id",
		uChannel: "source", uStatus: "state", undecodable: "99", channels: []string{"1", "2", "3"},
		codes: map[coupon.Status]int64{coupon.Available: 10, coupon.Used: 20, coupon.Expired: 30, coupon.Returned: 40},
		use: func(s *shopEnv, tx *sql.Tx, c shopCoupon, order string) error {
			if err := s.execTx(tx, "UPDATE coupon SET state = 20, order_no = ? WHERE id = ? AND state = 10", order, c.id); err != nil {
				return err
			}
			return s.execTx(tx, "INSERT INTO coupon_writeoff (coupon_id, order_no, store_id) VALUES (?, ?, 7)", c.id, order)
		},
		bareUse: func(s *shopEnv, c shopCoupon) {
			s.exec("UPDATE coupon SET state = 20, order_no = ? WHERE id = ?", fmt.Sprint("bare", c.id), c.id)
		},
		spendAgain: func(s *shopEnv, c shopCoupon) string {
			s.exec("INSERT INTO coupon_writeoff (coupon_id, order_no, store_id) SELECT id, order_no, 8 FROM coupon WHERE id = ?", c.id)
			return inventory.AnomalyDuplicateRedemption
		},
	},
	{
		dir: "order-columns", campaign: "coupon_batch", cID: "batch_id", cBudget: "total_count", cLimit: "per_limit",
		cEnds: "end_time", cName: "batch_name", coupon: "member_coupon", uID: "id", uCampaign: "batch_id", uMember: "uid",
		uChannel: "get_from", uStatus: "status", undecodable: "7", channels: []string{"h5", "app"},
		codes: map[coupon.Status]int64{coupon.Available: 0, coupon.Used: 1, coupon.Expired: 2},
		use: func(s *shopEnv, tx *sql.Tx, c shopCoupon, order string) error {
			if err := s.execTx(tx, "UPDATE member_coupon SET status = 1, order_sn = ?, use_time = NOW() WHERE id = ? AND status = 0", order, c.id); err != nil {
				return err
			}
			return s.execTx(tx, "INSERT INTO shop_order (order_sn, uid, status) VALUES (?, ?, 1)", order, c.member)
		},
		bareUse: func(s *shopEnv, c shopCoupon) {
			s.exec("UPDATE member_coupon SET status = 1, use_time = NOW() WHERE id = ?", c.id)
		},
		spendAgain: func(s *shopEnv, c shopCoupon) string {
			s.exec("UPDATE member_coupon SET order_sn = CONCAT(order_sn, '-again') WHERE id = ?", c.id)
			return inventory.AnomalyDoubleSpend
		},
	},
	{
		dir: "no-writeoff", campaign: "promo", cID: "id", cBudget: "publish", cLeft: "remain", cLimit: "per_limit",
		cEnds: "end_time", cName: "name", coupon: "promo_member", uID: "id", uCampaign: "promo_id", uMember: "member_id",
		uChannel: "get_type", uStatus: "use_status", undecodable: "NULL", channels: []string{"0", "1"},
		codes: map[coupon.Status]int64{coupon.Available: 0, coupon.Used: 1, coupon.Expired: 2},
		use: func(s *shopEnv, tx *sql.Tx, c shopCoupon, order string) error {
			if err := s.execTx(tx, "UPDATE promo_member SET use_status = 1 WHERE id = ? AND use_status = 0", c.id); err != nil {
				return err
			}
			return s.execTx(tx, "INSERT INTO sales_order (order_sn, member_id, promo_id, amount) VALUES (?, ?, ?, 9.90)", order, c.member, c.campaign)
		},
		bareUse: func(s *shopEnv, c shopCoupon) { s.exec("UPDATE promo_member SET use_status = 1 WHERE id = ?", c.id) },
		spendAgain: func(s *shopEnv, c shopCoupon) string {
			s.exec("INSERT INTO sales_order (order_sn, member_id, promo_id, amount) VALUES (?, ?, ?, 5.00)", fmt.Sprint("again", c.id), c.member, c.campaign)
			return inventory.AnomalyDoubleSpend
		},
	},
	{
		dir: "orders-writeoff", campaign: "store_coupon_issue", cID: "id", cBudget: "total_count", cLeft: "remain_count", cLimit: "receive_limit",
		cEnds: "end_time", cName: "coupon_title", coupon: "store_coupon_user", uID: "id", uCampaign: "cid", uMember: "uid",
		uChannel: "type", uStatus: "status", undecodable: "7", channels: []string{"get", "send"},
		codes: map[coupon.Status]int64{coupon.Available: 0, coupon.Used: 1, coupon.Expired: 2},
		// the checkout marks the coupon used in autocommit, then writes
		// the order (the only evidence) in a transaction of its own
		use: func(s *shopEnv, tx *sql.Tx, c shopCoupon, order string) error {
			if err := s.execTx(s.conn, markUsedSQL, c.id); err != nil {
				return err
			}
			return s.execTx(tx, "INSERT INTO store_order (order_id, uid, coupon_id, pay_price, paid, add_time) VALUES (?, ?, ?, 9.90, 1, UNIX_TIMESTAMP())",
				order, c.member, c.id)
		},
		bareUse: func(s *shopEnv, c shopCoupon) { s.exec(markUsedSQL, c.id) }, // and no order
		spendAgain: func(s *shopEnv, c shopCoupon) string { // a second checkout tab went through too
			s.exec(secondTabSQL, c.id)
			return inventory.AnomalyDoubleSpend
		},
		at:           func(t time.Time) any { return t.Unix() },
		editStock:    "remain_count = total_count", // the admin form saved with the stock it was created with
		readMinusOne: true,
	},
}

// shopEnv is one layout's schema on the test server, beside couponlink's
// tables, and the anomalies the test caused in it.
type shopEnv struct {
	*env
	shopLayout
	schema string
	conn   *sql.DB // the shop's own pool: its database is the shop's schema
	yaml   string
	mu     sync.Mutex
	want   map[string]int
	nextID atomic.Int64 // campaign ids
	// unlimited are the campaigns of an unlimited budget (unlimitedCampaign)
	unlimited []int64
}

func newShopEnv(t *testing.T, l shopLayout) *shopEnv {
	e := newEnv(t)
	schema := "shop_" + strings.TrimSuffix(testenv.KeyPrefix(t), ":")
	_, err := e.DB.Exec("CREATE DATABASE `" + schema + "`")
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = e.DB.Exec("DROP DATABASE IF EXISTS `" + schema + "`") })
	conn, err := sql.Open("mysql", strings.Replace(e.DSN, "/"+e.DBName, "/"+schema, 1))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	s := &shopEnv{env: e, shopLayout: l, schema: schema, conn: conn, want: map[string]int{}}
	s.nextID.Store(100)
	ddl, err := os.ReadFile(filepath.Join("..", "deploy", "legacy", l.dir, "schema.sql"))
	require.NoError(t, err)
	for _, stmt := range strings.Split(string(ddl), ";\n") {
		if strings.TrimSpace(stripComments(stmt)) != "" {
			s.exec(stmt)
		}
	}
	yaml, err := os.ReadFile(filepath.Join("..", "deploy", "legacy", l.dir, "mapping.yaml"))
	require.NoError(t, err)
	s.yaml = strings.Replace(string(yaml), "schema: shop", "schema: "+schema, 1)
	return s
}

func stripComments(stmt string) string {
	var out []string
	for _, line := range strings.Split(stmt, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "--") {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

func (s *shopEnv) mapping() *canal.Mapping {
	m, err := canal.LoadMapping([]byte(s.yaml))
	require.NoError(s.T, err)
	return m
}

func (s *shopEnv) mappingFile() string {
	path := filepath.Join(s.T.TempDir(), "mapping.yaml")
	require.NoError(s.T, os.WriteFile(path, []byte(s.yaml), 0o600))
	return path
}

func (s *shopEnv) exec(q string, args ...any) {
	s.T.Helper()
	_, err := s.conn.Exec(q, args...)
	require.NoError(s.T, err, q)
}

// execer is a transaction, or the pool for a statement in autocommit.
type execer interface {
	Exec(q string, args ...any) (sql.Result, error)
}

// execTx runs q in tx; an UPDATE that changes no row is errNoRow.
func (s *shopEnv) execTx(tx execer, q string, args ...any) error {
	res, err := tx.Exec(q, args...)
	if err != nil {
		return fmt.Errorf("%s: %w", q, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("%s: %w", q, err)
	}
	if n == 0 && strings.HasPrefix(q, "UPDATE") {
		return errNoRow
	}
	return nil
}

var errNoRow = fmt.Errorf("no row changed")

// expect adds n anomalies of kind to those the test caused.
func (s *shopEnv) expect(kind string, n int) {
	s.mu.Lock()
	s.want[kind] += n
	s.mu.Unlock()
}

func (s *shopEnv) expected() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for k, n := range s.want {
		if n > 0 {
			out[k] = n
		}
	}
	return out
}

// newCampaign adds a campaign (budget, per-member limit 0 = none) that
// ends in a year.
func (s *shopEnv) newCampaign(budget, limit int) int64 {
	id := s.nextID.Add(1)
	cols := []string{s.cID, s.cName, s.cBudget, s.cLimit, s.cEnds}
	vals := []any{id, fmt.Sprint("campaign ", id), budget, limit, s.time(time.Now().AddDate(1, 0, 0))}
	if s.cLeft != "" {
		cols, vals = append(cols, s.cLeft), append(vals, budget)
	}
	s.exec(fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s)", s.campaign, strings.Join(cols, ", "),
		strings.TrimSuffix(strings.Repeat("?, ", len(vals)), ", ")), vals...)
	return id
}

// time is t as the layout stores it.
func (s *shopEnv) time(t time.Time) any {
	if s.at == nil {
		return t.UTC()
	}
	return s.at(t)
}

// claim is the shop's claim: the campaign row locked, the member's limit
// and the stock checked, the coupon inserted and the stock taken, in one
// transaction. ok is false when the shop refuses (sold out, limit).
func (s *shopEnv) claim(campaign, member int64, channel string) (shopCoupon, bool, error) {
	tx, err := s.conn.Begin()
	if err != nil {
		return shopCoupon{}, false, err
	}
	defer func() { _ = tx.Rollback() }()
	var budget, limit int64
	left := "NULL"
	if s.cLeft != "" {
		left = s.cLeft
	}
	var stock sql.NullInt64
	err = tx.QueryRow(fmt.Sprintf("SELECT %s, COALESCE(%s, 0), %s FROM %s WHERE %s = ? FOR UPDATE", s.cBudget, s.cLimit, left,
		s.campaign, s.cID), campaign).Scan(&budget, &limit, &stock)
	if err != nil {
		return shopCoupon{}, false, err
	}
	var mine, all int64
	err = tx.QueryRow(fmt.Sprintf("SELECT COUNT(*), COALESCE(SUM(%s = ?), 0) FROM %s WHERE %s = ?%s", s.uMember, s.coupon, s.uCampaign, s.live()),
		member, campaign).Scan(&all, &mine)
	if err != nil {
		return shopCoupon{}, false, err
	}
	unlimited := budget == 0 && unlimitedBudgets[s.dir]
	soldOut := (stock.Valid && stock.Int64 <= 0) || (!stock.Valid && all >= budget)
	if (limit > 0 && mine >= limit) || (!unlimited && soldOut) {
		return shopCoupon{}, false, nil
	}
	c, err := s.insertCoupon(tx, campaign, member, channel, fmt.Sprint(s.codes[coupon.Available]))
	if err != nil {
		return c, false, err
	}
	if err := s.takeStock(tx, campaign, 1); err != nil {
		return c, false, err
	}
	return c, true, tx.Commit()
}

func (s *shopEnv) insertCoupon(tx *sql.Tx, campaign, member int64, channel, status string) (shopCoupon, error) {
	res, err := tx.Exec(fmt.Sprintf("INSERT INTO %s (%s, %s, %s, %s) VALUES (?, ?, ?, %s)", s.coupon, s.uCampaign, s.uMember,
		s.uChannel, s.uStatus, status), campaign, member, channel)
	if err != nil {
		return shopCoupon{}, err
	}
	id, err := res.LastInsertId()
	return shopCoupon{id: id, campaign: campaign, member: member}, err
}

// takeStock moves the shop's remaining-stock column by -n, unguarded.
func (s *shopEnv) takeStock(tx *sql.Tx, campaign int64, n int) error {
	if s.cLeft == "" {
		return nil
	}
	return s.execTx(tx, fmt.Sprintf("UPDATE %s SET %s = %s - ? WHERE %s = ?", s.campaign, s.cLeft, s.cLeft, s.cID), n, campaign)
}

// inTx runs fn in a transaction of the shop's pool.
func (s *shopEnv) inTx(fn func(tx *sql.Tx) error) error {
	tx, err := s.conn.Begin()
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}

func (s *shopEnv) mustClaim(campaign, member int64) shopCoupon {
	s.T.Helper()
	c, ok, err := s.claim(campaign, member, s.channels[0])
	require.NoError(s.T, err)
	require.True(s.T, ok, "the shop refused a claim of campaign %d by member %d", campaign, member)
	return c
}

func (s *shopEnv) setStatus(c shopCoupon, st coupon.Status) {
	s.exec(fmt.Sprintf("UPDATE %s SET %s = ? WHERE %s = ?", s.coupon, s.uStatus, s.uID), s.codes[st], c.id)
}

// shopFaults are what a shop's bugs, scripts and people do to its tables,
// once each; stock drift is the reconciler's, not an anomaly, so its
// campaigns are returned, with the over-issued ones.
func (s *shopEnv) faults(members *atomic.Int64) (over, drifted []int64) {
	s.T.Helper()
	member := func() int64 { return members.Add(1) }
	shared := s.newCampaign(100000, 0)

	overIssued := s.newCampaign(3, 0) // the shop's guard held for 3, then a script bypassed it
	for range 3 {
		s.mustClaim(overIssued, member())
	}
	s.bypassClaim(overIssued, member(), 2)
	s.expect(inventory.AnomalyOverIssue, 1)

	limited := s.newCampaign(100, 2) // a member past the per-member limit of 2
	m := member()
	s.mustClaim(limited, m)
	s.mustClaim(limited, m)
	s.bypassClaim(limited, m, 1)
	s.expect(inventory.AnomalyPerUserLimitExceeded, 1)

	ending := s.newCampaign(100, 0) // ended by the admin, then a coupon is used anyway
	late := s.mustClaim(ending, member())
	s.mustClaim(ending, member()) // stays unused: expired by the end time
	s.exec(fmt.Sprintf("UPDATE %s SET %s = ? WHERE %s = ?", s.campaign, s.cEnds, s.cID), s.time(time.Now().Add(-time.Hour)), ending)
	require.NoError(s.T, s.inTx(func(tx *sql.Tx) error { return s.use(s, tx, late, fmt.Sprint("late", late.id)) }))
	s.expect(inventory.AnomalyUsedAfterExpiry, 1)

	c := s.mustClaim(shared, member()) // expired, then un-expired
	s.setStatus(c, coupon.Expired)
	s.setStatus(c, coupon.Available)
	s.expect(inventory.AnomalyIllegalTransition, 1)

	c = s.mustClaim(shared, member()) // deleted by a clean-up script that gives the stock back
	require.NoError(s.T, s.inTx(func(tx *sql.Tx) error {
		if err := s.execTx(tx, fmt.Sprintf("DELETE FROM %s WHERE %s = ?", s.coupon, s.uID), c.id); err != nil {
			return err
		}
		return s.takeStock(tx, shared, -1)
	}))
	s.expect(inventory.AnomalyDeletedCoupon, 1)

	s.bareUse(s, s.mustClaim(shared, member())) // used with no evidence
	s.expect(inventory.AnomalyUsedWithoutRedemption, 1)

	c = s.mustClaim(shared, member()) // used, then spent again
	require.NoError(s.T, s.inTx(func(tx *sql.Tx) error { return s.use(s, tx, c, fmt.Sprint("o", c.id)) }))
	s.expect(s.spendAgain(s, c), 1)

	require.NoError(s.T, s.inTx(func(tx *sql.Tx) error { // an import with a status the shop has no code for
		_, err := s.insertCoupon(tx, shared, member(), s.channels[0], s.undecodable)
		return err
	}))
	s.expect(inventory.AnomalyUndecodableRow, 1)

	s.runFlows(shared, members, false) // the layout's cancels, closes, refunds, soft deletes, shelves and expiries
	s.limitedSoftDelete(members)
	s.unlimited = append(s.unlimited, s.unlimitedCampaign(members, 3))

	over = append(over, overIssued)
	if s.cLeft != "" { // the remaining stock moved by hand
		edited := s.newCampaign(50, 0)
		s.mustClaim(edited, member())
		edit := s.editStock
		if edit == "" {
			edit = fmt.Sprintf("%s = %s - 3", s.cLeft, s.cLeft)
		}
		s.exec(fmt.Sprintf("UPDATE %s SET %s WHERE %s = ?", s.campaign, edit, s.cID), edited)
		drifted = append(drifted, edited)
	}
	if s.readMinusOne {
		o, d := s.racyClaims(members, 3, 6)
		over, drifted = append(over, o...), append(drifted, d...)
	}
	return over, drifted
}

// racyClaims are n members claiming a campaign of budget at once, as a
// shop that reads the remaining stock outside its transaction and writes
// back what it read minus one (the campaign row is not locked). What the
// race let through is read back from the tables: coupons past the budget
// are one over_issue, and a remaining column that lost an update is stock
// drift (the reconciler's); the campaign is returned in over or drifted
// when it is so.
func (s *shopEnv) racyClaims(members *atomic.Int64, budget, n int) (over, drifted []int64) {
	s.T.Helper()
	id := s.newCampaign(budget, 0)
	var ready, done sync.WaitGroup
	ready.Add(n)
	errs := make(chan error, n)
	for range n {
		m := members.Add(1)
		done.Go(func() {
			var left int64
			err := s.conn.QueryRow(fmt.Sprintf("SELECT %s FROM %s WHERE %s = ?", s.cLeft, s.campaign, s.cID), id).Scan(&left)
			ready.Done()
			ready.Wait() // every member has read the stock: the writes race
			if err != nil || left <= 0 {
				errs <- err
				return
			}
			errs <- s.inTx(func(tx *sql.Tx) error {
				if _, err := s.insertCoupon(tx, id, m, s.channels[0], fmt.Sprint(s.codes[coupon.Available])); err != nil {
					return err
				}
				// not execTx: a write-back of what another claim wrote changes no row
				_, err := tx.Exec(fmt.Sprintf("UPDATE %s SET %s = ? WHERE %s = ?", s.campaign, s.cLeft, s.cID), left-1, id)
				return err
			})
		})
	}
	done.Wait()
	close(errs)
	for err := range errs {
		require.NoError(s.T, err)
	}
	var coupons, left int64
	require.NoError(s.T, s.conn.QueryRow(fmt.Sprintf("SELECT COUNT(*) FROM %s WHERE %s = ?", s.coupon, s.uCampaign), id).Scan(&coupons))
	require.NoError(s.T, s.conn.QueryRow(fmt.Sprintf("SELECT %s FROM %s WHERE %s = ?", s.cLeft, s.campaign, s.cID), id).Scan(&left))
	s.T.Logf("%s: %d read-minus-one claims of a budget of %d: %d coupons, %d left", s.dir, n, budget, coupons, left)
	if coupons > int64(budget) {
		over = append(over, id)
		s.expect(inventory.AnomalyOverIssue, 1)
	}
	if left != int64(budget)-coupons {
		drifted = append(drifted, id)
	}
	return over, drifted
}

// bypassClaim inserts n coupons past the shop's checks, taking the stock
// unguarded (so that the stock column stays right).
func (s *shopEnv) bypassClaim(campaign, member int64, n int) {
	s.T.Helper()
	require.NoError(s.T, s.inTx(func(tx *sql.Tx) error {
		for range n {
			if _, err := s.insertCoupon(tx, campaign, member, s.channels[0], fmt.Sprint(s.codes[coupon.Available])); err != nil {
				return err
			}
		}
		return s.takeStock(tx, campaign, n)
	}))
}

// work is one of the shop's legal users: claims, uses, expiries and (where
// the shop has them) voids, on the normal campaigns.
func (s *shopEnv) work(rng *rand.Rand, ops int, campaigns []int64) error {
	var mine []shopCoupon
	for range ops {
		switch r := rng.IntN(10); {
		case r < 5 || len(mine) == 0:
			c, ok, err := s.claim(campaigns[rng.IntN(len(campaigns))], 1+rng.Int64N(300), s.channels[rng.IntN(len(s.channels))])
			if err != nil {
				return err
			}
			if ok {
				mine = append(mine, c)
			}
		default:
			k := rng.IntN(len(mine))
			c := mine[k]
			mine = append(mine[:k], mine[k+1:]...)
			err := s.inTx(func(tx *sql.Tx) error {
				if r < 8 {
					return s.use(s, tx, c, fmt.Sprint("o", c.id))
				}
				to := coupon.Expired
				if _, voids := s.codes[coupon.Returned]; voids && r == 9 {
					to = coupon.Returned
				}
				return s.execTx(tx, fmt.Sprintf("UPDATE %s SET %s = ? WHERE %s = ? AND %s = ?", s.coupon, s.uStatus, s.uID, s.uStatus),
					s.codes[to], c.id, s.codes[coupon.Available])
			})
			if err != nil {
				return err
			}
		}
	}
	return nil
}

func TestShopLayouts(t *testing.T) {
	for _, l := range shopLayouts {
		t.Run(l.dir, func(t *testing.T) {
			t.Parallel()
			testShopLayout(t, l)
		})
	}
}

func testShopLayout(t *testing.T, l shopLayout) {
	s := newShopEnv(t, l)
	var members atomic.Int64
	members.Store(1_000_000)
	var campaigns []int64
	for range 4 {
		campaigns = append(campaigns, s.newCampaign(100000, 3))
	}
	rng := rand.New(rand.NewPCG(rand.Uint64(), 13))
	require.NoError(t, s.work(rng, 100, campaigns), "before the first start")
	s.runFlows(s.newCampaign(100000, 0), &members, true) // closed orders and soft deletes the first start sees as they are
	if col := shopDeleted[l.dir]; col != "" {
		c := s.mustClaim(campaigns[0], members.Add(1))
		s.exec(fmt.Sprintf("UPDATE %s SET %s = 1 WHERE %s = ?", s.coupon, col, s.uID), c.id) // never seen by the cdc: no anomaly
	}

	runner := newCDCRunner(t, s.env, testenv.RedisAddr(t))
	runner.args = append(runner.args, "-mapping", s.mappingFile())
	p := runner.start()
	s.WaitCheckpoint()

	// a backlog while the cdc is down, faults included
	_ = p.signal(syscall.SIGKILL)
	over, drifted := s.faults(&members)
	require.NoError(t, s.work(rng, 100, campaigns))
	p = runner.start()

	// the shop's users go on while the cdc is killed at random moments;
	// the faults happen among them
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	var left atomic.Int64
	left.Store(3)
	for w := range 3 {
		r := rand.New(rand.NewPCG(rng.Uint64(), uint64(w)))
		wg.Go(func() {
			defer left.Add(-1)
			if err := s.work(r, 300, campaigns); err != nil {
				errs <- err
			}
		})
	}
	over2, drifted2 := s.faults(&members)
	p, kills := runner.killWhileWriting(s.env, p, &left, rng)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	t.Logf("%s: %d kills while the shop wrote", l.dir, kills)
	p = s.runFlowsKilled(runner, p, s.newCampaign(100000, 0), &members)

	s.WaitCheckpoint()
	want := s.expected()
	cdctest.WaitFor(t, 60*time.Second, "every check decided", func() bool { return s.pendingDecisions() == 0 })
	s.WaitCheckpoint()
	t.Logf("%s: the faults injected, by kind: %v", l.dir, want)
	require.Equal(t, want, s.anomalies(), "the anomalies are exactly the faults")
	s.assertShopTruth()
	s.assertUnlimited(3, s.unlimited...)
	s.assertReconciled(append(over, over2...), append(drifted, drifted2...))
	require.NoError(t, p.signal(syscall.SIGTERM))
}

// Each layout's mapping.yaml is accepted by `mapping check` (canal's
// Inspect) against its schema.sql: no error, and every check the layout
// is for is on.
func TestShopLayoutsMappingCheck(t *testing.T) {
	for _, l := range shopLayouts {
		t.Run(l.dir, func(t *testing.T) {
			t.Parallel()
			s := newShopEnv(t, l)
			r, err := s.mapping().Inspect(s.Ctx, s.DB)
			require.NoError(t, err)
			require.True(t, r.OK(), "%v", r.Errors)
			on := map[string]string{}
			for _, c := range r.Checks {
				if c.On {
					on[c.Name] = c.Detail
				}
			}
			for _, kind := range []string{"illegal_transition", "deleted_coupon", "undecodable_row", "over_issue", "used_without_redemption",
				"per_user_limit_exceeded", "used_after_expiry"} {
				require.Contains(t, on, kind)
			}
			if l.at == nil {
				return
			}
			t.Run("used_after_expiry names integer times as such", func(t *testing.T) {
				require.NotContains(t, on["used_after_expiry"], "DATETIME")
				require.Contains(t, on["used_after_expiry"], "(unix_seconds)")
			})
		})
	}
}
