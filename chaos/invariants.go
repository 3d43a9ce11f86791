package chaos

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/couponlink/couponlink/internal/sqltx"
	"github.com/couponlink/couponlink/inventory"
)

// The invariants checked at quiescence (docs/design.md's, and the run's own).
const (
	invCaughtUp     = "cdc caught up to the binlog end"
	invCounters     = "counters equal the truth"
	invConservation = "conservation and no over-issue (claimed = held+used+frozen <= quota)"
	invQuotaSum     = "quota conserved across transfers (channel quotas add up to the template's)"
	invRedis        = "Redis equals claimable"
	invRedemption   = "every USED coupon has exactly one redemption in effect (others none)"
	invIdempotency  = "each idempotency key used once (replays answer the same)"
	invAcked        = "every acknowledged API call is in the ledger"
	invWebhooks     = "every webhook event delivered at least once, with a stable id and a valid signature"
	invAnomalies    = "no anomaly invented (API-only writes are legal)"
	invReconcile    = "couponlink reconcile -once -no-fix finds nothing"
	invCorrections  = "the reconciler never corrected the cdc's counters (Redis fixes allowed)"
	invCheckpoint   = "checkpoint: counters equal the truth at a snapshot (reconcile -once -no-fix -redis '')"
)

type counts struct{ held, used, expired, returned, released int64 }

func pairKey(t int64, ch string) string { return fmt.Sprintf("template %d channel %q", t, ch) }

// scanPair scans a row of a template id, a channel and then the columns
// into rest, and returns the pair's key.
func scanPair(r *sql.Rows, rest ...any) (string, error) {
	var t int64
	var ch string
	err := r.Scan(append([]any{&t, &ch}, rest...)...)
	return pairKey(t, ch), err
}

// truth counts user_coupon per pair and state, and release rows.
func truth(ctx context.Context, db *sql.DB) (map[string]counts, error) {
	out := map[string]counts{}
	err := sqltx.EachRow(ctx, db, `SELECT template_id, channel, SUM(status = 1), SUM(status = 2), SUM(status = 3),
		SUM(status = 4) FROM user_coupon GROUP BY 1, 2`, nil, func(r *sql.Rows) error {
		var c counts
		key, err := scanPair(r, &c.held, &c.used, &c.expired, &c.returned)
		out[key] = c
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("count user_coupon: %w", err)
	}
	err = sqltx.EachRow(ctx, db, `SELECT template_id, channel, COUNT(*) FROM inventory_flow WHERE kind = 'release' GROUP BY 1, 2`, nil,
		func(r *sql.Rows) error {
			var n int64
			key, err := scanPair(r, &n)
			c := out[key]
			c.released = n
			out[key] = c
			return err
		})
	if err != nil {
		return nil, fmt.Errorf("count releases: %w", err)
	}
	return out, nil
}

func checkCounters(ctx context.Context, db *sql.DB) ([]string, error) {
	want, err := truth(ctx, db)
	if err != nil {
		return nil, err
	}
	got := map[string]counts{}
	err = sqltx.EachRow(ctx, db, `SELECT template_id, channel, held, used, expired, returned, released FROM inventory_counter`, nil,
		func(r *sql.Rows) error {
			var c counts
			key, err := scanPair(r, &c.held, &c.used, &c.expired, &c.returned, &c.released)
			if c != (counts{}) {
				got[key] = c
			}
			return err
		})
	if err != nil {
		return nil, fmt.Errorf("read inventory_counter: %w", err)
	}
	return diffMaps("truth", "counter", want, got), nil
}

type bucket struct {
	template       int64
	channel        string
	quota, claimed int64
}

func buckets(ctx context.Context, db *sql.DB) ([]bucket, error) {
	var out []bucket
	err := sqltx.EachRow(ctx, db, `SELECT template_id, channel, quota, claimed FROM channel_quota ORDER BY 1, 2`, nil, func(r *sql.Rows) error {
		var b bucket
		err := r.Scan(&b.template, &b.channel, &b.quota, &b.claimed)
		out = append(out, b)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read channel_quota: %w", err)
	}
	return out, nil
}

func checkConservation(ctx context.Context, db *sql.DB) ([]string, error) {
	tr, err := truth(ctx, db)
	if err != nil {
		return nil, err
	}
	bs, err := buckets(ctx, db)
	if err != nil {
		return nil, err
	}
	var bad []string
	for _, b := range bs {
		c := tr[pairKey(b.template, b.channel)]
		frozen := c.expired + c.returned - c.released
		if b.claimed != c.held+c.used+frozen || b.claimed > b.quota || frozen < 0 || b.claimed < 0 {
			bad = append(bad, fmt.Sprintf("%s: quota %d, claimed %d, held %d, used %d, expired %d, returned %d, released %d (frozen %d)",
				pairKey(b.template, b.channel), b.quota, b.claimed, c.held, c.used, c.expired, c.returned, c.released, frozen))
		}
	}
	return bad, nil
}

func checkQuotaSum(ctx context.Context, db *sql.DB) ([]string, error) {
	return violations(ctx, db, "channel quota sums", `SELECT t.id, t.total_quota, COALESCE(SUM(q.quota), 0) FROM coupon_template t
		LEFT JOIN channel_quota q ON q.template_id = t.id GROUP BY t.id, t.total_quota HAVING t.total_quota <> COALESCE(SUM(q.quota), 0)`,
		func(r *sql.Rows) (string, error) {
			var id, total, sum int64
			err := r.Scan(&id, &total, &sum)
			return fmt.Sprintf("template %d: total_quota %d, channel quotas add up to %d", id, total, sum), err
		})
}

func checkRedis(ctx context.Context, db *sql.DB, rdb *redis.Client, prefix string) ([]string, error) {
	bs, err := buckets(ctx, db)
	if err != nil {
		return nil, err
	}
	keys := inventory.Keys{Prefix: prefix}
	want := map[string]int64{}
	for _, b := range bs {
		want[keys.Stock(b.template, b.channel)] = b.quota - b.claimed
		want[keys.TemplateStock(b.template)] += b.quota - b.claimed
	}
	got := map[string]int64{}
	for k := range want {
		v, err := rdb.Get(ctx, k).Int64()
		if err == redis.Nil {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("GET %s: %w", k, err)
		}
		got[k] = v
	}
	return diffMaps("claimable", "redis", want, got), nil
}

func checkRedemptions(ctx context.Context, db *sql.DB) ([]string, error) {
	return violations(ctx, db, "redemptions in effect", `SELECT c.id, c.status, (SELECT COUNT(*) FROM redemption_log r WHERE r.user_coupon_id = c.id
		AND NOT EXISTS (SELECT 1 FROM inventory_flow f WHERE f.user_coupon_id = r.user_coupon_id AND f.kind = 'refund' AND f.seq = r.id)) AS n
		FROM user_coupon c HAVING (status = 2 AND n <> 1) OR (status <> 2 AND n <> 0) ORDER BY c.id LIMIT 100`,
		func(r *sql.Rows) (string, error) {
			var id, status, n int64
			err := r.Scan(&id, &status, &n)
			return fmt.Sprintf("user_coupon %d: status %d, %d redemptions in effect", id, status, n), err
		})
}

func checkAnomalies(ctx context.Context, db *sql.DB) ([]string, error) {
	return violations(ctx, db, "cdc_anomaly", `SELECT id, kind, COALESCE(user_coupon_id, 0), detail FROM cdc_anomaly ORDER BY id LIMIT 50`,
		func(r *sql.Rows) (string, error) {
			var id, coupon int64
			var kind, detail string
			err := r.Scan(&id, &kind, &coupon, &detail)
			return fmt.Sprintf("cdc_anomaly %d: %s, user_coupon %d: %s", id, kind, coupon, detail), err
		})
}

func checkCorrections(ctx context.Context, db *sql.DB) ([]string, error) {
	bad, err := violations(ctx, db, "correction_log", `SELECT COALESCE(task_id, 0), store, target, COALESCE(old_value, -1), COALESCE(new_value, -1), reason
		FROM correction_log WHERE store <> 'redis' ORDER BY id LIMIT 50`,
		func(r *sql.Rows) (string, error) {
			var task, old, nw int64
			var store, target, reason string
			err := r.Scan(&task, &store, &target, &old, &nw, &reason)
			return fmt.Sprintf("task %d corrected %s %s: %d -> %d (%s)", task, store, target, old, nw, reason), err
		})
	if err != nil {
		return nil, err
	}
	var review int64
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM reconcile_task WHERE status = 'needs_review'`).Scan(&review); err != nil {
		return nil, err
	}
	if review > 0 {
		bad = append(bad, fmt.Sprintf("%d reconcile tasks need review", review))
	}
	return bad, nil
}

// violations runs a check's query, whose every row is a violation, and
// returns line's wording of each row; what names the rows in an error.
func violations(ctx context.Context, db *sql.DB, what, query string, line func(*sql.Rows) (string, error)) ([]string, error) {
	bad, err := sqltx.List(ctx, db, query, nil, line)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	return bad, nil
}
