package main

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
)

// The shops of the legacy phase: the layouts of deploy/legacy (each its
// schema.sql and mapping.yaml, as attached to a shop) and the sharded shop
// of the sources phase, each with the writes such a shop makes, in
// transactions of -tx-rows coupons: 3 in 5 claim -tx-rows coupons (a
// multi-row INSERT, plus the shop's own stock guard where it keeps one),
// the others use them with the shop's evidence (the write-off rows or the
// orders, in the same transaction) or expire them, by turns.

// legacyShop is one layout the legacy phase can write.
type legacyShop struct {
	name string // its -legacy-layouts name: a deploy/legacy directory, or "sharded"
	what string // for the report
	// create makes the shop's tables in schema on db's server (dsn: a
	// DSN of that schema) and its campaigns.
	create func(ctx context.Context, db *sql.DB, dsn, repo, schema string) error
	// mapping is the mapping file's text for a shop in schema, and the
	// source the cdc follows ("" when the mapping names no sources).
	mapping func(repo, schema, dsn string) (text, source string, err error)
	// claim, use and expire are one transaction each of per coupons from
	// first on; each returns the row changes it wrote.
	claim, use, expire func(ctx context.Context, tx *sql.Tx, s string, first int64, per int) (int, error)
	// truth is the GROUP BY (template, channel, coupon status, count) of
	// the shop's coupons in schema s.
	truth func(s string) string
}

// legacyShops are the layouts, by name.
var legacyShops = []legacyShop{
	deployLayout(deployWrites{
		dir: "writeoff-table", what: "write-off table (redemption_evidence table: a coupon_writeoff row per use; per-user limit, end time, stock_left)",
		campaigns: "INSERT INTO %[1]s.campaign (id, title, stock_total, stock_left, limit_per_user, ends_at) " +
			"SELECT seq, CONCAT('c', seq), 1000000000, 1000000000, 1000000, '2099-12-31' FROM seq_1_to_4",
		claim: "INSERT INTO %[1]s.coupon (id, campaign_id, member_id, source, state) " +
			"SELECT ? + seq, 1 + seq MOD 4, 1 + (? + seq) MOD 50000, 1 + seq MOD 3, 10 FROM %[2]s",
		guard:    "UPDATE %[1]s.campaign SET stock_left = stock_left - ? WHERE id BETWEEN 1 AND 4",
		use:      "UPDATE %[1]s.coupon SET state = 20, order_no = CONCAT('o', id) WHERE id BETWEEN ? AND ? AND state = 10",
		evidence: "INSERT INTO %[1]s.coupon_writeoff (coupon_id, order_no, store_id) SELECT id, order_no, 7 FROM %[1]s.coupon WHERE id BETWEEN ? AND ?",
		expire:   "UPDATE %[1]s.coupon SET state = 30 WHERE id BETWEEN ? AND ? AND state = 10",
		truth: "SELECT campaign_id, source, CASE state WHEN 10 THEN 1 WHEN 20 THEN 2 WHEN 30 THEN 3 WHEN 40 THEN 4 END, COUNT(*) " +
			"FROM %[1]s.coupon GROUP BY 1, 2, 3",
	}),
	deployLayout(deployWrites{
		dir: "no-writeoff", what: "no write-off (redemption_evidence order_table: a sales_order per use, order keys per (promotion, member); per-user limit, end time, remain)",
		campaigns: "INSERT INTO %[1]s.promo (id, name, publish, remain, per_limit, end_time) " +
			"SELECT seq, CONCAT('p', seq), 1000000000, 1000000000, 1000000, '2099-12-31' FROM seq_1_to_4",
		claim: "INSERT INTO %[1]s.promo_member (id, promo_id, member_id, get_type, use_status) " +
			"SELECT ? + seq, 1 + seq MOD 4, 1 + (? + seq) MOD 50000, seq MOD 2, 0 FROM %[2]s",
		guard: "UPDATE %[1]s.promo SET remain = remain - ? WHERE id BETWEEN 1 AND 4",
		use:   "UPDATE %[1]s.promo_member SET use_status = 1 WHERE id BETWEEN ? AND ? AND use_status = 0",
		evidence: "INSERT INTO %[1]s.sales_order (order_sn, member_id, promo_id, amount, order_status) " +
			"SELECT CONCAT('o', id), member_id, promo_id, 9.90, 1 FROM %[1]s.promo_member WHERE id BETWEEN ? AND ?",
		expire: "UPDATE %[1]s.promo_member SET use_status = 2 WHERE id BETWEEN ? AND ? AND use_status = 0",
		truth:  "SELECT promo_id, COALESCE(get_type, 1), use_status + 1, COUNT(*) FROM %[1]s.promo_member GROUP BY 1, 2, 3",
	}),
	deployLayout(deployWrites{
		dir: "order-columns", what: "order on the coupon row (redemption_evidence coupon_order; soft deletes, shelf state, unlimited budgets)",
		campaigns: "INSERT INTO %[1]s.coupon_batch (batch_id, batch_name, total_count, per_limit, end_time, status) " +
			"SELECT seq, CONCAT('b', seq), 1000000000, 0, '2099-12-31', 1 FROM seq_1_to_4",
		claim: "INSERT INTO %[1]s.member_coupon (id, batch_id, uid, get_from, status) " +
			"SELECT ? + seq, 1 + seq MOD 4, CONCAT('u', (? + seq) MOD 50000), IF(seq MOD 2, 'app', 'h5'), 0 FROM %[2]s",
		use: "UPDATE %[1]s.member_coupon SET status = 1, order_sn = CONCAT('o', id), use_time = NOW() WHERE id BETWEEN ? AND ? AND status = 0",
		evidence: "INSERT INTO %[1]s.shop_order (order_sn, uid, status) " +
			"SELECT CONCAT('o', id), uid, 1 FROM %[1]s.member_coupon WHERE id BETWEEN ? AND ?",
		evidenceUnread: true, // the order table only says which orders are open: looked up, not followed
		expire:         "UPDATE %[1]s.member_coupon SET status = 2 WHERE id BETWEEN ? AND ? AND status = 0",
		truth:          "SELECT batch_id, get_from, status + 1, COUNT(*) FROM %[1]s.member_coupon WHERE deleted = 0 GROUP BY 1, 2, 3",
	}),
	deployLayout(deployWrites{
		dir: "orders-writeoff", what: "the orders table as the write-off table (redemption_evidence table with states; integer times, remain_count, unlimited budgets)",
		campaigns: "INSERT INTO %[1]s.store_coupon_issue (id, coupon_title, total_count, remain_count, end_time, status) " +
			"SELECT seq, CONCAT('c', seq), 1000000000, 1000000000, 2000000000, 1 FROM seq_1_to_4",
		claim: "INSERT INTO %[1]s.store_coupon_user (id, cid, uid, type, status) " +
			"SELECT ? + seq, 1 + seq MOD 4, 1 + (? + seq) MOD 50000, IF(seq MOD 2, 'get', 'send'), 0 FROM %[2]s",
		guard: "UPDATE %[1]s.store_coupon_issue SET remain_count = remain_count - ? WHERE id BETWEEN 1 AND 4",
		use:   "UPDATE %[1]s.store_coupon_user SET status = 1, use_time = UNIX_TIMESTAMP() WHERE id BETWEEN ? AND ? AND status = 0",
		evidence: "INSERT INTO %[1]s.store_order (order_id, uid, coupon_id, pay_price, paid, add_time) " +
			"SELECT CONCAT('o', id), uid, id, 9.90, 1, UNIX_TIMESTAMP() FROM %[1]s.store_coupon_user WHERE id BETWEEN ? AND ?",
		expire: "UPDATE %[1]s.store_coupon_user SET status = 2 WHERE id BETWEEN ? AND ? AND status = 0",
		truth:  "SELECT cid, type, status + 1, COUNT(*) FROM %[1]s.store_coupon_user GROUP BY 1, 2, 3",
	}),
	{
		name: "sharded", what: "the sources phase's sharded shop (user_coupon_{0..3}, redemption_evidence none, template budgets)",
		create: func(ctx context.Context, db *sql.DB, _, _, schema string) error {
			return createShop(ctx, db, schema, 4)
		},
		mapping: func(_, schema, dsn string) (string, string, error) {
			return shopMappingText(schema, 4, []shopSource{{name: "one", dsn: dsn}}), "one", nil
		},
		claim: func(ctx context.Context, tx *sql.Tx, s string, first int64, per int) (int, error) {
			return execAll(ctx, tx, stmt(per, "INSERT INTO "+s+".user_coupon_"+shardOf(first)+" (id, tpl_id, state, uid) SELECT ? + seq, 1 + seq MOD 4, 0, ? + seq FROM "+seqTo(per), first, first))
		},
		use: func(ctx context.Context, tx *sql.Tx, s string, first int64, per int) (int, error) {
			return execAll(ctx, tx, stmt(per, "UPDATE "+s+".user_coupon_"+shardOf(first)+" SET state = 1 WHERE id BETWEEN ? AND ? AND state = 0", first, first+int64(per)-1))
		},
		expire: func(ctx context.Context, tx *sql.Tx, s string, first int64, per int) (int, error) {
			return execAll(ctx, tx, stmt(per, "UPDATE "+s+".user_coupon_"+shardOf(first)+" SET state = 2 WHERE id BETWEEN ? AND ? AND state = 0", first, first+int64(per)-1))
		},
		truth: func(s string) string {
			var parts []string
			for i := range 4 {
				parts = append(parts, fmt.Sprintf("SELECT tpl_id, state FROM %s.user_coupon_%d", s, i))
			}
			return "SELECT tpl_id, '" + shopChannel + "', state + 1, COUNT(*) FROM (" + strings.Join(parts, " UNION ALL ") + ") u GROUP BY 1, 3"
		},
	},
}

// legacyShopNames are the layouts' names.
func legacyShopNames() []string {
	return mapped(legacyShops, func(l legacyShop) string { return l.name })
}

// shardOf is the shard table of a claim's coupons: by its first id.
func shardOf(first int64) string { return fmt.Sprint((first / 100) % 4) }

func seqTo(per int) string { return fmt.Sprintf("seq_0_to_%d", per-1) }

// deployShop creates a deploy/legacy layout's tables from its schema.sql
// in schema (through a pool of that database, dsn), then its campaigns
// by campaigns (%[1]s: the schema).
func deployShop(dir, campaigns string) func(ctx context.Context, db *sql.DB, dsn, repo, schema string) error {
	return func(ctx context.Context, db *sql.DB, dsn, repo, schema string) error {
		ddl, err := os.ReadFile(filepath.Join(repo, "deploy", "legacy", dir, "schema.sql"))
		if err != nil {
			return err
		}
		if _, err := db.ExecContext(ctx, "CREATE DATABASE `"+schema+"`"); err != nil {
			return err
		}
		shop, err := openMySQL(dsn, 1)
		if err != nil {
			return err
		}
		defer shop.Close()
		var stmts []string
		for _, s := range strings.Split(string(ddl), ";\n") {
			if s = strings.TrimSpace(stripSQLComments(s)); s != "" {
				stmts = append(stmts, s)
			}
		}
		for _, q := range append(stmts, fmt.Sprintf(campaigns, schema)) {
			if _, err := shop.ExecContext(ctx, q); err != nil {
				return fmt.Errorf("%s: %s: %w", dir, q, err)
			}
		}
		return nil
	}
}

// stripSQLComments drops the -- comment lines of a statement.
func stripSQLComments(stmt string) string {
	var out []string
	for line := range strings.SplitSeq(stmt, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "--") {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// deployMapping is a deploy/legacy layout's mapping.yaml, its shop in
// schema.
func deployMapping(dir string) func(repo, schema, dsn string) (string, string, error) {
	return func(repo, schema, _ string) (string, string, error) {
		y, err := os.ReadFile(filepath.Join(repo, "deploy", "legacy", dir, "mapping.yaml"))
		if err != nil {
			return "", "", err
		}
		text := strings.Replace(string(y), "schema: shop", "schema: "+schema, 1)
		if text == string(y) {
			return "", "", fmt.Errorf("deploy/legacy/%s/mapping.yaml has no \"schema: shop\" line", dir)
		}
		return text, "", nil
	}
}

// deployWrites are a deploy/legacy layout's writes as SQL: %[1]s is the
// shop's schema, %[2]s the seq table of a transaction's coupons; the
// claim, use, evidence and expire statements take the coupons' first id
// (and the last one), the guard a campaign's share of them.
type deployWrites struct {
	dir, what      string
	campaigns      string // the campaigns, before any claim
	claim, guard   string // per coupons inserted; the shop's stock guard on the 4 campaigns ("" none)
	use, evidence  string // per coupons used, and their evidence rows
	evidenceUnread bool   // the evidence table is not one the cdc follows
	expire, truth  string
}

// deployLayout is the legacy phase's layout of w.
func deployLayout(w deployWrites) legacyShop {
	return legacyShop{
		name: w.dir, what: w.what,
		create:  deployShop(w.dir, w.campaigns),
		mapping: deployMapping(w.dir),
		claim: func(ctx context.Context, tx *sql.Tx, s string, first int64, per int) (int, error) {
			stmts := []sqlStmt{stmt(per, fmt.Sprintf(w.claim, s, seqTo(per)), first, first)}
			if w.guard != "" {
				stmts = append(stmts, stmt(4, fmt.Sprintf(w.guard, s), per/4))
			}
			return execAll(ctx, tx, stmts...)
		},
		use: func(ctx context.Context, tx *sql.Tx, s string, first int64, per int) (int, error) {
			last := first + int64(per) - 1
			ev := stmt(per, fmt.Sprintf(w.evidence, s), first, last)
			ev.unread = w.evidenceUnread
			return execAll(ctx, tx, stmt(per, fmt.Sprintf(w.use, s), first, last), ev)
		},
		expire: func(ctx context.Context, tx *sql.Tx, s string, first int64, per int) (int, error) {
			return execAll(ctx, tx, stmt(per, fmt.Sprintf(w.expire, s), first, first+int64(per)-1))
		},
		truth: func(s string) string { return fmt.Sprintf(w.truth, s) },
	}
}

// sqlStmt is one statement of a shop's transaction and the rows it must
// change; unread: its table is not one the cdc follows (its rows are not
// row changes the readers count).
type sqlStmt struct {
	rows   int
	q      string
	args   []any
	unread bool
}

func stmt(rows int, q string, args ...any) sqlStmt { return sqlStmt{rows: rows, q: q, args: args} }

// execAll runs the statements in tx; each must change its rows. It
// returns the row changes of the tables the cdc follows.
func execAll(ctx context.Context, tx *sql.Tx, stmts ...sqlStmt) (int, error) {
	n := 0
	for _, s := range stmts {
		res, err := tx.ExecContext(ctx, s.q, s.args...)
		if err != nil {
			return n, err
		}
		if got, err := res.RowsAffected(); err != nil {
			return n, err
		} else if got != int64(s.rows) {
			return n, fmt.Errorf("%s: %d rows changed, want %d", s.q, got, s.rows)
		}
		if !s.unread {
			n += s.rows
		}
	}
	return n, nil
}

// writeLegacy writes at least rows row changes into the shop l in schema s
// on srv (8 writers, the claim/use/expire mix of mixWrites, uses and
// expiries by turns), coupon ids from base + 1 on; the part's rows are the
// row changes written to the tables the cdc follows.
func writeLegacy(ctx context.Context, srv *env, l legacyShop, s string, base int64, rows, per int, log *slog.Logger) (backlogPart, error) {
	// 3 claims of per+ rows for 2 uses or expiries (a use writes 2 × per)
	txns := rows/per + 1
	var written atomic.Int64
	p, err := writeParallel(ctx, srv, 8, txns, per, log, func(ctx context.Context, db *sql.DB, w int, next func() (int, bool)) error {
		turn := 0
		inTx := func(f func(ctx context.Context, tx *sql.Tx, s string, first int64, per int) (int, error), first int64) error {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			defer tx.Rollback()
			n, err := f(ctx, tx, s, first, per)
			if err != nil {
				return err
			}
			if err := tx.Commit(); err != nil {
				return err
			}
			written.Add(int64(n))
			return nil
		}
		return mixWrites(next, func(i int) (int64, error) {
			first := base + int64(i)*int64(per) + 1
			return first, inTx(l.claim, first)
		}, func(first int64) error {
			turn++
			if turn%2 == 1 {
				return inTx(l.use, first)
			}
			return inTx(l.expire, first)
		})
	})
	p.rows = int(written.Load())
	return p, err
}
