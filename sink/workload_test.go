package sink_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/inventory"
)

// fakeClock is the write path's clock: expiry sweeps move it forward.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(time.Now().UTC().Truncate(time.Second).UnixNano())
	return c
}

func (c *fakeClock) Now() time.Time          { return time.Unix(0, c.ns.Load()).UTC() }
func (c *fakeClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// wlConfig sizes a workload.
type wlConfig struct {
	Workers int
	Ops     int         // at least this many operations
	More    func() bool // then more while it returns true (nil: stop at Ops)
	Quota   int64       // quota of each regular channel bucket
	// OverIssue makes one raw INSERT of overRows coupons into the
	// "partner" bucket of the first template (quota overQuota), without
	// touching channel_quota, half-way through.
	OverIssue bool
	Seed      uint64 // 0: random (logged)
}

const (
	overQuota   = 20
	overRows    = 30
	validFor    = 600 * time.Second // coupons' validity
	sweepEvery  = 250               // operations between expiry sweeps
	sweepAdvect = 20 * time.Second  // fake clock step of a sweep
)

// workload is a random mixed workload over three templates and their
// channels: the write path (coupon.Store: claims, replays, redemptions,
// refunds in both modes, voids, expiry sweeps on a fake clock) and raw SQL
// as a legacy application would write it (claims, redemptions with and
// without their redemption_log row, releases, legal and illegal status
// changes, deletes). It counts the anomalies it causes, exactly:
//
//   - illegal: raw UPDATEs that made an illegal transition (each counted
//     only when it changed the row: WHERE id = ? AND status = <from>);
//   - deleted: raw DELETEs of a coupon row;
//   - usedNoRow: raw moves into USED with a fresh order no redemption row
//     will ever name; such a coupon is retired from the workload at once
//     (at most one more raw change: USED->EXPIRED or a DELETE), so that no
//     later move into USED or redemption row can hide it;
//   - overIssue: 1 when OverIssue (the partner bucket only grows).
//
// Every other bucket cannot go over its quota: raw claims take their slot
// with the same guard as the API (claimed < quota), releases give it back,
// so held+used+frozen = claimed - deleted <= quota.
//
// Each worker owns the coupons it claimed; only the expiry sweep changes
// them behind its back (AVAILABLE -> EXPIRED), so a failed operation
// re-reads the coupon.
type workload struct {
	t         *testing.T
	db        *sql.DB
	store     *coupon.Store
	clock     *fakeClock
	cfg       wlConfig
	templates []wlTemplate
	over      inventory.Pair

	ops, seq                              atomic.Int64
	illegal, deleted, usedNoRow, overDone atomic.Int64
	sweepMu                               sync.Mutex

	tally      sync.Map // operation -> *atomic.Int64 (done, refused, ...)
	unexpected sync.Map // error text -> *atomic.Int64
}

type wlTemplate struct {
	id       int64
	channels []string // the regular buckets (not partner)
	release  bool     // expiry policy release
}

func newWorkload(e *env, cfg wlConfig) *workload {
	t := e.T
	t.Helper()
	if cfg.Seed == 0 {
		cfg.Seed = rand.Uint64()
	}
	t.Logf("workload seed %d", cfg.Seed)
	clock := newFakeClock()
	store, err := coupon.New(coupon.Config{DB: e.DB, Now: clock.Now, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	w := &workload{t: t, db: e.DB, store: store, clock: clock, cfg: cfg}
	ctx := context.Background()
	specs := []struct {
		channels []string
		policy   string
		partner  bool
	}{
		{[]string{"app", "web", "sms"}, coupon.PolicyFreeze, true},
		{[]string{"app", "web", "sms"}, coupon.PolicyRelease, false},
		{[]string{"app", "web", "sms", "mini"}, coupon.PolicyFreeze, false},
	}
	for i, sp := range specs {
		quotas := map[string]int64{}
		var total int64
		for _, ch := range sp.channels {
			quotas[ch] = cfg.Quota
			total += cfg.Quota
		}
		if sp.partner {
			quotas["partner"] = overQuota
			total += overQuota
		}
		tpl, err := store.CreateTemplate(ctx, coupon.NewTemplate{Name: fmt.Sprint("wl", i), TotalQuota: total, Channels: quotas,
			ValidSeconds: int64(validFor / time.Second), PerUserLimit: 1000, ExpiryPolicy: sp.policy})
		require.NoError(t, err)
		w.templates = append(w.templates, wlTemplate{id: tpl.ID, channels: sp.channels, release: sp.policy == coupon.PolicyRelease})
		if sp.partner {
			w.over = inventory.Pair{Template: tpl.ID, Channel: "partner"}
		}
	}
	return w
}

// run runs the workers to the end and fails the test on an unexpected error.
func (w *workload) run() {
	w.t.Helper()
	var wg sync.WaitGroup
	for i := range w.cfg.Workers {
		wk := &worker{w: w, id: i, rng: rand.New(rand.NewPCG(w.cfg.Seed, uint64(i)))}
		wg.Go(wk.loop)
	}
	wg.Wait()
	w.check()
}

// start runs the workers in the background; wait ends them.
func (w *workload) start() (wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		for i := range w.cfg.Workers {
			wk := &worker{w: w, id: i, rng: rand.New(rand.NewPCG(w.cfg.Seed, uint64(i)))}
			wg.Go(wk.loop)
		}
		wg.Wait()
	}()
	return func() {
		w.t.Helper()
		<-done
		w.check()
	}
}

func (w *workload) check() {
	w.t.Helper()
	var bad []string
	w.unexpected.Range(func(k, v any) bool {
		bad = append(bad, fmt.Sprintf("%dx %s", v.(*atomic.Int64).Load(), k))
		return true
	})
	require.Empty(w.t, bad, "unexpected errors in the workload")
	w.t.Logf("workload: %d operations; %s", w.ops.Load(), w.summary())
	w.t.Logf("workload caused: %d illegal transitions, %d deletes, %d USED without redemption row, %d over-issue",
		w.illegal.Load(), w.deleted.Load(), w.usedNoRow.Load(), w.overDone.Load())
}

func (w *workload) summary() string {
	var parts []string
	w.tally.Range(func(k, v any) bool {
		parts = append(parts, fmt.Sprintf("%s=%d", k, v.(*atomic.Int64).Load()))
		return true
	})
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

func (w *workload) count(name string) {
	v, _ := w.tally.LoadOrStore(name, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

func (w *workload) fail(op string, err error) {
	v, _ := w.unexpected.LoadOrStore(op+": "+err.Error(), new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

// expected is the anomalies the workload caused, by kind.
func (w *workload) expected() map[string]int {
	out := map[string]int{}
	add := func(k string, n int64) {
		if n > 0 {
			out[k] = int(n)
		}
	}
	add(inventory.AnomalyIllegalTransition, w.illegal.Load())
	add(inventory.AnomalyDeletedCoupon, w.deleted.Load())
	add(inventory.AnomalyUsedWithoutRedemption, w.usedNoRow.Load())
	add(inventory.AnomalyOverIssue, w.overDone.Load())
	return out
}

// wlCoupon is what a worker believes of one of its coupons.
type wlCoupon struct {
	id       int64
	tpl      wlTemplate
	channel  string
	st       coupon.Status
	order    string // the order of its redemption row, when refundable
	redeemed bool   // a redemption row names order, and order_id = order
	released bool
	retired  bool // deleted, or USED without a redemption row: left alone
	claim    coupon.ClaimRequest
}

type worker struct {
	w       *workload
	id      int
	rng     *rand.Rand
	coupons []*wlCoupon
}

type wlOp struct {
	name   string
	weight int
	fn     func(k *worker, ctx context.Context) bool // false: no target, nothing done
}

var wlOps = []wlOp{
	{"api_claim", 22, (*worker).apiClaim},
	{"raw_claim", 6, (*worker).rawClaim},
	{"api_redeem", 17, (*worker).apiRedeem},
	{"api_refund_restore", 5, func(k *worker, ctx context.Context) bool { return k.apiRefund(ctx, coupon.RefundRestore) }},
	{"api_refund_recycle", 5, func(k *worker, ctx context.Context) bool { return k.apiRefund(ctx, coupon.RefundRecycle) }},
	{"api_void", 3, (*worker).apiVoid},
	{"api_replay", 4, (*worker).apiReplay},
	{"raw_redeem", 4, (*worker).rawRedeem},
	{"raw_late_row", 2, (*worker).rawLateRow},
	{"raw_used_no_row", 3, (*worker).rawUsedNoRow},
	{"raw_illegal", 12, (*worker).rawIllegal},
	{"raw_delete", 4, (*worker).rawDelete},
	{"raw_release", 5, (*worker).rawRelease},
	{"raw_expire", 4, func(k *worker, ctx context.Context) bool { return k.rawLegal(ctx, coupon.Expired) }},
	{"raw_void", 4, func(k *worker, ctx context.Context) bool { return k.rawLegal(ctx, coupon.Returned) }},
}

func (k *worker) loop() {
	w := k.w
	ctx := context.Background()
	total := 0
	for _, op := range wlOps {
		total += op.weight
	}
	for w.ops.Load() < int64(w.cfg.Ops) || (w.cfg.More != nil && w.cfg.More()) {
		n := w.ops.Add(1)
		if n%sweepEvery == 0 {
			w.sweep(ctx)
		}
		if w.cfg.OverIssue && n >= int64(w.cfg.Ops/2) && w.overDone.Load() == 0 {
			w.overIssue(ctx)
		}
		r := k.rng.IntN(total)
		for _, op := range wlOps {
			if r < op.weight {
				if !op.fn(k, ctx) {
					k.apiClaim(ctx)
				}
				break
			}
			r -= op.weight
		}
	}
}

func (k *worker) seq(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, k.id, k.w.seq.Add(1))
}

// pick returns a coupon matching ok, favouring the newest, or nil.
func (k *worker) pick(ok func(c *wlCoupon) bool) *wlCoupon {
	n := len(k.coupons)
	if n == 0 {
		return nil
	}
	for range 40 {
		var c *wlCoupon
		if n > 100 && k.rng.IntN(10) < 7 {
			c = k.coupons[n-1-k.rng.IntN(100)]
		} else {
			c = k.coupons[k.rng.IntN(n)]
		}
		if !c.retired && ok(c) {
			return c
		}
	}
	return nil
}

func is(st coupon.Status) func(*wlCoupon) bool {
	return func(c *wlCoupon) bool { return c.st == st }
}

// refresh re-reads a coupon after an operation on it was refused.
func (k *worker) refresh(ctx context.Context, c *wlCoupon) {
	var st coupon.Status
	var order sql.NullString
	err := k.w.db.QueryRowContext(ctx, `SELECT status, order_id FROM user_coupon WHERE id = ?`, c.id).Scan(&st, &order)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		c.retired = true
	case err != nil:
		k.w.fail("refresh", err)
	default:
		if st != c.st || order.String != c.order {
			c.redeemed = false
		}
		c.st = st
	}
}

// api records the outcome of a write-path call: a domain refusal (409 and
// the like) is expected; anything else is a failure of the test.
func (k *worker) api(op string, err error) bool {
	if err == nil {
		k.w.count(op)
		return true
	}
	if e, ok := coupon.AsError(err); ok {
		k.w.count(op + ":" + string(e.Code))
		return false
	}
	k.w.fail(op, err)
	return false
}

func (k *worker) tpl() (wlTemplate, string) {
	t := k.w.templates[k.rng.IntN(len(k.w.templates))]
	return t, t.channels[k.rng.IntN(len(t.channels))]
}

func (k *worker) apiClaim(ctx context.Context) bool {
	t, ch := k.tpl()
	req := coupon.ClaimRequest{TemplateID: t.id, UserID: fmt.Sprintf("w%d-u%d", k.id, k.rng.IntN(200)), Channel: ch, RequestID: k.seq("claim")}
	c, err := k.w.store.Claim(ctx, req)
	if k.api("api_claim", err) {
		k.coupons = append(k.coupons, &wlCoupon{id: c.UserCouponID, tpl: t, channel: ch, st: coupon.Available, claim: req})
	}
	return true
}

// apiReplay repeats an earlier claim or redemption: nothing new may be written.
func (k *worker) apiReplay(ctx context.Context) bool {
	if k.rng.IntN(2) == 0 {
		c := k.pick(func(c *wlCoupon) bool { return c.claim.RequestID != "" })
		if c == nil {
			return false
		}
		got, err := k.w.store.Claim(ctx, c.claim)
		if k.api("api_replay_claim", err) && (!got.Replayed || got.UserCouponID != c.id) {
			k.w.fail("api_replay_claim", fmt.Errorf("replay of claim %s made coupon %d (replayed=%v), want coupon %d", c.claim.RequestID, got.UserCouponID, got.Replayed, c.id))
		}
		return true
	}
	c := k.pick(func(c *wlCoupon) bool { return c.st == coupon.Used && c.redeemed })
	if c == nil {
		return false
	}
	got, err := k.w.store.Redeem(ctx, coupon.RedeemRequest{UserCouponID: c.id, OrderID: c.order})
	if k.api("api_replay_redeem", err) && !got.Replayed {
		k.w.fail("api_replay_redeem", fmt.Errorf("replay of redemption %s/%d was not a replay", c.order, c.id))
	}
	return true
}

func (k *worker) apiRedeem(ctx context.Context) bool {
	c := k.pick(is(coupon.Available))
	if c == nil {
		return false
	}
	order := k.seq("order")
	_, err := k.w.store.Redeem(ctx, coupon.RedeemRequest{UserCouponID: c.id, OrderID: order})
	if k.api("api_redeem", err) {
		c.st, c.order, c.redeemed = coupon.Used, order, true
	} else {
		k.refresh(ctx, c)
	}
	return true
}

func (k *worker) apiRefund(ctx context.Context, mode string) bool {
	c := k.pick(func(c *wlCoupon) bool { return c.st == coupon.Used && c.redeemed })
	if c == nil {
		return false
	}
	r, err := k.w.store.Refund(ctx, coupon.RefundRequest{UserCouponID: c.id, OrderID: c.order, Mode: mode})
	if k.api("api_refund_"+mode, err) {
		st, perr := coupon.ParseStatus(r.Status)
		if perr != nil {
			k.w.fail("api_refund", perr)
		}
		c.st, c.redeemed = st, false
	} else {
		k.refresh(ctx, c)
	}
	return true
}

func (k *worker) apiVoid(ctx context.Context) bool {
	var batch []*wlCoupon
	seen := map[int64]bool{}
	for range 1 + k.rng.IntN(3) {
		if c := k.pick(is(coupon.Available)); c != nil && !seen[c.id] {
			seen[c.id] = true
			batch = append(batch, c)
		}
	}
	if len(batch) == 0 {
		return false
	}
	ids := make([]int64, len(batch))
	for i, c := range batch {
		ids[i] = c.id
	}
	res, err := k.w.store.Void(ctx, coupon.VoidRequest{UserCouponIDs: ids, Reason: "campaign stopped", Operator: "ops", RequestID: k.seq("void")})
	if !k.api("api_void", err) {
		for _, c := range batch {
			k.refresh(ctx, c)
		}
		return true
	}
	for i, r := range res {
		if r.Result == coupon.VoidVoided {
			batch[i].st = coupon.Returned
		} else {
			k.refresh(ctx, batch[i])
		}
	}
	return true
}

// rawTx runs fn in a transaction; fn says whether to commit. A deadlock or
// lock wait timeout rolls it back as if it had not been tried.
func (k *worker) rawTx(ctx context.Context, op string, fn func(tx *sql.Tx) (bool, error)) bool {
	tx, err := k.w.db.BeginTx(ctx, nil)
	if err != nil {
		k.w.fail(op, err)
		return false
	}
	ok, err := fn(tx)
	if err == nil && ok {
		err = tx.Commit()
		if err == nil {
			k.w.count(op)
			return true
		}
	} else {
		_ = tx.Rollback()
	}
	if err != nil {
		k.rawErr(op, err)
	} else {
		k.w.count(op + ":skipped")
	}
	return false
}

func (k *worker) rawErr(op string, err error) {
	var me *mysql.MySQLError
	if errors.As(err, &me) && (me.Number == 1213 || me.Number == 1205) {
		k.w.count(op + ":lock_conflict")
		return
	}
	k.w.fail(op, err)
}

// rawExec runs one autocommit statement and reports whether it changed a row.
func (k *worker) rawExec(ctx context.Context, op, q string, args ...any) bool {
	res, err := k.w.db.ExecContext(ctx, q, args...)
	if err != nil {
		k.rawErr(op, err)
		return false
	}
	n, err := res.RowsAffected()
	if err != nil {
		k.w.fail(op, err)
		return false
	}
	if n == 1 {
		k.w.count(op)
	} else {
		k.w.count(op + ":skipped")
	}
	return n == 1
}

// rawClaim is a legacy claim: the coupon row and the slot, with the
// bucket's guard, in one transaction.
func (k *worker) rawClaim(ctx context.Context) bool {
	t, ch := k.tpl()
	now := k.w.clock.Now()
	var id int64
	if k.rawTx(ctx, "raw_claim", func(tx *sql.Tx) (bool, error) {
		res, err := tx.ExecContext(ctx, `INSERT INTO user_coupon (template_id, user_id, channel, status, claimed_at, expires_at)
			VALUES (?, ?, ?, 1, ?, ?)`, t.id, fmt.Sprintf("legacy-%d", k.id), ch, now, now.Add(validFor))
		if err != nil {
			return false, err
		}
		if id, err = res.LastInsertId(); err != nil {
			return false, err
		}
		res, err = tx.ExecContext(ctx, `UPDATE channel_quota SET claimed = claimed + 1 WHERE template_id = ? AND channel = ? AND claimed < quota`, t.id, ch)
		if err != nil {
			return false, err
		}
		n, err := res.RowsAffected()
		return n == 1, err
	}) {
		k.coupons = append(k.coupons, &wlCoupon{id: id, tpl: t, channel: ch, st: coupon.Available})
	}
	return true
}

// redeemTx moves an AVAILABLE coupon to USED by order in tx.
func (k *worker) redeemTx(ctx context.Context, tx *sql.Tx, c *wlCoupon, order string) (bool, error) {
	res, err := tx.ExecContext(ctx, `UPDATE user_coupon SET status = 2, order_id = ?, redeemed_at = ?, version = version + 1
		WHERE id = ? AND status = 1`, order, k.w.clock.Now(), c.id)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

func (k *worker) insertRedemption(ctx context.Context, tx interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, c *wlCoupon, order string) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO redemption_log (user_coupon_id, template_id, channel, order_id, redeemed_at, idempotency_key)
		VALUES (?, ?, ?, ?, ?, ?)`, c.id, c.tpl.id, c.channel, order, k.w.clock.Now(), coupon.RedemptionKey(order, c.id))
	return err
}

// rawRedeem is a legacy redemption done right: status and ledger row in one transaction.
func (k *worker) rawRedeem(ctx context.Context) bool {
	c := k.pick(is(coupon.Available))
	if c == nil {
		return false
	}
	order := k.seq("lorder")
	if k.rawTx(ctx, "raw_redeem", func(tx *sql.Tx) (bool, error) {
		ok, err := k.redeemTx(ctx, tx, c, order)
		if !ok || err != nil {
			return ok, err
		}
		return true, k.insertRedemption(ctx, tx, c, order)
	}) {
		c.st, c.order, c.redeemed = coupon.Used, order, true
	} else {
		k.refresh(ctx, c)
	}
	return true
}

// rawLateRow is a legacy redemption whose ledger row comes in a later
// transaction, well within the grace period: not an anomaly.
func (k *worker) rawLateRow(ctx context.Context) bool {
	c := k.pick(is(coupon.Available))
	if c == nil {
		return false
	}
	order := k.seq("late")
	if !k.rawTx(ctx, "raw_late_row", func(tx *sql.Tx) (bool, error) { return k.redeemTx(ctx, tx, c, order) }) {
		k.refresh(ctx, c)
		return true
	}
	if err := k.insertRedemption(ctx, k.w.db, c, order); err != nil {
		k.w.fail("raw_late_row", err)
	}
	c.st, c.order, c.redeemed = coupon.Used, order, true
	return true
}

// rawUsedNoRow marks a coupon USED by an order that never gets a
// redemption row: an anomaly after the grace period.
func (k *worker) rawUsedNoRow(ctx context.Context) bool {
	c := k.pick(is(coupon.Available))
	if c == nil {
		return false
	}
	if k.rawExec(ctx, "raw_used_no_row", `UPDATE user_coupon SET status = 2, order_id = ?, version = version + 1 WHERE id = ? AND status = 1`,
		k.seq("ghost"), c.id) {
		k.w.usedNoRow.Add(1)
		c.st = coupon.Used
		k.taint(ctx, c)
	} else {
		k.refresh(ctx, c)
	}
	return true
}

// taint retires a coupon that went USED without a redemption row, after
// at most one more raw change that cannot hide the anomaly.
func (k *worker) taint(ctx context.Context, c *wlCoupon) {
	c.retired, c.redeemed = true, false
	switch k.rng.IntN(3) {
	case 0:
		if k.rawExec(ctx, "raw_illegal_after_ghost", `UPDATE user_coupon SET status = 3, version = version + 1 WHERE id = ? AND status = 2`, c.id) {
			k.w.illegal.Add(1)
		}
	case 1:
		if k.rawExec(ctx, "raw_delete_after_ghost", `DELETE FROM user_coupon WHERE id = ?`, c.id) {
			k.w.deleted.Add(1)
		}
	}
}

// illegalTargets are the illegal moves from each state.
var illegalTargets = map[coupon.Status][]coupon.Status{
	coupon.Used:     {coupon.Expired},
	coupon.Expired:  {coupon.Used, coupon.Available, coupon.Returned},
	coupon.Returned: {coupon.Available, coupon.Used, coupon.Expired},
}

func (k *worker) rawIllegal(ctx context.Context) bool {
	c := k.pick(func(c *wlCoupon) bool { return c.st != coupon.Available })
	if c == nil {
		return false
	}
	targets := illegalTargets[c.st]
	to := targets[k.rng.IntN(len(targets))]
	if coupon.Legal(c.st, to) {
		panic(fmt.Sprintf("%s -> %s is legal", c.st, to))
	}
	var ok bool
	if to == coupon.Used {
		ok = k.rawExec(ctx, "raw_illegal_to_used", `UPDATE user_coupon SET status = 2, order_id = ?, version = version + 1 WHERE id = ? AND status = ?`,
			k.seq("ghost"), c.id, c.st)
	} else {
		// A revived coupon gets a far expiry: the write path's sweep
		// fails on a coupon that already has its expire flow row.
		ok = k.rawExec(ctx, "raw_illegal", `UPDATE user_coupon SET status = ?, version = version + 1,
			expires_at = IF(? = 1, expires_at + INTERVAL 100 YEAR, expires_at) WHERE id = ? AND status = ?`, to, to, c.id, c.st)
	}
	if !ok {
		k.refresh(ctx, c)
		return true
	}
	k.w.illegal.Add(1)
	c.st, c.redeemed = to, false
	if to == coupon.Used {
		k.w.usedNoRow.Add(1)
		k.taint(ctx, c)
	}
	return true
}

// rawLegal is a legacy expiry or void without a ledger row: legal.
func (k *worker) rawLegal(ctx context.Context, to coupon.Status) bool {
	c := k.pick(is(coupon.Available))
	if c == nil {
		return false
	}
	if k.rawExec(ctx, "raw_to_"+strings.ToLower(to.String()), `UPDATE user_coupon SET status = ?, version = version + 1 WHERE id = ? AND status = 1`, to, c.id) {
		c.st = to
	} else {
		k.refresh(ctx, c)
	}
	return true
}

func (k *worker) rawDelete(ctx context.Context) bool {
	c := k.pick(func(*wlCoupon) bool { return true })
	if c == nil {
		return false
	}
	if k.rawExec(ctx, "raw_delete", `DELETE FROM user_coupon WHERE id = ?`, c.id) {
		k.w.deleted.Add(1)
	}
	c.retired = true
	return true
}

// rawRelease gives an expired coupon's slot back to its bucket (policy
// release): a release flow row and claimed - 1, in one transaction.
func (k *worker) rawRelease(ctx context.Context) bool {
	c := k.pick(func(c *wlCoupon) bool { return c.st == coupon.Expired && c.tpl.release && !c.released })
	if c == nil {
		return false
	}
	c.released = true
	k.rawTx(ctx, "raw_release", func(tx *sql.Tx) (bool, error) {
		// the cdc may have released it already (release policy, cooldown
		// over): then this legacy-style release does nothing
		ins, err := tx.ExecContext(ctx, `INSERT IGNORE INTO inventory_flow (user_coupon_id, kind, seq, template_id, channel, from_status, to_status, reason, created_at)
			VALUES (?, 'release', 0, ?, ?, 3, 3, 'cooldown over', ?)`, c.id, c.tpl.id, c.channel, k.w.clock.Now())
		if err != nil {
			return false, err
		}
		if n, err := ins.RowsAffected(); err != nil || n == 0 {
			return false, err
		}
		res, err := tx.ExecContext(ctx, `UPDATE channel_quota SET claimed = claimed - 1 WHERE template_id = ? AND channel = ? AND claimed > 0`, c.tpl.id, c.channel)
		if err != nil {
			return false, err
		}
		n, err := res.RowsAffected()
		return n == 1, err
	})
	return true
}

// sweep moves the clock on and runs the write path's expiry sweep.
func (w *workload) sweep(ctx context.Context) {
	if !w.sweepMu.TryLock() {
		return
	}
	defer w.sweepMu.Unlock()
	w.clock.Advance(sweepAdvect)
	res, err := w.store.ExpireDue(ctx, 0)
	if err != nil {
		if e, ok := coupon.AsError(err); ok {
			w.count("sweep:" + string(e.Code))
			return
		}
		w.fail("sweep", err)
		return
	}
	w.count("sweep")
	for range res.Expired {
		w.count("swept")
	}
}

// overIssue inserts more coupons into the partner bucket than its quota,
// without taking slots: one over-issue.
func (w *workload) overIssue(ctx context.Context) {
	if !w.overDone.CompareAndSwap(0, 1) {
		return
	}
	now := w.clock.Now()
	var b strings.Builder
	var args []any
	for i := range overRows {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(?, ?, ?, 1, ?, ?)")
		args = append(args, w.over.Template, fmt.Sprint("partner-", i), w.over.Channel, now, now.Add(validFor))
	}
	if _, err := w.db.ExecContext(ctx, `INSERT INTO user_coupon (template_id, user_id, channel, status, claimed_at, expires_at) VALUES `+b.String(), args...); err != nil {
		w.fail("over_issue", err)
		w.overDone.Store(0)
	}
}
