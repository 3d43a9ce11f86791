package main

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/internal/sqltx"
	"github.com/couponlink/couponlink/inventory"
)

// The backlog: user_coupon row changes, 3 INSERTs (AVAILABLE) for every 2
// UPDATEs AVAILABLE→EXPIRED of a coupon the same writer inserted earlier.
// Every statement changes exactly the rows it says, so both readers must
// count exactly the written row changes.
const (
	insertOne = `INSERT INTO user_coupon (template_id, user_id, channel, status, claimed_at, expires_at)
		VALUES (?, ?, ?, 1, NOW(6), NOW(6) + INTERVAL 90 DAY)`
	expireOne  = `UPDATE user_coupon SET status = 3, version = version + 1 WHERE id = ? AND status = 1`
	expireMany = `UPDATE user_coupon SET status = 3, version = version + 1 WHERE id BETWEEN ? AND ? AND status = 1`
	backlogMix = "60% INSERT, 40% UPDATE AVAILABLE→EXPIRED"
)

type backlogPart struct {
	rows, txns int
	from, to   canal.Position
	took       time.Duration
	writers    int
}

func (p backlogPart) rate() float64 { return float64(p.rows) / p.took.Seconds() }

// writeSingle writes n row changes, one per transaction (autocommit).
func writeSingle(ctx context.Context, e *env, n int, log *slog.Logger) (backlogPart, error) {
	const workers = 32
	return writeParallel(ctx, e, workers, n, 1, log, func(ctx context.Context, db *sql.DB, w int, next func() (int, bool)) error {
		return mixWrites(next, func(i int) (int64, error) {
			res, err := db.ExecContext(ctx, insertOne, e.backlogTpl, fmt.Sprintf("b%d", i), channel(i))
			if err != nil {
				return 0, err
			}
			return res.LastInsertId()
		}, func(id int64) error {
			return execRows(ctx, db, 1, expireOne, id)
		})
	})
}

// writeBatched writes n row changes in transactions of per rows: one
// multi-row INSERT, or one UPDATE of per coupons the writer inserted.
func writeBatched(ctx context.Context, e *env, n, per int, log *slog.Logger) (backlogPart, error) {
	const workers = 8
	insertMany := insertCoupons(e.backlogTpl, "bb", per)
	return writeParallel(ctx, e, workers, n/per, per, log, func(ctx context.Context, db *sql.DB, w int, next func() (int, bool)) error {
		return mixWrites(next, func(int) (int64, error) {
			res, err := db.ExecContext(ctx, insertMany)
			if err != nil {
				return 0, err
			}
			// InnoDB gives one multi-row INSERT consecutive ids
			// (innodb_autoinc_lock_mode 0 or 1); the UPDATE checks it.
			return res.LastInsertId()
		}, func(first int64) error {
			return execRows(ctx, db, int64(per), expireMany, first, first+int64(per)-1)
		})
	})
}

// mixWrites is one writer's share of the backlog: for each transaction
// number next hands out, 3 in 5 insert (returning the id, or the first id
// of a multi-row INSERT) and the others expire what the oldest insert not
// yet expired wrote.
func mixWrites(next func() (int, bool), insert func(i int) (int64, error), expire func(id int64) error) error {
	var fifo []int64
	for j := 0; ; j++ {
		i, ok := next()
		if !ok {
			return nil
		}
		if j%5 < 3 {
			id, err := insert(i)
			if err != nil {
				return err
			}
			fifo = append(fifo, id)
			continue
		}
		id := fifo[0]
		fifo = fifo[1:]
		if err := expire(id); err != nil {
			return err
		}
	}
}

// insertCoupons is one INSERT of n AVAILABLE coupons of tpl, users
// <user>0.. over the channels c00..c39.
func insertCoupons(tpl int64, user string, n int) string {
	var sb strings.Builder
	sb.WriteString("INSERT INTO user_coupon (template_id, user_id, channel, status, claimed_at, expires_at) VALUES ")
	for k := range n {
		if k > 0 {
			sb.WriteString(", ")
		}
		fmt.Fprintf(&sb, "(%d, '%s%d', '%s', 1, NOW(6), NOW(6) + INTERVAL 90 DAY)", tpl, user, k, channel(k))
	}
	return sb.String()
}

func execRows(ctx context.Context, db *sql.DB, want int64, q string, args ...any) error {
	res, err := db.ExecContext(ctx, q, args...)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n != want {
		return fmt.Errorf("%d rows changed, want %d (ids not consecutive? check innodb_autoinc_lock_mode)", n, want)
	}
	return nil
}

// writeParallel hands txns transaction numbers to workers and records the
// binlog range they wrote.
func writeParallel(ctx context.Context, e *env, workers, txns, per int, log *slog.Logger,
	work func(ctx context.Context, db *sql.DB, w int, next func() (int, bool)) error) (backlogPart, error) {
	p := backlogPart{txns: txns, rows: txns * per, writers: workers}
	db, err := openMySQL(e.dsn, workers)
	if err != nil {
		return p, err
	}
	defer db.Close()
	if p.from, err = canal.CurrentPosition(ctx, e.db); err != nil {
		return p, err
	}
	var issued atomic.Int64
	next := func() (int, bool) {
		i := int(issued.Add(1)) - 1
		return i, i < txns
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	start := time.Now()
	stopLog := every(5*time.Second, func() {
		done := min(int(issued.Load()), txns)
		log.Info("writing backlog", "rows_per_tx", per, "txns", done, "of", txns,
			"tx_per_s", int(float64(done)/time.Since(start).Seconds()))
	})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			if err := work(ctx, db, w, next); err != nil {
				cancel(err)
			}
		})
	}
	wg.Wait()
	stopLog()
	p.took = time.Since(start)
	if err := context.Cause(ctx); err != nil {
		return p, fmt.Errorf("write backlog: %w", err)
	}
	if p.to, err = canal.CurrentPosition(ctx, e.db); err != nil {
		return p, err
	}
	return p, nil
}

// every calls f every d until the returned stop is called.
func every(d time.Duration, f func()) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				f()
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// resetState makes the cdc's derived state what it was at pos: the
// counters empty (the backlog starts on an empty user_coupon) or from the
// snapshot, no anomalies, the checkpoint at pos, Redis empty (the sink
// rebuilds its keys at start; stale stamps would refuse older values).
func resetState(ctx context.Context, e *env, pos canal.Position, fromSnapshot bool) error {
	stmts := []string{"DELETE FROM inventory_counter", "DELETE FROM cdc_anomaly"}
	if fromSnapshot {
		stmts = append(stmts, "INSERT INTO inventory_counter SELECT * FROM "+benchSchema+".counters_snapshot")
	}
	tx, err := e.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, q := range stmts {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("reset state: %s: %w", q, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO cdc_checkpoint (name, binlog_file, binlog_pos, gtid_set) VALUES ('default', ?, ?, ?)
		ON DUPLICATE KEY UPDATE binlog_file = VALUES(binlog_file), binlog_pos = VALUES(binlog_pos), gtid_set = VALUES(gtid_set), event_time = NULL`,
		pos.File, pos.Pos, pos.GTID); err != nil {
		return fmt.Errorf("reset checkpoint: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	return e.rdb.FlushDB(ctx).Err()
}

// snapshotCounters saves inventory_counter for a later resetState.
func snapshotCounters(ctx context.Context, e *env) error {
	for _, q := range []string{"DELETE FROM " + benchSchema + ".counters_snapshot",
		"INSERT INTO " + benchSchema + ".counters_snapshot SELECT * FROM inventory_counter"} {
		if _, err := e.db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("snapshot counters: %w", err)
		}
	}
	return nil
}

// verifyCounters compares inventory_counter with a GROUP BY of user_coupon,
// and every Redis bucket key with quota − claimed. It returns a one-line
// verdict; a mismatch is reported, not fatal.
func verifyCounters(ctx context.Context, e *env) (string, error) {
	return verifyStore(ctx, e.db, e.rdb)
}

// verifyStore checks one couponlink database and its Redis: counters =
// GROUP BY user_coupon, Redis bucket keys = quota − claimed. A result
// starting with "MISMATCH" is a failed check.
func verifyStore(ctx context.Context, db *sql.DB, rdb *redis.Client) (string, error) {
	truth, err := groupCounts(ctx, db, `SELECT template_id, channel, status, COUNT(*) FROM user_coupon GROUP BY 1, 2, 3`)
	if err != nil {
		return "", err
	}
	got, err := readCounters(ctx, db, "inventory_counter")
	if err != nil {
		return "", err
	}
	var bad []string
	for p, want := range truth {
		if g := got[p]; g != want {
			bad = append(bad, fmt.Sprintf("%d/%s counters %+v, truth %+v", p.Template, p.Channel, g, want))
		}
	}
	stock, nkeys, err := stockDiffs(ctx, db, rdb)
	if err != nil {
		return "", err
	}
	bad = append(bad, stock...)
	if len(bad) > 0 {
		return fmt.Sprintf("MISMATCH in %d places, e.g. %s", len(bad), bad[0]), nil
	}
	return fmt.Sprintf("counters = GROUP BY user_coupon for all %d pairs; Redis = quota − claimed for all %d bucket keys", len(truth), nkeys), nil
}

// groupCounts reads q's rows (template, channel, coupon status, count)
// as counters.
func groupCounts(ctx context.Context, db *sql.DB, q string) (map[inventory.Pair]inventory.Counts, error) {
	out := map[inventory.Pair]inventory.Counts{}
	err := sqltx.EachRow(ctx, db, q, nil, func(rows *sql.Rows) error {
		var p inventory.Pair
		var st, n int64
		if err := rows.Scan(&p.Template, &p.Channel, &st, &n); err != nil {
			return err
		}
		c := out[p]
		if !c.Bump(coupon.Status(st), n) {
			return fmt.Errorf("status %d is not a coupon status", st)
		}
		out[p] = c
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// readCounters reads a counter table (e.g. `cl_one`.inventory_counter),
// pairs with every count zero left out.
func readCounters(ctx context.Context, db *sql.DB, table string) (map[inventory.Pair]inventory.Counts, error) {
	out := map[inventory.Pair]inventory.Counts{}
	err := sqltx.EachRow(ctx, db, "SELECT template_id, channel, held, used, expired, returned FROM "+table, nil, func(rows *sql.Rows) error {
		var p inventory.Pair
		var c inventory.Counts
		if err := rows.Scan(&p.Template, &p.Channel, &c.Held, &c.Used, &c.Expired, &c.Returned); err != nil {
			return err
		}
		if c != (inventory.Counts{}) {
			out[p] = c
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// stockDiffs compares every bucket's Redis stock key with its quota −
// claimed now: the keys that differ, and how many buckets there are.
func stockDiffs(ctx context.Context, db *sql.DB, rdb *redis.Client) (bad []string, buckets int, err error) {
	rows, err := db.QueryContext(ctx, `SELECT template_id, channel, quota - claimed FROM channel_quota`)
	if err != nil {
		return nil, 0, fmt.Errorf("read channel_quota: %w", err)
	}
	defer rows.Close()
	keys := inventory.Keys{Prefix: "couponlink:"}
	pipe := rdb.Pipeline()
	var want []int64
	var cmds []*redis.StringCmd
	for rows.Next() {
		var p inventory.Pair
		var w int64
		if err := rows.Scan(&p.Template, &p.Channel, &w); err != nil {
			return nil, 0, err
		}
		want = append(want, w)
		cmds = append(cmds, pipe.Get(ctx, keys.Stock(p.Template, p.Channel)))
	}
	if err := rows.Err(); err != nil || len(cmds) == 0 {
		return nil, 0, err
	}
	_, _ = pipe.Exec(ctx) // a missing key is a difference, not an error
	for i, c := range cmds {
		if g, err := c.Int64(); err != nil || g != want[i] {
			bad = append(bad, fmt.Sprintf("Redis %s = %d (%v), want %d", c.Args()[1], g, err, want[i]))
		}
	}
	return bad, len(cmds), nil
}
