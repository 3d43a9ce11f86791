package sink

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/inventory"
)

// The per_user_limit_exceeded check (template.per_user_limit and
// user_coupon.user mapped): cdc_user_claim counts each user's coupons of
// each template as the binlog shows them, in binlog order, never by a
// query on the live table (its rows may not be visible yet, and it is
// ahead of the binlog point being judged). A coupon entering a user's
// set (inserted, decodable again, or moved to the user or the template)
// counts +1, one leaving it (deleted, undecodable, moved away) −1. A
// coupon that enters while the user already holds the template's limit
// in force at that point or more is one anomaly. The counts are written
// in the batch's transaction with the checkpoint (a replay neither loses
// nor repeats an anomaly) and seeded by a bootstrap from its snapshot.
//
// Only the leading cdc of a checkpoint writes its counts, so the check
// keeps those it read or wrote since its start (known, up to
// maxKnownKeys keys; all forgotten when full, and at every start): a
// batch reads from the table only the keys it does not know, instead of
// every key it touches. A retried transaction first puts back the known
// counts the failed run changed (mark); a transaction that fails for good
// stops the sink, and the next start forgets them all.

// claimKey is one user's coupons of one template; cdc_user_claim's key
// columns are cdc_order_key's (orderKeyCols).
type claimKey struct {
	template int64
	user     string
}

func (k claimKey) parts() (int64, string) { return k.template, k.user }

// userLimits is the per_user_limit_exceeded check.
type userLimits struct {
	noCheck
	s *Sink
	// known are counts as the table holds them at the last committed
	// batch (0: no row), for the keys read or written since the start
	known keyMemory[claimKey, int64]
}

func newUserLimits(s *Sink) *userLimits { return &userLimits{s: s} }

// on says whether per-user limits are judged.
func (c *userLimits) on() bool { return c.s.checksUserLimits() }

func (c *userLimits) seed(ctx context.Context, sd *seeding) ([]Anomaly, error) {
	c.known.forget() // the bootstrap rewrites the table
	return c.s.seedUserClaims(ctx, sd.stx, sd.tx, sd.infos)
}

// resume forgets the known counts (the table is the truth at a start) and
// warns, at a start from a checkpoint, of counts never seeded.
func (c *userLimits) resume(ctx context.Context, bootstrapped bool) error {
	c.known.forget()
	if bootstrapped {
		return nil
	}
	return c.s.warnUnseededClaims(ctx)
}

func (c *userLimits) write(ctx context.Context, b *batch) ([]Anomaly, error) {
	return c.countClaims(ctx, b.tx, b)
}

// mark: each run of a batch's transaction starts from the known counts
// as they were before it.
func (c *userLimits) mark() func() { return c.known.mark() }

// checksUserLimits says whether per-user limits are judged.
func (s *Sink) checksUserLimits() bool {
	m := s.cfg.Mapping
	return !m.Reference() && m.Template.PerUserLimit != "" && m.UserCoupon.User != ""
}

// warnUnseededClaims says, at a start from a checkpoint, when per-user
// limits are judged but no coupon per user is counted while the counters
// hold coupons: a checkpoint made before the mapping named the limit (or
// before migration 0007). Counting from an arbitrary point would not be
// exact; a rebuild counts them all at its snapshot.
func (s *Sink) warnUnseededClaims(ctx context.Context) error {
	if !s.checksUserLimits() || len(s.counts) == 0 {
		return nil
	}
	var one int
	err := s.db.QueryRowContext(ctx, `SELECT 1 FROM cdc_user_claim WHERE name = ? LIMIT 1`, s.cfg.Name).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		s.log.Warn("per-user limits are judged but no coupon per user is counted yet (a checkpoint from before template.per_user_limit was mapped?): "+
			"users are counted from here on; run couponlink cdc -rebuild once to count the coupons they already hold", "checkpoint", s.cfg.Name)
		return nil
	}
	if err != nil {
		return fmt.Errorf("read coupons per user: %w", err)
	}
	return nil
}

// claimMoves are the keys a transition leaves and enters; ok false for a
// side it has not (no state, or no user).
func claimMoves(t *canal.Transition) (from claimKey, leaves bool, to claimKey, enters bool) {
	from, to = claimKey{t.PrevTemplate, cut(t.PrevUser)}, claimKey{t.Template, cut(t.User)}
	leaves, enters = t.From != coupon.None && from.user != "", t.To != coupon.None && to.user != ""
	if leaves && enters && from == to {
		return from, false, to, false // a change of state inside the user's set
	}
	return from, leaves, to, enters
}

// countClaims counts the batch's coupons into cdc_user_claim, in tx, in
// binlog order, and returns a per_user_limit_exceeded anomaly per coupon
// that entered a user's set at or over the limit in force at that point.
func (c *userLimits) countClaims(ctx context.Context, tx *sql.Tx, b *batch) ([]Anomaly, error) {
	s := c.s
	c.known.bound()
	counts, ask := map[claimKey]int64{}, map[claimKey]bool{}
	need := func(k claimKey) {
		if n, ok := c.known.get(k); ok {
			counts[k] = n
		} else {
			ask[k] = true
		}
	}
	for i := range b.Transitions {
		from, leaves, to, enters := claimMoves(&b.Transitions[i])
		if leaves {
			need(from)
		}
		if enters {
			need(to)
		}
	}
	if len(counts) == 0 && len(ask) == 0 {
		return nil, nil
	}
	read, err := s.claimCounts(ctx, tx, ask)
	if err != nil {
		return nil, err
	}
	stored := make(map[claimKey]bool, len(counts)+len(read))
	for k, n := range counts {
		stored[k] = n > 0
	}
	for k, n := range read {
		counts[k], stored[k] = n, true
	}
	var out []Anomaly
	cur := s.tplCursor(b)
	for i := range b.Transitions {
		t := &b.Transitions[i]
		from, leaves, to, enters := claimMoves(t)
		if leaves {
			counts[from] = max(counts[from]-1, 0)
		}
		if !enters {
			continue
		}
		if limit := cur.at(i, to.template).PerUserLimit; limit > 0 && counts[to] >= limit {
			a := anomalyAt(t)
			a.Kind = inventory.AnomalyPerUserLimitExceeded
			a.Detail = fmt.Sprintf("user %q received coupon %d of template %d holding %d already; the per-user limit is %d",
				to.user, t.Coupon, to.template, counts[to], limit)
			out = append(out, a)
		}
		counts[to]++
	}
	if err := s.writeClaims(ctx, tx, counts, stored); err != nil {
		return nil, err
	}
	for k, n := range counts { // every key the batch touched: the table holds it now
		c.known.set(k, n)
	}
	return out, nil
}

// writeClaims writes the keys' counts, in tx: a row for each above 0, none
// for each at 0 (deleting those that were stored).
func (s *Sink) writeClaims(ctx context.Context, tx *sql.Tx, counts map[claimKey]int64, stored map[claimKey]bool) error {
	ins := &rowInserter{tx: tx, what: "count coupons per user", cols: 4,
		head: "INSERT INTO cdc_user_claim (name, template_id, user_id, coupons) VALUES ", tail: " ON DUPLICATE KEY UPDATE coupons = VALUES(coupons)"}
	var del []claimKey
	for k, n := range counts {
		switch {
		case n > 0:
			if err := ins.add(ctx, s.cfg.Name, k.template, k.user, n); err != nil {
				return err
			}
		case stored[k]:
			del = append(del, k)
		}
	}
	if err := ins.flush(ctx); err != nil {
		return err
	}
	return deleteKeys(ctx, tx, s.cfg.Name, "cdc_user_claim", orderKeyCols, del)
}

// claimCounts reads the stored counts of keys, locked.
func (s *Sink) claimCounts(ctx context.Context, tx *sql.Tx, keys map[claimKey]bool) (map[claimKey]int64, error) {
	list := make([]claimKey, 0, len(keys))
	for k := range keys {
		list = append(list, k)
	}
	out := make(map[claimKey]int64, len(list))
	for start := 0; start < len(list); start += 500 {
		where, args := keysWhere(orderKeyCols, list[start:min(start+500, len(list))])
		err := addCounts(ctx, tx, "read coupons per user", `SELECT template_id, user_id, coupons FROM cdc_user_claim WHERE name = ? AND `+where+` FOR UPDATE`,
			append([]any{s.cfg.Name}, args...), func(tpl int64, user string) claimKey { return claimKey{tpl, user} }, out)
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// seedUserClaims is a bootstrap's part: it rewrites the checkpoint's
// counts in tx from the coupons of the snapshot stx, and returns a
// per_user_limit_exceeded anomaly per coupon of a (template, user) beyond
// the template's limit at the snapshot (infos) that the counts did not
// hold yet: on a first start, every excess already in the table; on a
// rebuild, the excess of the binlog it skipped.
func (s *Sink) seedUserClaims(ctx context.Context, stx, tx *sql.Tx, infos map[int64]inventory.TemplateInfo) ([]Anomaly, error) {
	over := map[claimKey]int64{}
	err := s.src.UserClaims(ctx, stx, func(tpl int64, user string, n int64) error {
		if l := infos[tpl].PerUserLimit; l > 0 && n > l {
			over[claimKey{tpl, user}] = n
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	old, err := s.claimCounts(ctx, tx, keysOf(over))
	if err != nil {
		return nil, err
	}
	var out []Anomaly
	for k, n := range over {
		limit := infos[k.template].PerUserLimit
		ids, err := s.src.UserCoupons(ctx, stx, k.template, k.user)
		if err != nil {
			return nil, err
		}
		for i := max(old[k], limit); i < n; i++ {
			a := Anomaly{Kind: inventory.AnomalyPerUserLimitExceeded, Template: k.template,
				Detail: fmt.Sprintf("found at the snapshot of a bootstrap: user %q holds %d coupons of template %d; the per-user limit is %d",
					k.user, n, k.template, limit)}
			if i < int64(len(ids)) { // the coupons beyond the limit, in id order
				a.Coupon = ids[i]
				a.Detail += fmt.Sprintf("; coupon %d is number %d", ids[i], i+1)
			}
			out = append(out, a)
		}
	}
	if _, err := tx.ExecContext(ctx, "DELETE FROM cdc_user_claim WHERE name = ?", s.cfg.Name); err != nil {
		return nil, fmt.Errorf("clear coupons per user: %w", err)
	}
	ins := &rowInserter{tx: tx, what: "write coupons per user", cols: 4, head: "INSERT INTO cdc_user_claim (name, template_id, user_id, coupons) VALUES "}
	err = s.src.UserClaims(ctx, stx, func(tpl int64, user string, n int64) error {
		return ins.add(ctx, s.cfg.Name, tpl, user, n)
	})
	if err != nil {
		return nil, err
	}
	return out, ins.flush(ctx)
}

func keysOf[V any](m map[claimKey]V) map[claimKey]bool {
	out := make(map[claimKey]bool, len(m))
	for k := range m {
		out[k] = true
	}
	return out
}
