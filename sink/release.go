package sink

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/internal/sqltx"
	"github.com/couponlink/couponlink/inventory"
)

// A release hands a coupon's slot back to its channel bucket
// (channel_quota.claimed − 1) with an inventory_flow row of kind release.
// The row's unique key (coupon, release, 0) makes it happen once per
// coupon, whoever tries twice: a replayed batch, a second sweep.
//
//   - void (AVAILABLE→RETURNED) and refund-recycle (USED→RETURNED): at once,
//     in the transaction of the batch that saw it, with the checkpoint;
//   - expiry under the template's "release" policy: once its cooldown after
//     expires_at has passed. The batch that sees the expiry schedules it
//     (a release_due row, with the checkpoint); releaseDue, on the cdc's
//     timer, reads the due rows, releases and deletes them;
//   - refund-restore and expiry under "freeze": never.
type release struct {
	Coupon int64
	Pair   inventory.Pair
	Status coupon.Status // RETURNED or EXPIRED: a release does not change it
	Cause  string        // void, recycle or expiry
	Reason string
}

// Causes of a release.
const (
	releaseVoid    = "void"
	releaseRecycle = "recycle"
	releaseExpiry  = "expiry"
	// returned before a bootstrap: a void or a recycle the cdc did not see
	releaseReturned = "returned"
)

// releasesOf lists the batch's coupons that went to RETURNED.
func releasesOf(b *canal.Batch) []release {
	var out []release
	for i := range b.Transitions {
		t := &b.Transitions[i]
		if t.To != coupon.Returned || (t.From != coupon.Available && t.From != coupon.Used) {
			continue
		}
		r := release{Coupon: t.Coupon, Pair: inventory.Pair{Template: t.Template, Channel: t.Channel}, Status: coupon.Returned,
			Cause: releaseVoid, Reason: "void: the slot goes back to the pool"}
		if t.From == coupon.Used {
			r.Cause, r.Reason = releaseRecycle, "refund (recycle): the slot goes back to the pool"
		}
		out = append(out, r)
	}
	return out
}

// applyReleases writes the release rows not written yet and gives their
// slots back, in tx. It returns the releases it applied.
func applyReleases(ctx context.Context, tx *sql.Tx, rs []release, now time.Time) ([]release, error) {
	if len(rs) == 0 {
		return nil, nil
	}
	ids := make([]int64, len(rs))
	for i, r := range rs {
		ids[i] = r.Coupon
	}
	done := map[int64]bool{}
	rows, err := tx.QueryContext(ctx, `SELECT user_coupon_id FROM inventory_flow WHERE kind = ? AND seq = 0
		AND user_coupon_id IN (`+sqltx.Placeholders(len(ids))+`) FOR UPDATE`, append([]any{coupon.FlowRelease}, sqltx.Int64Args(ids)...)...)
	if err != nil {
		return nil, fmt.Errorf("look for earlier releases: %w", err)
	}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, err
		}
		done[id] = true
	}
	rows.Close()
	var b strings.Builder
	var args []any
	perPair := map[inventory.Pair]int64{}
	var applied []release
	for _, r := range rs {
		if done[r.Coupon] {
			continue
		}
		done[r.Coupon] = true
		if len(applied) > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(?, ?, 0, ?, ?, ?, ?, ?, 'cdc', ?)")
		args = append(args, r.Coupon, coupon.FlowRelease, r.Pair.Template, r.Pair.Channel, r.Status, r.Status, r.Reason, now)
		perPair[r.Pair]++
		applied = append(applied, r)
	}
	if len(applied) == 0 {
		return nil, nil
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO inventory_flow (user_coupon_id, kind, seq, template_id, channel, from_status,
		to_status, reason, operator, created_at) VALUES `+b.String(), args...); err != nil {
		return nil, fmt.Errorf("write release rows: %w", err)
	}
	pairs := make([]inventory.Pair, 0, len(perPair))
	for p := range perPair {
		pairs = append(pairs, p)
	}
	sortPairs(pairs)
	for _, p := range pairs {
		// never below 0: a bucket a legacy writer already emptied stays at 0
		if _, err := tx.ExecContext(ctx, `UPDATE channel_quota SET claimed = GREATEST(claimed - ?, 0)
			WHERE template_id = ? AND channel = ?`, perPair[p], p.Template, p.Channel); err != nil {
			return nil, fmt.Errorf("give slots back to %d/%s: %w", p.Template, p.Channel, err)
		}
	}
	return applied, nil
}

// releaser is the releases' step of the pipeline; policy is each
// template's expiry policy as read once (true: release).
type releaser struct {
	s      *Sink
	policy map[int64]bool
}

// apply gives back, in b's transaction, the slots of the batch's voids and
// recycles, and schedules its expiries under the release policy.
func (r *releaser) apply(ctx context.Context, b *batch) error {
	if !r.s.cfg.Releases {
		return nil
	}
	// the schedule first: it reads (and so locks) coupons, which an API
	// claim locks before its bucket; the buckets (channel_quota) last, as
	// the claims do, so that the two never wait on each other in a circle
	if err := r.scheduleExpiries(ctx, b.tx, b.Batch); err != nil {
		return err
	}
	var err error
	b.released, err = applyReleases(ctx, b.tx, releasesOf(b.Batch), r.s.cfg.Now().UTC())
	return err
}

// scheduleExpiries writes the release_due rows of the batch's coupons that
// became EXPIRED under the release policy, in the batch's transaction.
// Expiries of "freeze" templates (the default, and most of them) cost
// nothing: a template's policy is read once and kept (it is set when the
// template is created).
func (r *releaser) scheduleExpiries(ctx context.Context, tx *sql.Tx, b *canal.Batch) error {
	var ids []int64
	var unknown []int64
	for i := range b.Transitions {
		t := &b.Transitions[i]
		if t.To != coupon.Expired || t.From == coupon.Expired {
			continue
		}
		release, known := r.policy[t.Template]
		if !known && !slices.Contains(unknown, t.Template) {
			unknown = append(unknown, t.Template)
		}
		if release || !known {
			ids = append(ids, t.Coupon)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	if len(unknown) > 0 {
		if err := r.learnPolicies(ctx, tx, unknown); err != nil {
			return err
		}
	}
	for start := 0; start < len(ids); start += 1000 {
		chunk := ids[start:min(start+1000, len(ids))]
		if _, err := tx.ExecContext(ctx, scheduleByIDSQL+` AND c.id IN (`+sqltx.Placeholders(len(chunk))+`)`, sqltx.Int64Args(chunk)...); err != nil {
			return fmt.Errorf("schedule expiry releases: %w", err)
		}
	}
	return nil
}

// learnPolicies reads whether the templates expire under the release policy.
func (r *releaser) learnPolicies(ctx context.Context, tx *sql.Tx, templates []int64) error {
	rows, err := tx.QueryContext(ctx, `SELECT id, expiry_policy = ? FROM coupon_template WHERE id IN (`+sqltx.Placeholders(len(templates))+`)`,
		append([]any{coupon.PolicyRelease}, sqltx.Int64Args(templates)...)...)
	if err != nil {
		return fmt.Errorf("read the templates' expiry policies: %w", err)
	}
	defer rows.Close()
	for _, t := range templates {
		r.policy[t] = false // a template that does not exist releases nothing
	}
	for rows.Next() {
		var id int64
		var release bool
		if err := rows.Scan(&id, &release); err != nil {
			return err
		}
		r.policy[id] = release
	}
	return rows.Err()
}

// scheduleAll is a bootstrap's part: the bootstrap did not see the
// transitions before its snapshot, so it schedules every coupon whose
// release is owed and not written — expired under the release policy (due
// after the cooldown) and RETURNED by a void or a recycle (due at once).
func scheduleAll(ctx context.Context, tx *sql.Tx, now time.Time) error {
	const unreleased = ` AND NOT EXISTS (SELECT 1 FROM inventory_flow f
		WHERE f.user_coupon_id = c.id AND f.kind = 'release' AND f.seq = 0)`
	if _, err := tx.ExecContext(ctx, scheduleSQL+unreleased); err != nil {
		return fmt.Errorf("schedule expiry releases: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT IGNORE INTO release_due (user_coupon_id, template_id, channel, due_at)
		SELECT c.id, c.template_id, c.channel, ? FROM user_coupon c WHERE c.status = ?`+unreleased, now, coupon.Returned); err != nil {
		return fmt.Errorf("schedule the releases of returned coupons: %w", err)
	}
	return nil
}

const scheduleSQL = `INSERT IGNORE INTO release_due (user_coupon_id, template_id, channel, due_at)
	SELECT c.id, c.template_id, c.channel, c.expires_at + INTERVAL t.release_cooldown_seconds SECOND
	FROM user_coupon c JOIN coupon_template t ON t.id = c.template_id
	WHERE c.status = 3 AND t.expiry_policy = 'release'`

// scheduleByIDSQL is scheduleSQL for the coupons of a list (AND c.id IN),
// read by primary key: an INSERT ... SELECT locks the rows it reads, and
// the (template, channel, status) index the server may pick instead locks
// ranges of it, the gaps too, where the API inserts and updates coupons
// it then holds while it waits for their bucket.
var scheduleByIDSQL = strings.Replace(scheduleSQL, "FROM user_coupon c ", "FROM user_coupon c FORCE INDEX (PRIMARY) ", 1)

// releaseDue releases, in one transaction fenced by the epoch, up to limit
// scheduled releases that are due, and deletes their schedule rows. A
// coupon no longer EXPIRED or RETURNED (a legacy writer changed it) loses
// its row and releases nothing.
func (s *Sink) releaseDue(ctx context.Context, limit int) ([]release, error) {
	now := s.cfg.Now().UTC()
	var applied []release
	err := s.retries.Run(ctx, s.db, "release", func(tx *sql.Tx) error {
		applied = nil
		if err := s.fence(ctx, tx); err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, `SELECT d.user_coupon_id, d.template_id, d.channel, c.status FROM release_due d
			LEFT JOIN user_coupon c ON c.id = d.user_coupon_id
			WHERE d.due_at <= ? ORDER BY d.due_at LIMIT ? FOR UPDATE`, now, limit)
		if err != nil {
			return fmt.Errorf("find due releases: %w", err)
		}
		var rs []release
		var due []int64
		for rows.Next() {
			var r release
			var status sql.NullInt64
			if err := rows.Scan(&r.Coupon, &r.Pair.Template, &r.Pair.Channel, &status); err != nil {
				rows.Close()
				return err
			}
			due = append(due, r.Coupon)
			switch r.Status = coupon.Status(status.Int64); r.Status {
			case coupon.Expired:
				r.Cause, r.Reason = releaseExpiry, "expired under the release policy; cooldown over"
				rs = append(rs, r)
			case coupon.Returned:
				r.Cause, r.Reason = releaseReturned, "returned (void or recycle) before the cdc's bootstrap; the slot goes back to the pool"
				rs = append(rs, r)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil || len(due) == 0 {
			return err
		}
		if applied, err = applyReleases(ctx, tx, rs, now); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM release_due WHERE user_coupon_id IN (`+sqltx.Placeholders(len(due))+`)`, sqltx.Int64Args(due)...); err != nil {
			return fmt.Errorf("delete done schedule rows: %w", err)
		}
		return s.enqueue(ctx, tx, releasedEvents(applied, now))
	})
	if err != nil {
		return nil, err
	}
	return applied, nil
}

// releasePass is the release chore's pass: it gives back, in one
// transaction, up to 500 slots whose release is due, and writes their
// buckets' Redis keys at once.
func (s *Sink) releasePass(ctx context.Context, log *slog.Logger) error {
	applied, err := s.releaseDue(ctx, 500)
	if err != nil {
		return fmt.Errorf("release expired slots: %w", err)
	}
	if n := len(applied); n > 0 {
		s.m.releases.Add(float64(n))
		log.Info("released the slots of expired coupons (release policy, cooldown over)", "coupons", n)
		s.freshenReleased(ctx, applied)
	}
	return nil
}
