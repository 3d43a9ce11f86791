package sink_test

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/inventory"
	"github.com/couponlink/couponlink/reconcile"
)

// A layout's own cancel, close and refund flows, written as its shop
// writes them, and its soft deletes (canal/states.go): the states that end
// an order's or a coupon's evidence without a DELETE. Each flow runs on a
// coupon of its own; want is the anomaly it is ("": none, a legal flow).

// shopFlow is one flow: its steps, each a commit (or a few) of the shop.
type shopFlow struct {
	name  string
	steps []func(s *shopEnv, c shopCoupon)
	want  string
}

// shopFlows are each layout's flows (none: the layout has no order states
// and no soft deletes).
var shopFlows = map[string][]shopFlow{
	"no-writeoff": orderTableFlows(),
	"order-columns": slices.Concat(couponOrderFlows(), softDeleteFlows(), shelfFlows("coupon_batch", "batch_id", "deleted", 2, 0),
		expiryFlows("member_coupon", "expire_time", "UPDATE shop_order SET status = 4 WHERE order_sn = ?o", "UPDATE member_coupon SET status = 0 WHERE id = ?c")),
	"orders-writeoff": slices.Concat(ordersWriteoffFlows(), shelfFlows("store_coupon_issue", "id", "is_del", 0, -1),
		expiryFlows("store_coupon_user", "end_time", "UPDATE store_order SET refund_status = 2 WHERE order_id = ?o",
			"UPDATE store_coupon_user SET status = 0 WHERE id = ?c"), sweepFlows()),
}

// unlimitedBudgets are the layouts whose budget 0 means unlimited.
var unlimitedBudgets = map[string]bool{"order-columns": true, "orders-writeoff": true}

// unlimitedCampaign is a campaign of budget 0, unlimited, with n coupons
// claimed: no over_issue. Its id is 0 for a layout without.
func (s *shopEnv) unlimitedCampaign(members *atomic.Int64, n int) int64 {
	s.T.Helper()
	if !unlimitedBudgets[s.dir] {
		return 0
	}
	id := s.newCampaign(0, 0)
	for range n {
		s.mustClaim(id, members.Add(1))
	}
	return id
}

// assertUnlimited checks status's view of unlimited campaigns: unlimited,
// nothing to over-issue, no claimable number, each with its n coupons.
func (s *shopEnv) assertUnlimited(n int64, ids ...int64) {
	s.T.Helper()
	for _, id := range ids {
		if id == 0 {
			continue
		}
		v, err := inventory.NewQueries(s.mapping()).ReadTemplate(context.Background(), s.DB, id)
		require.NoError(s.T, err)
		_, known := v.Claimable()
		require.True(s.T, v.Unlimited && !v.HasBudget && !known, "template %d: %+v", id, v)
		require.Equal(s.T, n, v.Taken())
	}
}

// shopDeleted is each layout's soft-delete column of the coupon table.
var shopDeleted = map[string]string{"order-columns": "deleted"}

// useStep uses the coupon with order prefix+id, with the shop's evidence.
func useStep(prefix string) func(s *shopEnv, c shopCoupon) {
	return func(s *shopEnv, c shopCoupon) {
		require.NoError(s.T, s.inTx(func(tx *sql.Tx) error { return s.use(s, tx, c, fmt.Sprint(prefix, c.id)) }))
	}
}

// execStep runs the statements in one transaction; ?c in them stands for
// the coupon's id, ?o for the order prefix+id.
func execStep(prefix string, stmts ...string) func(s *shopEnv, c shopCoupon) {
	return func(s *shopEnv, c shopCoupon) {
		args := strings.NewReplacer("?c", fmt.Sprint(c.id), "?o", fmt.Sprintf("'%s%d'", prefix, c.id))
		require.NoError(s.T, s.inTx(func(tx *sql.Tx) error {
			for _, q := range stmts {
				if err := s.execTx(tx, args.Replace(q)); err != nil {
					return err
				}
			}
			return nil
		}))
	}
}

// orderTableFlows are the no-writeoff shop's (evidence order_table): its
// order cancel and timeout put the coupon back to unused and close the
// order (order_status 4), which keeps its promotion.
func orderTableFlows() []shopFlow {
	cancel := func(p string) func(*shopEnv, shopCoupon) {
		return execStep(p, "UPDATE promo_member SET use_status = 0 WHERE id = ?c", "UPDATE sales_order SET order_status = 4 WHERE order_sn = ?o")
	}
	return []shopFlow{
		{name: "a paid order cancelled, the coupon used again", steps: []func(*shopEnv, shopCoupon){useStep("pc"),
			execStep("pc", "UPDATE sales_order SET order_status = 1 WHERE order_sn = ?o"), cancel("pc"), useStep("pc-again")}},
		{name: "an unpaid order cancelled by the timeout", steps: []func(*shopEnv, shopCoupon){useStep("tc"), cancel("tc")}},
		{name: "an order closed after its coupon went back to unused", steps: []func(*shopEnv, shopCoupon){useStep("lc"),
			execStep("lc", "UPDATE promo_member SET use_status = 0 WHERE id = ?c"),
			execStep("lc", "UPDATE sales_order SET order_status = 4 WHERE order_sn = ?o")}},
		{name: "cancelled, then used with no order", want: inventory.AnomalyUsedWithoutRedemption, steps: []func(*shopEnv, shopCoupon){
			useStep("nc"), cancel("nc"), execStep("nc", "UPDATE promo_member SET use_status = 1 WHERE id = ?c")}},
		{name: "a closed order reopened by hand", want: inventory.AnomalyDoubleSpend, steps: []func(*shopEnv, shopCoupon){
			useStep("ro"), cancel("ro"), execStep("ro", "UPDATE sales_order SET order_status = 1 WHERE order_sn = ?o")}},
	}
}

// couponOrderFlows are the order-columns shop's (evidence coupon_order):
// a refund or a cancel gives the coupon back and keeps the old order_sn on
// it; the checkout may write order_sn before the payment uses the coupon.
func couponOrderFlows() []shopFlow {
	refund := func(p string) func(*shopEnv, shopCoupon) {
		return execStep(p, "UPDATE shop_order SET status = 4 WHERE order_sn = ?o", "UPDATE member_coupon SET status = 0 WHERE id = ?c")
	}
	checkout := func(p string) func(*shopEnv, shopCoupon) {
		return execStep(p, "INSERT INTO shop_order (order_sn, uid, status) SELECT ?o, uid, 0 FROM member_coupon WHERE id = ?c",
			"UPDATE member_coupon SET order_sn = ?o WHERE id = ?c")
	}
	timeout := func(p string) func(*shopEnv, shopCoupon) {
		return execStep(p, "UPDATE shop_order SET status = 3 WHERE order_sn = ?o")
	}
	useKept := func(p string) func(*shopEnv, shopCoupon) {
		return execStep(p, "UPDATE member_coupon SET status = 1, use_time = NOW() WHERE id = ?c")
	}
	return []shopFlow{
		{name: "a refund that keeps the old order, then a new order", steps: []func(*shopEnv, shopCoupon){useStep("rf"), refund("rf"), useStep("rf-new")}},
		{name: "checkout, then payment", steps: []func(*shopEnv, shopCoupon){checkout("ck"),
			execStep("ck", "UPDATE shop_order SET status = 1 WHERE order_sn = ?o", "UPDATE member_coupon SET status = 1, use_time = NOW() WHERE id = ?c")}},
		{name: "a timeout cancel, then a new order", steps: []func(*shopEnv, shopCoupon){checkout("to"), timeout("to"), useStep("to-new")}},
		{name: "a refund that keeps the old order, then used with it", want: inventory.AnomalyUsedWithoutRedemption,
			steps: []func(*shopEnv, shopCoupon){useStep("ru"), refund("ru"), useKept("ru")}},
		{name: "a timeout cancel, then used with the cancelled order", want: inventory.AnomalyUsedWithoutRedemption,
			steps: []func(*shopEnv, shopCoupon){checkout("tp"), timeout("tp"), useKept("tp")}},
	}
}

// The orders-writeoff shop's statements (the coupon's id the argument):
// its checkout's use of the coupon, in autocommit, and a second checkout
// tab of a used coupon (a second live order of one coupon).
const (
	markUsedSQL  = "UPDATE store_coupon_user SET status = 1, use_time = UNIX_TIMESTAMP() WHERE id = ? AND status = 0"
	secondTabSQL = `INSERT INTO store_order (order_id, uid, coupon_id, pay_price, paid, add_time)
	SELECT CONCAT('tab2-', id), uid, id, 9.90, 1, UNIX_TIMESTAMP() FROM store_coupon_user WHERE id = ?`
)

// ordersWriteoffFlows are the orders-writeoff shop's (evidence table, the
// orders table itself, with states): the checkout marks the coupon used in
// autocommit and writes the order in its own transaction, which may fail;
// a refund (refund_status 2) or a cancel or timeout (is_del 1) gives the
// coupon back and keeps the order, which proves nothing any more.
func ordersWriteoffFlows() []shopFlow {
	giveBack := func(p, closed string) func(*shopEnv, shopCoupon) {
		return execStep(p, "UPDATE store_order SET "+closed+" WHERE order_id = ?o", "UPDATE store_coupon_user SET status = 0 WHERE id = ?c")
	}
	refund := func(p string) func(*shopEnv, shopCoupon) { return giveBack(p, "refund_status = 2") }
	timeout := func(p string) func(*shopEnv, shopCoupon) { return giveBack(p, "is_del = 1") }
	markUsed := func(s *shopEnv, c shopCoupon) { s.exec(markUsedSQL, c.id) }
	order := func(p string) func(*shopEnv, shopCoupon) {
		return execStep(p, "INSERT INTO store_order (order_id, uid, coupon_id, paid, add_time) SELECT ?o, uid, id, 1, UNIX_TIMESTAMP() FROM store_coupon_user WHERE id = ?c")
	}
	failedOrder := func(s *shopEnv, c shopCoupon) { // the order's transaction fails after its insert
		err := s.inTx(func(tx *sql.Tx) error {
			if err := s.execTx(tx, "INSERT INTO store_order (order_id, uid, coupon_id, add_time) VALUES (?, ?, ?, UNIX_TIMESTAMP())", fmt.Sprint("fail", c.id), c.member, c.id); err != nil {
				return err
			}
			return errNoRow
		})
		require.ErrorIs(s.T, err, errNoRow)
	}
	secondTab := func(s *shopEnv, c shopCoupon) { s.exec(secondTabSQL, c.id) }
	return []shopFlow{
		{name: "a refund, then a new order", steps: []func(*shopEnv, shopCoupon){useStep("rf"), refund("rf"), useStep("rf-new")}},
		{name: "an unpaid order timed out, then a new order", steps: []func(*shopEnv, shopCoupon){useStep("to"), timeout("to"), useStep("to-new")}},
		{name: "the order written after the use", steps: []func(*shopEnv, shopCoupon){markUsed, order("la")}},
		{name: "refunded, then deleted too", steps: []func(*shopEnv, shopCoupon){useStep("rd"), refund("rd"), execStep("rd", "UPDATE store_order SET is_del = 1 WHERE order_id = ?o")}},
		{name: "the order's transaction failed after the use", want: inventory.AnomalyUsedWithoutRedemption,
			steps: []func(*shopEnv, shopCoupon){markUsed, failedOrder}},
		{name: "a refund, then used at the counter with no order", want: inventory.AnomalyUsedWithoutRedemption,
			steps: []func(*shopEnv, shopCoupon){useStep("rc"), refund("rc"), markUsed}},
		{name: "a timeout, then used at the counter with no order", want: inventory.AnomalyUsedWithoutRedemption,
			steps: []func(*shopEnv, shopCoupon){useStep("tc"), timeout("tc"), markUsed}},
		{name: "two checkout tabs", want: inventory.AnomalyDoubleSpend, steps: []func(*shopEnv, shopCoupon){useStep("tab1-"), secondTab}},
		{name: "orders without a coupon (coupon_id 0)", steps: []func(*shopEnv, shopCoupon){noCoupon("nc-a"), noCoupon("nc-b"), useStep("nc-c")}},
	}
}

// noCoupon is an order of the coupon's member that used no coupon: the
// shop writes coupon_id 0, which names none.
func noCoupon(p string) func(*shopEnv, shopCoupon) {
	return execStep(p, "INSERT INTO store_order (order_id, uid, coupon_id, paid, add_time) SELECT ?o, uid, 0, 1, UNIX_TIMESTAMP() FROM store_coupon_user WHERE id = ?c")
}

// sweepFlows are the orders-writeoff shop's expiry: a cron job's bulk
// UPDATE of every unused coupon past its own end (end_time 0: none, so
// the coupons of the other flows and the workers, which have none, are
// left alone), legal.
func sweepFlows() []shopFlow {
	return []shopFlow{{name: "expired by the sweep", steps: []func(*shopEnv, shopCoupon){expireStep("store_coupon_user", "end_time", -1),
		execStep("", "UPDATE store_coupon_user SET status = 2 WHERE status = 0 AND end_time > 0 AND end_time < UNIX_TIMESTAMP()")}}}
}

// softDeleteFlows are a shop's soft deletes of coupons (deleted = 1).
func softDeleteFlows() []shopFlow {
	del, undel := execStep("", "UPDATE member_coupon SET deleted = 1 WHERE id = ?c"), execStep("", "UPDATE member_coupon SET deleted = 0 WHERE id = ?c")
	return []shopFlow{
		{name: "soft-deleted", want: inventory.AnomalyDeletedCoupon, steps: []func(*shopEnv, shopCoupon){del}},
		{name: "soft-deleted, then undeleted", want: inventory.AnomalyDeletedCoupon, steps: []func(*shopEnv, shopCoupon){del, undel}},
		{name: "a used coupon soft-deleted", want: inventory.AnomalyDeletedCoupon, steps: []func(*shopEnv, shopCoupon){useStep("sd"), del}},
	}
}

// shelfFlows are a shop's campaigns taken off the shelf (status off) or
// soft-deleted (deleted = 1) and put back (status 1, deleted = 0), with a
// coupon claimed past the shop's checks (bypassClaim) while off, or once
// back (legal); otherOff is another off-shelf code. The campaign is the
// coupon's (shared by the flows, which run one by one).
func shelfFlows(campaign, id, deleted string, off, otherOff int) []shopFlow {
	set := func(col string, v int) func(*shopEnv, shopCoupon) {
		return func(s *shopEnv, c shopCoupon) {
			s.exec(fmt.Sprintf("UPDATE %s SET %s = ? WHERE %s = ?", campaign, col, id), v, c.campaign)
		}
	}
	claim := func(s *shopEnv, c shopCoupon) { s.bypassClaim(c.campaign, c.member, 1) }
	return []shopFlow{
		{name: "off the shelf, claimed anyway, back on", want: inventory.AnomalyClaimedOffShelf,
			steps: []func(*shopEnv, shopCoupon){set("status", off), claim, set("status", 1)}},
		{name: "a campaign soft-deleted, claimed anyway, undeleted", want: inventory.AnomalyClaimedOffShelf,
			steps: []func(*shopEnv, shopCoupon){set(deleted, 1), claim, set(deleted, 0)}},
		{name: "another off code and on sale again, then claimed", steps: []func(*shopEnv, shopCoupon){set("status", otherOff), set("status", 1), claim}},
		{name: "soft-deleted and undeleted, then claimed", steps: []func(*shopEnv, shopCoupon){set(deleted, 1), set(deleted, 0), claim}},
	}
}

// expireStep sets the coupon's own expiry (col, a time as the layout
// stores it) days from now.
func expireStep(coupons, col string, days int) func(*shopEnv, shopCoupon) {
	return func(s *shopEnv, c shopCoupon) {
		s.exec(fmt.Sprintf("UPDATE %s SET %s = ? WHERE id = ?", coupons, col), s.time(time.Now().AddDate(0, 0, days)), c.id)
	}
}

// expiryFlows are a shop's coupons with their own expiry (col): used past
// it, given back (giveBack's statements) past it, and used before it.
func expiryFlows(coupons, col string, giveBack ...string) []shopFlow {
	return []shopFlow{
		{name: "used a day after its own expiry", want: inventory.AnomalyUsedAfterExpiry,
			steps: []func(*shopEnv, shopCoupon){expireStep(coupons, col, -1), useStep("ex")}},
		{name: "used, then given back a day after its own expiry", want: inventory.AnomalyUsedAfterExpiry,
			steps: []func(*shopEnv, shopCoupon){useStep("gb"), expireStep(coupons, col, -1), execStep("gb", giveBack...)}},
		{name: "used before its own expiry", steps: []func(*shopEnv, shopCoupon){expireStep(coupons, col, 1), useStep("bx")}},
	}
}

// runFlows runs every flow of the layout on a new coupon of campaign,
// each to its end (legalOnly: only the flows that are no anomaly).
func (s *shopEnv) runFlows(campaign int64, members *atomic.Int64, legalOnly bool) {
	s.T.Helper()
	for _, f := range shopFlows[s.dir] {
		if legalOnly && f.want != "" {
			continue
		}
		c := s.mustClaim(campaign, members.Add(1))
		for _, step := range f.steps {
			step(s, c)
		}
		if f.want != "" {
			s.expect(f.want, 1)
		}
	}
}

// runFlowsKilled runs every flow of more than one step with the cdc
// killed (-9) once it applied all steps but the last, which is written
// while it is down: inside the grace window of an order_table key (the
// cdc runs with a grace of 10s here, longer than the wait and the kill
// take). It returns the cdc now running.
func (s *shopEnv) runFlowsKilled(runner *cdcRunner, p *cdcProcess, campaign int64, members *atomic.Int64) *cdcProcess {
	s.T.Helper()
	grace := []string{"-redemption-grace", "10s"}
	_ = p.signal(syscall.SIGKILL)
	p = runner.start(grace...)
	for _, f := range shopFlows[s.dir] {
		if len(f.steps) < 2 {
			continue
		}
		c := s.mustClaim(campaign, members.Add(1))
		for _, step := range f.steps[:len(f.steps)-1] {
			step(s, c)
		}
		s.WaitCheckpoint()
		_ = p.signal(syscall.SIGKILL)
		f.steps[len(f.steps)-1](s, c)
		p = runner.start(grace...)
		if f.want != "" {
			s.expect(f.want, 1)
		}
	}
	return p
}

// limitedSoftDelete is a member at a per-member limit of 1 whose coupon is
// soft-deleted: the shop lets the member claim again, which is no
// per_user_limit_exceeded (the soft-deleted coupon is a deleted_coupon);
// the old coupon undeleted then is one.
func (s *shopEnv) limitedSoftDelete(members *atomic.Int64) {
	s.T.Helper()
	if shopDeleted[s.dir] == "" {
		return
	}
	limited, m := s.newCampaign(100, 1), members.Add(1)
	c := s.mustClaim(limited, m)
	s.exec(fmt.Sprintf("UPDATE %s SET %s = 1 WHERE %s = ?", s.coupon, shopDeleted[s.dir], s.uID), c.id)
	s.expect(inventory.AnomalyDeletedCoupon, 1)
	s.mustClaim(limited, m)
	// undeleted by hand while the member holds the new one: one over the limit
	s.exec(fmt.Sprintf("UPDATE %s SET %s = 0 WHERE %s = ?", s.coupon, shopDeleted[s.dir], s.uID), c.id)
	s.expect(inventory.AnomalyPerUserLimitExceeded, 1)
}

// live is the claim's condition that leaves out soft-deleted coupons.
func (s *shopEnv) live() string {
	if col := shopDeleted[s.dir]; col != "" {
		return " AND " + col + " = 0"
	}
	return ""
}

// pendingDecisions counts the checks waiting for their grace: the
// redemption checks and the order_table keys with a deadline.
func (s *shopEnv) pendingDecisions() int {
	var n int
	require.NoError(s.T, s.DB.QueryRow(`SELECT COUNT(*) FROM cdc_order_key WHERE deadline IS NOT NULL`).Scan(&n))
	return n + s.pendingChecks()
}

// assertShopTruth checks the counters against the shop's tables, counted
// through its mapping.
func (s *shopEnv) assertShopTruth() {
	s.T.Helper()
	snap, err := inventory.TakeSnapshot(context.Background(), s.DB, s.mapping())
	require.NoError(s.T, err)
	truth := map[inventory.Pair]inventory.Counts{}
	for p, c := range snap.Counts {
		truth[p] = *c
	}
	require.Equal(s.T, truth, s.Counters())
}

// assertReconciled runs a reconcile pass: the counters agree, and the
// differences are exactly the over-issued campaigns and the drifted stock
// columns.
func (s *shopEnv) assertReconciled(over, drifted []int64) {
	s.T.Helper()
	binlog, err := canal.ConfigFromDSN(s.DSN)
	require.NoError(s.T, err)
	r, err := reconcile.New(reconcile.Config{DB: s.DB, Mapping: s.mapping(), Binlog: binlog, Logger: testenv.QuietLogger(),
		Registerer: prometheus.NewRegistry()})
	require.NoError(s.T, err)
	rep, err := r.Pass(s.Ctx)
	require.NoError(s.T, err)
	require.True(s.T, rep.CountersCompared, rep.Note)
	var want, got []string
	for _, id := range over {
		want = append(want, fmt.Sprintf("%d/over_issue", id))
	}
	for _, id := range drifted {
		want = append(want, fmt.Sprintf("%d/remaining", id))
	}
	for _, d := range rep.Differences {
		got = append(got, d.Target)
	}
	require.ElementsMatch(s.T, want, got, rep.Summary())
}
