package main

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/couponlink/couponlink/inventory"
)

// The legacy sharded shop of the sources phase: per schema, four tables
// user_coupon_{0..3} and a template table; redemption evidence none, so
// the cdc follows only the coupon rows (and the templates' budgets).
const (
	shopTemplates = 4
	shopChannel   = "legacy" // the mapping's default_channel: the shop has no channel column
	// shopMix is the backlog: as backlog.go's, with the UPDATEs taking
	// AVAILABLE to USED and to EXPIRED by turns.
	shopMix = "60% INSERT (AVAILABLE), 40% UPDATE AVAILABLE→USED / →EXPIRED by turns"
)

// createShop creates schema on db with shards user_coupon_N tables and
// the template table, holding shopTemplates templates of ample quota.
func createShop(ctx context.Context, db *sql.DB, schema string, shards int) error {
	stmts := []string{"CREATE DATABASE `" + schema + "`",
		"CREATE TABLE `" + schema + "`.coupon_tpl (id BIGINT NOT NULL PRIMARY KEY, total_quota BIGINT NOT NULL)"}
	for i := range shards {
		stmts = append(stmts, fmt.Sprintf("CREATE TABLE `%s`.user_coupon_%d (id BIGINT NOT NULL PRIMARY KEY, tpl_id BIGINT NOT NULL, "+
			"state TINYINT NOT NULL, uid BIGINT NOT NULL, KEY (tpl_id, state))", schema, i))
	}
	var vals []string
	for t := 1; t <= shopTemplates; t++ {
		vals = append(vals, fmt.Sprintf("(%d, 1000000000)", t))
	}
	stmts = append(stmts, "INSERT INTO `"+schema+"`.coupon_tpl (id, total_quota) VALUES "+strings.Join(vals, ", "))
	for _, q := range stmts {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

// shopTables is the mapping's user_coupon table set of a schema.
func shopTables(schema string, shards int) string {
	return fmt.Sprintf("%s.user_coupon_{0..%d}", schema, shards-1)
}

// shopInclude matches the shop's tables, for a no-op reader.
func shopInclude(schema string) []string {
	s := regexp.QuoteMeta(schema)
	return []string{`^` + s + `\.user_coupon_[0-9]+$`, `^` + s + `\.coupon_tpl$`}
}

// shopSource is one entry of a mapping's sources: its name, DSN and, when
// not the top-level ones, its shop schema.
type shopSource struct {
	name, dsn, schema string
}

// writeShopMapping writes the mapping of the shop whose top-level tables
// are in schema, over the sources, to dir/file and returns its path.
func writeShopMapping(dir, file, schema string, shards int, sources []shopSource) (string, error) {
	path := filepath.Join(dir, file)
	return path, os.WriteFile(path, []byte(shopMappingText(schema, shards, sources)), 0o600)
}

// shopMappingText is the mapping of the shop whose top-level tables are
// in schema, over the sources.
func shopMappingText(schema string, shards int, sources []shopSource) string {
	var b strings.Builder
	fmt.Fprintf(&b, "user_coupon: {table: %q, id: id, template: tpl_id, status: state, user: uid}\n", shopTables(schema, shards))
	b.WriteString("status: {AVAILABLE: [0], USED: [1], EXPIRED: [2]}\nredemption_evidence: none\n")
	fmt.Fprintf(&b, "template: {table: %s.coupon_tpl, id: id, total_quota: total_quota}\ndefault_channel: %s\nsources:\n", schema, shopChannel)
	for _, s := range sources {
		fmt.Fprintf(&b, "  - {name: %s, dsn: %q", s.name, s.dsn)
		if s.schema != "" && s.schema != schema {
			fmt.Fprintf(&b, ", user_coupon: %q, template: %s.coupon_tpl", shopTables(s.schema, shards), s.schema)
		}
		b.WriteString("}\n")
	}
	return b.String()
}

// writeShop writes rows row changes into the shop's four tables on srv, in
// transactions of per rows (8 writers, writer w on table w mod 4): a
// multi-row INSERT of AVAILABLE coupons, or an UPDATE of the per coupons
// of one earlier INSERT of the writer to USED or EXPIRED. Ids are unique
// over the shop: base + transaction number × per + 1 on.
func writeShop(ctx context.Context, srv *env, schema string, base int64, rows, per int, log *slog.Logger) (backlogPart, error) {
	const workers = 8
	values := fmt.Sprintf("SELECT ? + seq, 1 + seq MOD %d, 0, ? + seq FROM seq_0_to_%d", shopTemplates, per-1)
	return writeParallel(ctx, srv, workers, rows/per, per, log, func(ctx context.Context, db *sql.DB, w int, next func() (int, bool)) error {
		table := fmt.Sprintf("`%s`.user_coupon_%d", schema, w%4)
		ins := "INSERT INTO " + table + " (id, tpl_id, state, uid) " + values
		upd := "UPDATE " + table + " SET state = ? WHERE id BETWEEN ? AND ? AND state = 0"
		turn := 0
		return mixWrites(next, func(i int) (int64, error) {
			first := base + int64(i)*int64(per) + 1
			return first, execRows(ctx, db, int64(per), ins, first, first)
		}, func(first int64) error {
			turn++
			return execRows(ctx, db, int64(per), upd, 1+turn%2, first, first+int64(per)-1)
		})
	})
}

// shopTruth counts the shop's coupons per template and state (a GROUP BY
// over its shard tables), as counters of the default channel: the shop's
// states 0, 1, 2 (AVAILABLE, USED, EXPIRED in its mapping) are coupon
// statuses 1, 2, 3.
func shopTruth(ctx context.Context, db *sql.DB, schema string, shards int) (map[inventory.Pair]inventory.Counts, error) {
	var parts []string
	for i := range shards {
		parts = append(parts, fmt.Sprintf("SELECT tpl_id, state FROM `%s`.user_coupon_%d", schema, i))
	}
	return groupCounts(ctx, db, "SELECT tpl_id, '"+shopChannel+"', state + 1, COUNT(*) FROM ("+strings.Join(parts, " UNION ALL ")+") u GROUP BY 1, 3")
}

// addCounts adds b into a.
func addCounts(a, b map[inventory.Pair]inventory.Counts) {
	for p, c := range b {
		s := a[p]
		s.Held, s.Used, s.Expired, s.Returned = s.Held+c.Held, s.Used+c.Used, s.Expired+c.Expired, s.Returned+c.Returned
		a[p] = s
	}
}

// verifyShop compares the counters summed over the case's cdcs with the
// truth summed over their shops. A result starting with "MISMATCH" is a
// failed check.
func verifyShop(ctx context.Context, label string, cdcs []*srcCDC) (string, error) {
	truth, got := map[inventory.Pair]inventory.Counts{}, map[inventory.Pair]inventory.Counts{}
	var coupons int64
	for _, c := range cdcs {
		t, err := shopTruth(ctx, c.srv.db, c.shop, 4)
		if err != nil {
			return "", fmt.Errorf("truth of %s: %w", c.name, err)
		}
		g, err := readCounters(ctx, c.srv.db, "`"+c.clDB+"`.inventory_counter")
		if err != nil {
			return "", fmt.Errorf("counters of %s: %w", c.name, err)
		}
		addCounts(truth, t)
		addCounts(got, g)
	}
	for _, c := range truth {
		coupons += c.Issued()
	}
	if !maps.Equal(truth, got) {
		return fmt.Sprintf("MISMATCH %s: counters %v, GROUP BY of the shard tables %v", label, got, truth), nil
	}
	return fmt.Sprintf("%s: counters = GROUP BY of the shard tables for all %d pairs (%s coupons)", label, len(truth), count(coupons)), nil
}
