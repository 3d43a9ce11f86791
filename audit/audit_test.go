package audit_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/audit"
	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/internal/sqltx"
	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/inventory"
	"github.com/couponlink/couponlink/reconcile"
)

// shop is a layout of deploy/legacy (its schema.sql and mapping.yaml as
// they are), in the test's database beside couponlink's own tables, before
// couponlink ever ran on it.
type shop struct {
	t   *testing.T
	ctx context.Context
	db  *sql.DB
	m   *canal.Mapping
	// yaml is the layout's mapping.yaml on the test's schema (remap)
	yaml string
}

func newShop(t *testing.T, layout string) *shop {
	db, dsn := testenv.MySQL(t)
	ctx := context.Background()
	dir := filepath.Join("..", "deploy", "legacy", layout)
	ddl, err := os.ReadFile(filepath.Join(dir, "schema.sql"))
	require.NoError(t, err)
	cfg, err := mysql.ParseDSN(dsn)
	require.NoError(t, err)
	cfg.MultiStatements = true // the file as it is, in one go
	conn, err := sql.Open("mysql", cfg.FormatDSN())
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.ExecContext(ctx, string(ddl))
	require.NoError(t, err)
	y, err := os.ReadFile(filepath.Join(dir, "mapping.yaml"))
	require.NoError(t, err)
	s := &shop{t: t, ctx: ctx, db: db, yaml: strings.Replace(string(y), "schema: shop", "schema: "+cfg.DBName, 1)}
	s.remap(s.yaml)
	return s
}

// remap makes y the shop's mapping.
func (s *shop) remap(y string) {
	s.t.Helper()
	m, err := canal.LoadMapping([]byte(y))
	require.NoError(s.t, err)
	s.m, err = m.Resolve(s.ctx, s.db)
	require.NoError(s.t, err)
}

func (s *shop) exec(q string, args ...any) {
	s.t.Helper()
	_, err := s.db.ExecContext(s.ctx, q, args...)
	require.NoError(s.t, err, q)
}

func (s *shop) int(q string, args ...any) int64 {
	s.t.Helper()
	var n int64
	require.NoError(s.t, s.db.QueryRowContext(s.ctx, q, args...).Scan(&n), q)
	return n
}

// coupon inserts coupon id of campaign for member in state (10 unused, 20
// used, 30 expired), written off by each of orders.
func (s *shop) coupon(id, campaign, member int64, state int, orders ...string) {
	s.t.Helper()
	s.exec(`INSERT INTO coupon (id, campaign_id, member_id, source, state) VALUES (?, ?, ?, 1, ?)`, id, campaign, member, state)
	for _, o := range orders {
		s.writeOff(id, o)
	}
}

func (s *shop) writeOff(coupon int64, order string) {
	s.exec(`INSERT INTO coupon_writeoff (coupon_id, order_no, store_id) VALUES (?, ?, 1)`, coupon, order)
}

// seed writes a shop with one or more inconsistencies of every kind the
// audit can see in a snapshot, among clean coupons; it returns the
// subjects each kind must name, exactly.
func (s *shop) seed() map[audit.Kind][]string {
	s.exec(`INSERT INTO campaign (id, title, stock_total, stock_left, limit_per_user) VALUES
		(1, 'spring', 100, 90, 1), (2, 'flash', 3, 0, NULL), (3, 'members', 10, 6, 2)`)
	// clean: used with one write-off, unused, expired, voided
	s.coupon(1, 1, 101, 20, "A-1")
	s.coupon(2, 1, 102, 10)
	s.coupon(3, 1, 103, 30)
	s.coupon(4, 3, 104, 40)
	s.coupon(5, 3, 88, 20, "A-5")
	s.coupon(6, 3, 88, 10) // member 88 holds 2 of campaign 3: its limit
	// used_without_redemption: used, no write-off
	s.coupon(10, 1, 110, 20)
	s.coupon(11, 3, 111, 20)
	// redemption_on_unused: unused and expired coupons written off, and a
	// write-off of no coupon
	s.coupon(20, 1, 120, 10, "B-20")
	s.coupon(21, 3, 121, 30, "B-21")
	s.writeOff(999, "B-999")
	// double_spend: one coupon behind two orders; one written off twice by
	// the same order is no double spend
	s.coupon(30, 1, 130, 20, "C-1", "C-2")
	s.coupon(31, 1, 131, 20, "C-3", "C-3")
	// over_issue: campaign 2's budget is 3, 4 coupons were taken
	for id := int64(40); id < 44; id++ {
		s.coupon(id, 2, 140+id, 10)
	}
	// per_user_limit_exceeded: member 77 holds 2 of campaign 1 (limit 1)
	s.coupon(50, 1, 77, 10)
	s.coupon(51, 1, 77, 30)
	return map[audit.Kind][]string{
		audit.UsedWithoutRedemption: {"coupon 10", "coupon 11"},
		audit.RedemptionOnUnused:    {"coupon 20", "coupon 21", "coupon 999"},
		audit.DoubleSpend:           {"coupon 30"},
		audit.OverIssue:             {"template 2"},
		audit.PerUserLimitExceeded:  {`template 1 user "77"`},
	}
}

func subjects(k *audit.KindReport) []string {
	out := []string{}
	for _, f := range k.Examples {
		out = append(out, f.Subject())
	}
	return out
}

// TestAuditFindsEveryKind: a shop seeded with known inconsistencies of
// every kind before couponlink's first start: the audit reports exactly
// those, each named, and nothing else; its totals equal a GROUP BY of the
// shop's tables; its JSON parses back.
func TestAuditFindsEveryKind(t *testing.T) {
	s := newShop(t, "writeoff-table")
	want := s.seed()
	rep, err := audit.Run(s.ctx, s.db, s.m, "writeoff-table", audit.Config{Logger: testenv.QuietLogger()})
	require.NoError(t, err)
	var total int64
	for _, k := range audit.Kinds {
		kr := rep.Kind(k)
		require.NotNil(t, kr, k)
		named := want[k]
		if named == nil {
			named = []string{} // nothing of the kind was seeded
		}
		assert.Equal(t, named, subjects(kr), "%s names", k)
		assert.Equal(t, int64(len(want[k])), kr.Count, "%s count", k)
		total += kr.Count
	}
	assert.Equal(t, total, rep.Found)
	assert.False(t, rep.Clean())
	for _, k := range []audit.Kind{audit.UsedAfterExpiry, audit.ClaimedOffShelf} {
		assert.False(t, rep.Kind(k).Checked, "%s cannot be judged from this shop's snapshot", k)
		assert.NotEmpty(t, rep.Kind(k).Off, "%s says why it is off", k)
	}
	for _, k := range []audit.Kind{audit.UsedWithoutRedemption, audit.RedemptionOnUnused, audit.DoubleSpend, audit.OverIssue, audit.PerUserLimitExceeded} {
		assert.True(t, rep.Kind(k).Checked, "%s is checked on this shop", k)
	}
	assert.Equal(t, "written off by 2 orders", rep.Kind(audit.DoubleSpend).Examples[0].Detail)
	assert.Equal(t, "C-1, C-2", rep.Kind(audit.DoubleSpend).Examples[0].Orders)
	assert.Equal(t, "4 coupons taken, budget 3", rep.Kind(audit.OverIssue).Examples[0].Detail)

	// the totals are the shop's own GROUP BY
	byState := map[int]int64{}
	require.NoError(t, sqltx.EachRow(s.ctx, s.db, `SELECT state, COUNT(*) FROM coupon GROUP BY state`, nil, func(rows *sql.Rows) error {
		var st int
		var n int64
		err := rows.Scan(&st, &n)
		byState[st] = n
		return err
	}))
	tot := rep.Totals
	assert.Equal(t, byState[10]+byState[20]+byState[30]+byState[40], tot.Issued)
	assert.Equal(t, []int64{byState[10], byState[20], byState[30], byState[40]}, []int64{tot.Available, tot.Used, tot.Expired, tot.Returned})
	withEvidence := s.int(`SELECT COUNT(*) FROM coupon c WHERE state = 20 AND EXISTS (SELECT 1 FROM coupon_writeoff w WHERE w.coupon_id = c.id)`)
	require.NotNil(t, tot.UsedWithEvidence)
	assert.Equal(t, withEvidence, *tot.UsedWithEvidence)
	assert.Equal(t, byState[20]-withEvidence, *tot.UsedWithoutEvidence)
	writeOffs := s.int(`SELECT COUNT(*) FROM coupon_writeoff`)
	require.NotNil(t, tot.WriteOffs)
	assert.Equal(t, writeOffs, *tot.WriteOffs)
	assert.Equal(t, tot.Issued-writeOffs, *tot.IssuedMinusWriteOffs)

	// the JSON parses back into the same report
	var buf bytes.Buffer
	require.NoError(t, rep.WriteJSON(&buf))
	var back audit.Report
	require.NoError(t, json.Unmarshal(buf.Bytes(), &back))
	assert.Equal(t, rep.Found, back.Found)
	assert.Equal(t, rep.Kinds, back.Kinds)
	assert.Equal(t, rep.Totals, back.Totals)

	buf.Reset()
	require.NoError(t, rep.WriteText(&buf))
	assert.Contains(t, buf.String(), "double_spend: 1\n  coupon 30: written off by 2 orders (template 1, member \"130\", orders C-1, C-2)\n")
	assert.Contains(t, buf.String(), "used_without_redemption: 2\n")
}

// run audits the shop and returns the subjects each kind names.
func (s *shop) run() (*audit.Report, map[audit.Kind][]string) {
	s.t.Helper()
	rep, err := audit.Run(s.ctx, s.db, s.m, "shop", audit.Config{})
	require.NoError(s.t, err)
	found := map[audit.Kind][]string{}
	for _, k := range rep.Kinds {
		if names := subjects(&k); len(names) > 0 {
			found[k.Kind] = names
		}
	}
	return rep, found
}

// TestAuditCouponOrder: the order-columns layout (the order on the coupon
// row, orders with closed states, soft deletes, an unlimited budget): a
// use with no order or with a closed one, an unused coupon behind an open
// order, a budget exceeded; an unlimited budget, a given-back coupon
// keeping its cancelled order and a soft-deleted coupon are clean.
func TestAuditCouponOrder(t *testing.T) {
	s := newShop(t, "order-columns")
	s.exec(`INSERT INTO coupon_batch (batch_id, batch_name, total_count, end_time) VALUES
		(1, 'unlimited', 0, NOW() + INTERVAL 1 DAY), (2, 'one', 1, NOW() + INTERVAL 1 DAY)`)
	s.exec(`INSERT INTO shop_order (order_sn, uid, status) VALUES ('S1', 'u1', 1), ('S3', 'u3', 4), ('S4', 'u4', 2), ('S5', 'u5', 3)`)
	s.exec(`INSERT INTO member_coupon (id, batch_id, uid, get_from, status, order_sn, deleted) VALUES
		(1, 1, 'u1', 'app', 1, 'S1', 0), (2, 1, 'u2', 'app', 1, NULL, 0), (3, 1, 'u3', 'app', 1, 'S3', 0),
		(4, 1, 'u4', 'app', 0, 'S4', 0), (5, 1, 'u5', 'app', 0, 'S5', 0), (6, 1, 'u6', 'app', 1, NULL, 1),
		(7, 2, 'u7', 'h5', 0, NULL, 0), (8, 2, 'u8', 'h5', 2, NULL, 0)`)
	rep, found := s.run()
	assert.Equal(t, map[audit.Kind][]string{
		audit.UsedWithoutRedemption: {"coupon 2", "coupon 3"},
		audit.RedemptionOnUnused:    {"coupon 4"},
		audit.OverIssue:             {"template 2"},
	}, found)
	assert.False(t, rep.Kind(audit.DoubleSpend).Checked, "one order column: a snapshot cannot see a second order")
	assert.Equal(t, "used, and its order S3 is not an open order", rep.Kind(audit.UsedWithoutRedemption).Examples[1].Detail)
	assert.Equal(t, int64(7), rep.Totals.Issued, "the soft-deleted coupon is not counted")
	assert.Equal(t, int64(1), *rep.Totals.UsedWithEvidence)
}

// TestAuditOrderTable: the no-writeoff layout (orders name the promotion
// and the member, not the coupon): more uses than open orders of a
// (promotion, member) is a use without evidence, more open orders than
// uses a double spend; a closed order proves nothing.
func TestAuditOrderTable(t *testing.T) {
	s := newShop(t, "no-writeoff")
	s.exec(`INSERT INTO promo (id, name, publish, remain) VALUES (1, 'spring', 10, 5)`)
	s.exec(`INSERT INTO promo_member (promo_id, member_id, get_type, use_status) VALUES
		(1, 5, 1, 1), (1, 5, 1, 1), (1, 6, 1, 0), (1, 7, 1, 1), (1, 8, 1, NULL)`)
	s.exec(`INSERT INTO sales_order (order_sn, member_id, promo_id, amount, order_status) VALUES
		('A', 5, 1, 10, 1), ('B', 5, 1, 10, 4), ('C', 6, 1, 10, 3), ('D', 7, 1, 10, 2), ('E', 9, 1, 10, 1), ('F', 9, NULL, 10, 1)`)
	rep, found := s.run()
	assert.Equal(t, map[audit.Kind][]string{
		audit.UsedWithoutRedemption: {`template 1 user "5"`},
		audit.DoubleSpend:           {`template 1 user "6"`, `template 1 user "9"`},
	}, found)
	assert.Equal(t, "2 used coupons, 1 open orders", rep.Kind(audit.UsedWithoutRedemption).Examples[0].Detail)
	assert.Equal(t, int64(3), *rep.Totals.UsedWithEvidence+*rep.Totals.UsedWithoutEvidence)
	assert.Equal(t, int64(1), *rep.Totals.UsedWithoutEvidence)
	assert.Equal(t, int64(4), *rep.Totals.WriteOffs, "the open orders that used a coupon")
}

// TestAuditEvidenceStates: with write-off rows that a soft delete ends
// (redemption_log.deleted), only live rows prove a use, as the cdc reads
// them: a used coupon whose only write-off is deleted is a use without
// evidence, a deleted write-off of an unused coupon or beside a live one
// is nothing, and two live orders of one coupon are a double spend.
func TestAuditEvidenceStates(t *testing.T) {
	s := newShop(t, "writeoff-table")
	s.exec(`ALTER TABLE coupon_writeoff ADD COLUMN is_del TINYINT NOT NULL DEFAULT 0`)
	y := strings.Replace(s.yaml, "order: order_no}", "order: order_no, deleted: {column: is_del, values: [1]}}", 1)
	require.NotEqual(t, s.yaml, y)
	s.remap(y)
	s.exec(`INSERT INTO campaign (id, title, stock_total, stock_left) VALUES (1, 'spring', 100, 96)`)
	s.coupon(1, 1, 101, 20, "A-1")
	s.coupon(2, 1, 102, 10, "A-2")
	s.coupon(3, 1, 103, 20, "B-1", "B-2")
	s.coupon(4, 1, 104, 20, "C-1", "C-2")
	s.exec(`UPDATE coupon_writeoff SET is_del = 1 WHERE order_no IN ('A-1', 'A-2', 'B-2')`)
	rep, found := s.run()
	assert.Equal(t, map[audit.Kind][]string{
		audit.UsedWithoutRedemption: {"coupon 1"},
		audit.DoubleSpend:           {"coupon 4"},
	}, found)
	assert.Equal(t, int64(3), *rep.Totals.WriteOffs, "the live write-offs: B-1, C-1, C-2")
}

// TestAuditExamplesAreCapped: past -examples a kind names no more, and
// its count stays exact.
func TestAuditExamplesAreCapped(t *testing.T) {
	s := newShop(t, "writeoff-table")
	s.exec(`INSERT INTO campaign (id, title, stock_total, stock_left) VALUES (1, 'spring', 1000, 0)`)
	s.exec(`INSERT INTO coupon (id, campaign_id, member_id, source, state) SELECT seq, 1, seq, 1, 20 FROM seq_1_to_250`)
	rep, err := audit.Run(s.ctx, s.db, s.m, "writeoff-table", audit.Config{Examples: 7, ProgressEvery: 100})
	require.NoError(t, err)
	kr := rep.Kind(audit.UsedWithoutRedemption)
	assert.Equal(t, int64(250), kr.Count)
	assert.Equal(t, []string{"coupon 1", "coupon 2", "coupon 3", "coupon 4", "coupon 5", "coupon 6", "coupon 7"}, subjects(kr))
	assert.Equal(t, int64(250), rep.Found)
}

// TestAuditCleanShop: a shop with nothing wrong is clean.
func TestAuditCleanShop(t *testing.T) {
	s := newShop(t, "writeoff-table")
	s.exec(`INSERT INTO campaign (id, title, stock_total, stock_left, limit_per_user) VALUES (1, 'spring', 10, 8, 1)`)
	s.coupon(1, 1, 1, 20, "A-1")
	s.coupon(2, 1, 2, 10)
	rep, err := audit.Run(s.ctx, s.db, s.m, "writeoff-table", audit.Config{})
	require.NoError(t, err)
	assert.True(t, rep.Clean(), "%+v", rep.Kinds)
	assert.Equal(t, int64(2), rep.Totals.Issued)
}

// TestAuditRecord: -record writes the findings named as found_at_attach
// findings; a second run sees them once more, duplicates none, and one
// acknowledged stays acknowledged.
func TestAuditRecord(t *testing.T) {
	s := newShop(t, "writeoff-table")
	want := s.seed()
	rep, err := audit.Run(s.ctx, s.db, s.m, "writeoff-table", audit.Config{})
	require.NoError(t, err)
	n, err := audit.Record(s.ctx, s.db, rep, time.Now())
	require.NoError(t, err)
	var named int
	for _, subj := range want {
		named += len(subj)
	}
	assert.Equal(t, named, n)
	count := func(q string, args ...any) int64 { return s.int(q, args...) }
	assert.Equal(t, int64(named), count(`SELECT COUNT(*) FROM finding WHERE kind LIKE 'found_at_attach/%' AND state = 'open'`))
	assert.Equal(t, int64(1), count(`SELECT COUNT(*) FROM finding WHERE kind = 'found_at_attach/double_spend' AND subject = 'coupon 30'`))

	fs, err := inventory.ListFindings(s.ctx, s.db, inventory.FindingsQuery{Kind: reconcile.FoundAtAttachKind + string(audit.DoubleSpend)})
	require.NoError(t, err)
	require.Len(t, fs, 1)
	_, err = inventory.AckFinding(s.ctx, s.db, fs[0].Fingerprint, "ops", "known since 2019, finance wrote it off", "")
	require.NoError(t, err)

	rep, err = audit.Run(s.ctx, s.db, s.m, "writeoff-table", audit.Config{})
	require.NoError(t, err)
	_, err = audit.Record(s.ctx, s.db, rep, time.Now())
	require.NoError(t, err)
	assert.Equal(t, int64(named), count(`SELECT COUNT(*) FROM finding WHERE kind LIKE 'found_at_attach/%'`), "no finding twice")
	assert.Equal(t, int64(named), count(`SELECT COUNT(*) FROM finding WHERE kind LIKE 'found_at_attach/%' AND times_seen = 2`))
	f, err := inventory.GetFinding(s.ctx, s.db, fs[0].Fingerprint)
	require.NoError(t, err)
	assert.Equal(t, "acknowledged", f.State, "found again as it was, an acknowledged finding stays acknowledged")
}

// TestAuditOrdersWriteOff: the orders-writeoff layout (the orders table is
// the write-off table; integer times; a refund or a cancel closes the
// order): a use whose only order was refunded is a use without evidence,
// two open orders of one coupon a double spend; an order without a coupon
// (coupon_id 0) and a refunded order of a coupon given back are nothing.
func TestAuditOrdersWriteOff(t *testing.T) {
	s := newShop(t, "orders-writeoff")
	s.exec(`INSERT INTO store_coupon_issue (id, coupon_title, end_time, total_count, remain_count) VALUES
		(1, 'spring', UNIX_TIMESTAMP() + 86400, 100, 96)`)
	s.exec(`INSERT INTO store_coupon_user (id, cid, uid, status, end_time) VALUES
		(1, 1, 11, 1, UNIX_TIMESTAMP() + 86400), (2, 1, 12, 1, UNIX_TIMESTAMP() + 86400),
		(3, 1, 13, 0, UNIX_TIMESTAMP() + 86400), (4, 1, 14, 1, UNIX_TIMESTAMP() + 86400)`)
	s.exec(`INSERT INTO store_order (order_id, uid, coupon_id, refund_status, is_del) VALUES
		('A', 11, 1, 0, 0), ('B', 12, 2, 2, 0), ('C', 13, 3, 2, 0), ('D1', 14, 4, 0, 0), ('D2', 14, 4, 0, 0), ('E', 15, 0, 0, 0)`)
	_, found := s.run()
	assert.Equal(t, map[audit.Kind][]string{
		audit.UsedWithoutRedemption: {"coupon 2"},
		audit.DoubleSpend:           {"coupon 4"},
	}, found)
}
