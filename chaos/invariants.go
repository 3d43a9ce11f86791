package chaos

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/redis/go-redis/v9"

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

// truth counts user_coupon per pair and state, and release rows.
func truth(ctx context.Context, db *sql.DB) (map[string]counts, error) {
	out := map[string]counts{}
	rows, err := db.QueryContext(ctx, `SELECT template_id, channel, SUM(status = 1), SUM(status = 2), SUM(status = 3),
		SUM(status = 4) FROM user_coupon GROUP BY 1, 2`)
	if err != nil {
		return nil, fmt.Errorf("count user_coupon: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var t int64
		var ch string
		var c counts
		if err := rows.Scan(&t, &ch, &c.held, &c.used, &c.expired, &c.returned); err != nil {
			return nil, err
		}
		out[pairKey(t, ch)] = c
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rel, err := db.QueryContext(ctx, `SELECT template_id, channel, COUNT(*) FROM inventory_flow WHERE kind = 'release' GROUP BY 1, 2`)
	if err != nil {
		return nil, fmt.Errorf("count releases: %w", err)
	}
	defer rel.Close()
	for rel.Next() {
		var t, n int64
		var ch string
		if err := rel.Scan(&t, &ch, &n); err != nil {
			return nil, err
		}
		c := out[pairKey(t, ch)]
		c.released = n
		out[pairKey(t, ch)] = c
	}
	return out, rel.Err()
}

func checkCounters(ctx context.Context, db *sql.DB) ([]string, error) {
	want, err := truth(ctx, db)
	if err != nil {
		return nil, err
	}
	got := map[string]counts{}
	rows, err := db.QueryContext(ctx, `SELECT template_id, channel, held, used, expired, returned, released FROM inventory_counter`)
	if err != nil {
		return nil, fmt.Errorf("read inventory_counter: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var t int64
		var ch string
		var c counts
		if err := rows.Scan(&t, &ch, &c.held, &c.used, &c.expired, &c.returned, &c.released); err != nil {
			return nil, err
		}
		if c != (counts{}) {
			got[pairKey(t, ch)] = c
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return diffMaps("truth", "counter", want, got), nil
}

type bucket struct {
	template       int64
	channel        string
	quota, claimed int64
}

func buckets(ctx context.Context, db *sql.DB) ([]bucket, error) {
	rows, err := db.QueryContext(ctx, `SELECT template_id, channel, quota, claimed FROM channel_quota ORDER BY 1, 2`)
	if err != nil {
		return nil, fmt.Errorf("read channel_quota: %w", err)
	}
	defer rows.Close()
	var out []bucket
	for rows.Next() {
		var b bucket
		if err := rows.Scan(&b.template, &b.channel, &b.quota, &b.claimed); err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, rows.Err()
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
	var bad []string
	err := scanAll(ctx, db, `SELECT t.id, t.total_quota, COALESCE(SUM(q.quota), 0) FROM coupon_template t
		LEFT JOIN channel_quota q ON q.template_id = t.id GROUP BY t.id, t.total_quota HAVING t.total_quota <> COALESCE(SUM(q.quota), 0)`,
		func(r *sql.Rows) error {
			var id, total, sum int64
			err := r.Scan(&id, &total, &sum)
			bad = append(bad, fmt.Sprintf("template %d: total_quota %d, channel quotas add up to %d", id, total, sum))
			return err
		})
	return bad, err
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
	rows, err := db.QueryContext(ctx, `SELECT c.id, c.status, (SELECT COUNT(*) FROM redemption_log r WHERE r.user_coupon_id = c.id
		AND NOT EXISTS (SELECT 1 FROM inventory_flow f WHERE f.user_coupon_id = r.user_coupon_id AND f.kind = 'refund' AND f.seq = r.id)) AS n
		FROM user_coupon c HAVING (status = 2 AND n <> 1) OR (status <> 2 AND n <> 0) ORDER BY c.id LIMIT 100`)
	if err != nil {
		return nil, fmt.Errorf("read redemptions in effect: %w", err)
	}
	defer rows.Close()
	var bad []string
	for rows.Next() {
		var id, status, n int64
		if err := rows.Scan(&id, &status, &n); err != nil {
			return nil, err
		}
		bad = append(bad, fmt.Sprintf("user_coupon %d: status %d, %d redemptions in effect", id, status, n))
	}
	return bad, rows.Err()
}

func checkAnomalies(ctx context.Context, db *sql.DB) ([]string, error) {
	rows, err := db.QueryContext(ctx, `SELECT id, kind, COALESCE(user_coupon_id, 0), detail FROM cdc_anomaly ORDER BY id LIMIT 50`)
	if err != nil {
		return nil, fmt.Errorf("read cdc_anomaly: %w", err)
	}
	defer rows.Close()
	var bad []string
	for rows.Next() {
		var id, coupon int64
		var kind, detail string
		if err := rows.Scan(&id, &kind, &coupon, &detail); err != nil {
			return nil, err
		}
		bad = append(bad, fmt.Sprintf("cdc_anomaly %d: %s, user_coupon %d: %s", id, kind, coupon, detail))
	}
	return bad, rows.Err()
}

func checkCorrections(ctx context.Context, db *sql.DB) ([]string, error) {
	rows, err := db.QueryContext(ctx, `SELECT COALESCE(task_id, 0), store, target, COALESCE(old_value, -1), COALESCE(new_value, -1), reason
		FROM correction_log WHERE store <> 'redis' ORDER BY id LIMIT 50`)
	if err != nil {
		return nil, fmt.Errorf("read correction_log: %w", err)
	}
	defer rows.Close()
	var bad []string
	for rows.Next() {
		var task, old, nw int64
		var store, target, reason string
		if err := rows.Scan(&task, &store, &target, &old, &nw, &reason); err != nil {
			return nil, err
		}
		bad = append(bad, fmt.Sprintf("task %d corrected %s %s: %d -> %d (%s)", task, store, target, old, nw, reason))
	}
	if err := rows.Err(); err != nil {
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
