package chaos

import (
	"context"
	"database/sql"
	"fmt"
	"os/exec"
	"sort"
	"time"

	"github.com/couponlink/couponlink/internal/sqltx"
)

const (
	invLegacyAnomalies = "legacy: every anomaly the writer caused reported once, none invented"
	invLegacyReconcile = "legacy: reconcile -once -no-fix -mapping finds nothing"
	invLegacyRedis     = "legacy: the front end's DECRed key corrected to budget - taken (reconcile -once -mapping)"
	invLegacyClaimed   = "legacy: after one corrector pass the front end's claimed set is the members holding a coupon (none without one, none missing)"
)

// reported reads the legacy cdc's anomalies: "kind coupon <id>" -> times.
func reportedAnomalies(ctx context.Context, db *sql.DB) (map[string]int, error) {
	out := map[string]int{}
	err := sqltx.EachRow(ctx, db, `SELECT kind, COALESCE(user_coupon_id, 0) FROM `+legacyDB+`.cdc_anomaly`, nil, func(r *sql.Rows) error {
		var kind string
		var id int64
		err := r.Scan(&kind, &id)
		out[fmt.Sprintf("%s coupon %d", kind, id)]++
		return err
	})
	return out, err
}

// legacyDiff compares what was reported with what the writer caused; a
// coupon whose last write's outcome is unknown is left out of both.
func (w *legacyWriter) legacyDiff(got map[string]int) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var bad []string
	for key, what := range w.expected {
		if got[key] == 0 {
			bad = append(bad, "not reported: "+key+" ("+what+")")
		}
	}
	for key, n := range got {
		var kind string
		var id int64
		_, _ = fmt.Sscanf(key, "%s coupon %d", &kind, &id)
		if w.unknown[id] {
			continue
		}
		if _, ok := w.expected[key]; !ok {
			bad = append(bad, fmt.Sprintf("invented: %s (reported %d times)", key, n))
		} else if n > 1 {
			bad = append(bad, fmt.Sprintf("reported %d times: %s", n, key))
		}
	}
	sort.Strings(bad)
	return bad
}

// checkLegacy waits (bounded) until the legacy cdc has reported every
// anomaly the writer caused — a use without write-off is judged after the
// redemption grace, by a batch, so a legal claim is written each second as
// a tick — then compares, and runs the reconciler on the mapping.
func (cl *cluster) checkLegacy(ctx context.Context) {
	w := cl.legacy
	var got map[string]int
	var tick time.Time
	err := waitFor(ctx, 3*time.Minute, "the legacy cdc reports every anomaly the writer caused", func() (bool, string) {
		var err error
		if got, err = reportedAnomalies(ctx, cl.db); err != nil {
			return false, err.Error()
		}
		missing := 0
		w.mu.Lock()
		for key := range w.expected {
			if got[key] == 0 {
				missing++
			}
		}
		w.mu.Unlock()
		if missing > 0 && time.Since(tick) > time.Second {
			tick = time.Now()
			_ = w.claim(ctx) // a tick for the cdc's next batch
		}
		return missing == 0, fmt.Sprintf("%d not reported yet", missing)
	})
	if err == nil {
		err = cl.legacyCaughtUp(ctx)
	}
	if err == nil {
		got, err = reportedAnomalies(ctx, cl.db)
	}
	if err != nil {
		cl.checks.record(invLegacyAnomalies, append(w.legacyDiff(got), err.Error()))
	} else {
		cl.checks.record(invLegacyAnomalies, w.legacyDiff(got))
	}
	cl.checks.run(ctx, invLegacyRedis, cl.checkLegacyKey)
	cl.checks.run(ctx, invLegacyClaimed, cl.checkLegacyClaimed) // after checkLegacyKey's corrector pass
	cl.checks.run(ctx, invLegacyReconcile, func(ctx context.Context) ([]string, error) {
		code, out, err := cl.reconcileOnce(ctx, "-mapping", cl.mappingFile, "-dsn", cl.mysql.rootDSN(legacyDB), "-quiet", "1s")
		if err != nil || code == 0 {
			return nil, err
		}
		return []string{fmt.Sprintf("exit code %d", code), out}, nil
	})
}

// legacyCaughtUp waits until the legacy cdc's checkpoint reaches the
// server's binlog end.
func (cl *cluster) legacyCaughtUp(ctx context.Context) error {
	db, err := sql.Open("mysql", cl.mysql.rootDSN(legacyDB)+"?timeout=2s&parseTime=true")
	if err != nil {
		return err
	}
	defer db.Close()
	return caughtUp(ctx, db, 3*time.Minute)
}

// checkLegacyKey runs a reconcile pass that fixes (corrector mode: the
// front end's key, by compare-and-set after a quiet window), then proves
// the key equal to the budget minus the coupons taken.
func (cl *cluster) checkLegacyKey(ctx context.Context) ([]string, error) {
	args := []string{"reconcile", "-once", "-mapping", cl.mappingFile, "-dsn", cl.mysql.rootDSN(legacyDB),
		"-redis", cl.redis.addr(), "-quiet", "1s", "-claimed-quiet", "1s", "-log-level", "warn"}
	out, err := exec.CommandContext(ctx, cl.bin, args...).CombinedOutput()
	if err != nil {
		return []string{"couponlink reconcile -once -mapping (fixing): " + err.Error(), string(out)}, nil
	}
	var want int64
	if err := cl.db.QueryRowContext(ctx, `SELECT c.stock_total - (SELECT COUNT(*) FROM shop.coupon WHERE campaign_id = c.id)
		FROM shop.campaign c WHERE c.id = ?`, legacyCampaign).Scan(&want); err != nil {
		return nil, err
	}
	got, err := cl.rdb.Get(ctx, legacyStockKey).Int64()
	if err != nil || got != want {
		return []string{fmt.Sprintf("%s = %d (%v), budget - taken = %d", legacyStockKey, got, err, want)}, nil
	}
	return nil, nil
}

// checkLegacyClaimed proves the front end's claimed set, after the
// corrector pass of checkLegacyKey (the writer stopped: the set quiet), equal
// to the members holding a coupon of the campaign (its limit is 1): a
// failed order's member or a forgotten one of a deleted coupon removed, a
// member lost to a FLUSHALL added.
func (cl *cluster) checkLegacyClaimed(ctx context.Context) ([]string, error) {
	members, err := cl.rdb.SMembers(ctx, legacyClaimedKey).Result()
	if err != nil {
		return nil, err
	}
	var holders []string
	err = sqltx.EachRow(ctx, cl.db, fmt.Sprintf(`SELECT DISTINCT member_id FROM shop.coupon WHERE campaign_id = %d`, legacyCampaign), nil, func(r *sql.Rows) error {
		var m string
		err := r.Scan(&m)
		holders = append(holders, m)
		return err
	})
	if err != nil {
		return nil, err
	}
	return claimedDiff(members, holders), nil
}

// claimedDiff names the members without a coupon and the holders missing
// from the set.
func claimedDiff(members, holders []string) []string {
	in, holds := map[string]bool{}, map[string]bool{}
	for _, m := range members {
		in[m] = true
	}
	var bad []string
	for _, h := range holders {
		holds[h] = true
		if !in[h] {
			bad = append(bad, "holds a coupon, missing from the set: member "+h)
		}
	}
	for _, m := range members {
		if !holds[m] {
			bad = append(bad, "in the set without a coupon: member "+m)
		}
	}
	sort.Strings(bad)
	return bad
}
