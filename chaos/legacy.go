package chaos

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// The legacy shop of the run: deploy/legacy/writeoff-table's schema on the
// run's MariaDB, written by bare SQL as a legacy application would, and a
// cdc of its own (couponlink's tables in the couponlink_legacy database)
// following it through the mapping. The writer knows which of its writes
// are anomalies: each must be reported, and nothing else.
const (
	legacyDB       = "couponlink_legacy"
	legacyCampaign = 1
)

// legacyStockKey is the legacy front end's own Redis key: it DECRs it on
// each claim (also when the claim then fails: drift the reconciler
// corrects) and INCRs it when the shop deletes a coupon.
const legacyStockKey = "shop:stock:1"

// legacyClaimedKey is the front end's "already claimed" set of the
// campaign (its per-member limit is 1): it SADDs the member before the
// order commits (also when the order then fails: a member without a
// coupon, which the reconciler removes once quiet), and SREMs it on some
// of the coupons the shop deletes (forgets on the others).
const legacyClaimedKey = "shop:coupon:1:users"

const legacyMapping = `schema: shop
redis: {template_stock: "shop:stock:{template}", claimed_users: "shop:coupon:{template}:users"}
user_coupon: {table: coupon, id: id, template: campaign_id, channel: source, status: state, order: order_no, user: member_id}
status: {AVAILABLE: [10], USED: [20], EXPIRED: [30], RETURNED: [40]}
redemption_evidence: table
redemption_log: {table: coupon_writeoff, id: id, coupon: coupon_id, order: order_no}
template: {table: campaign, id: id, total_quota: stock_total, name: title, remaining: stock_left,
           per_user_limit: limit_per_user, end_time: ends_at}
`

// errNoCoupon: the writer had no coupon in the state an operation needs.
var errNoCoupon = errors.New("no coupon to act on")

// legacyWriter is the legacy application: one goroutine of bare SQL.
type legacyWriter struct {
	db    *sql.DB // root on the shop schema
	rdb   *redis.Client
	rng   *rand.Rand
	tally *tally

	mu        sync.Mutex
	available []int64           // coupons state 10, no anomaly yet
	used      map[int64]string  // coupons state 20 with their write-off's order
	expected  map[string]string // "kind coupon <id>" -> what was done
	unknown   map[int64]bool    // coupons whose last write's outcome is unknown (its COMMIT failed)
	n         int
	members   int64 // the members who claimed so far: each claims once
}

// setUpLegacy creates the shop schema (deploy/legacy/writeoff-table's
// schema.sql) and writes the mapping file into dir.
func setUpLegacy(ctx context.Context, root *sql.DB, repo, dir string) (string, error) {
	schema, err := os.ReadFile(filepath.Join(repo, "deploy/legacy/writeoff-table/schema.sql"))
	if err != nil {
		return "", fmt.Errorf("read the legacy schema: %w", err)
	}
	stmts := []string{"CREATE DATABASE shop", "USE shop"}
	for _, s := range strings.Split(string(schema), ";") {
		lines := []string{}
		for _, l := range strings.Split(s, "\n") {
			if !strings.HasPrefix(strings.TrimSpace(l), "--") {
				lines = append(lines, l)
			}
		}
		if q := strings.TrimSpace(strings.Join(lines, "\n")); q != "" {
			stmts = append(stmts, q)
		}
	}
	stmts = append(stmts, fmt.Sprintf(`INSERT INTO shop.campaign (id, title, stock_total, stock_left, limit_per_user) VALUES (%d, 'chaos legacy', 1000000, 1000000, 1)`, legacyCampaign))
	conn, err := root.Conn(ctx)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	for _, q := range stmts {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return "", fmt.Errorf("legacy schema: %.60s: %w", q, err)
		}
	}
	path := filepath.Join(dir, "legacy-mapping.yaml")
	return path, os.WriteFile(path, []byte(legacyMapping), 0o644)
}

func (w *legacyWriter) expect(kind string, coupon int64, what string) {
	w.expected[fmt.Sprintf("%s coupon %d", kind, coupon)] = what
}

// run writes until ctx ends: legal claims, uses (with their write-off),
// expiries and voids, and now and then an anomaly on a coupon that is
// then left alone: a bare USED -> EXPIRED, a DELETE, a duplicate
// write-off, a use without write-off.
func (w *legacyWriter) run(ctx context.Context) {
	for ctx.Err() == nil {
		w.n++
		var kind string
		var err error
		switch p := w.rng.IntN(100); {
		case p < 40:
			kind, err = "legacy claim", w.claim(ctx)
		case p < 65:
			kind, err = "legacy use + write-off", w.use(ctx, true)
		case p < 72:
			kind, err = "legacy expire", w.move(ctx, 30, "")
		case p < 78:
			kind, err = "legacy void", w.move(ctx, 40, "")
		case p < 83:
			kind, err = "legacy bare USED -> EXPIRED (illegal)", w.illegal(ctx)
		case p < 88:
			kind, err = "legacy DELETE coupon", w.move(ctx, 0, "deleted_coupon")
		case p < 94:
			kind, err = "legacy duplicate write-off", w.duplicate(ctx)
		default:
			kind, err = "legacy use without write-off", w.use(ctx, false)
		}
		result := "ok"
		switch {
		case err == errNoCoupon:
			result = "no coupon to act on"
		case err != nil:
			result = "error"
		}
		w.tally.op(kind, result)
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(5+w.rng.IntN(20)) * time.Millisecond): // pacing
		}
	}
}

func (w *legacyWriter) claim(ctx context.Context) error {
	w.members++
	member := w.members                                 // a new member each claim: one coupon each, the limit
	_ = w.rdb.Decr(ctx, legacyStockKey).Err()           // the front end's own guard; Redis may be down
	_ = w.rdb.SAdd(ctx, legacyClaimedKey, member).Err() // "already claimed" from now on
	if w.rng.IntN(20) == 0 {
		return nil // the order failed after the DECR and the SADD: the key drifts one low, the member has no coupon
	}
	tx, err := w.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `INSERT INTO shop.coupon (campaign_id, member_id, source, state) VALUES (?, ?, ?, 10)`,
		legacyCampaign, member, 1+w.rng.IntN(3))
	if err != nil {
		return err
	}
	id, _ := res.LastInsertId()
	if _, err := tx.ExecContext(ctx, `UPDATE shop.campaign SET stock_left = stock_left - 1 WHERE id = ? AND stock_left > 0`, legacyCampaign); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err // unknown: the coupon, if committed, is never touched again
	}
	w.mu.Lock()
	w.available = append(w.available, id)
	w.mu.Unlock()
	return nil
}

// take removes and returns a random AVAILABLE coupon (0: none).
func (w *legacyWriter) take() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.available) == 0 {
		return 0
	}
	i := w.rng.IntN(len(w.available))
	id := w.available[i]
	w.available[i] = w.available[len(w.available)-1]
	w.available = w.available[:len(w.available)-1]
	return id
}

// use moves an AVAILABLE coupon to USED, with its write-off row in the
// same transaction, or without one (used_without_redemption).
func (w *legacyWriter) use(ctx context.Context, writeOff bool) error {
	id := w.take()
	if id == 0 {
		return errNoCoupon
	}
	order := fmt.Sprintf("L%d", w.n)
	err := w.tx(ctx, id, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `UPDATE shop.coupon SET state = 20, order_no = ? WHERE id = ?`, order, id); err != nil {
			return err
		}
		if !writeOff {
			return nil
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO shop.coupon_writeoff (coupon_id, order_no, store_id) VALUES (?, ?, 1)`, id, order)
		return err
	})
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if writeOff {
		w.used[id] = order
	} else {
		w.expect("used_without_redemption", id, "USED with order "+order+", no write-off")
	}
	return nil
}

// move moves an AVAILABLE coupon to state (legal: 30, 40), or deletes it
// (state 0; the shop gives the stock back), expecting anomaly ("" none).
func (w *legacyWriter) move(ctx context.Context, state int, anomaly string) error {
	id := w.take()
	if id == 0 {
		return errNoCoupon
	}
	var member int64
	err := w.tx(ctx, id, func(tx *sql.Tx) error {
		if state == 0 {
			if err := tx.QueryRowContext(ctx, `SELECT member_id FROM shop.coupon WHERE id = ?`, id).Scan(&member); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `DELETE FROM shop.coupon WHERE id = ?`, id); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, `UPDATE shop.campaign SET stock_left = stock_left + 1 WHERE id = ?`, legacyCampaign)
			return err
		}
		_, err := tx.ExecContext(ctx, `UPDATE shop.coupon SET state = ? WHERE id = ?`, state, id)
		return err
	})
	if err == nil && state == 0 {
		_ = w.rdb.Incr(ctx, legacyStockKey).Err()
		if w.rng.IntN(2) == 0 { // the member may claim again; the other half is forgotten
			_ = w.rdb.SRem(ctx, legacyClaimedKey, member).Err()
		}
	}
	if err == nil && anomaly != "" {
		w.mu.Lock()
		w.expect(anomaly, id, "DELETE of an AVAILABLE coupon")
		w.mu.Unlock()
	}
	return err
}

// usedCoupon removes and returns a USED coupon with its order (0: none).
func (w *legacyWriter) usedCoupon() (int64, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ids := make([]int64, 0, len(w.used))
	for id := range w.used {
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		return 0, ""
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	id := ids[w.rng.IntN(len(ids))]
	order := w.used[id]
	delete(w.used, id)
	return id, order
}

func (w *legacyWriter) illegal(ctx context.Context) error {
	id, _ := w.usedCoupon()
	if id == 0 {
		return errNoCoupon
	}
	err := w.tx(ctx, id, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE shop.coupon SET state = 30 WHERE id = ?`, id)
		return err
	})
	if err == nil {
		w.mu.Lock()
		w.expect("illegal_transition", id, "bare UPDATE USED(20) -> EXPIRED(30)")
		w.mu.Unlock()
	}
	return err
}

func (w *legacyWriter) duplicate(ctx context.Context) error {
	id, order := w.usedCoupon()
	if id == 0 {
		return errNoCoupon
	}
	err := w.tx(ctx, id, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO shop.coupon_writeoff (coupon_id, order_no, store_id) VALUES (?, ?, 2)`, id, order)
		return err
	})
	if err == nil {
		w.mu.Lock()
		w.expect("duplicate_redemption", id, "second write-off of order "+order)
		w.mu.Unlock()
	}
	return err
}

// tx runs fn in a transaction. A failed COMMIT leaves the outcome unknown:
// the coupon is then left alone (it is in no list), so no expectation
// depends on it.
func (w *legacyWriter) tx(ctx context.Context, id int64, fn func(*sql.Tx) error) error {
	tx, err := w.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		w.mu.Lock()
		w.unknown[id] = true
		w.mu.Unlock()
		return err
	}
	return nil
}
