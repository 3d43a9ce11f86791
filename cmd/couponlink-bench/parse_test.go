package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/couponlink/couponlink/canal"
)

func TestParseStatCPU(t *testing.T) {
	for _, tc := range []struct {
		name, stat string
		want       time.Duration
	}{
		{"plain", "1234 (couponlink) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 9", 3 * time.Second},
		{"command with spaces and parens", "99 (go (x) y) R 1 2 3 4 5 6 7 8 9 10 7 3 0", 100 * time.Millisecond},
		{"short", "1 (x) S 1 2 3", 0},
		{"no command", "garbage", 0},
	} {
		if got := parseStatCPU(tc.stat); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	if procCPU(os.Getpid()) < 0 || procCPU(-1) != 0 {
		t.Error("procCPU of this process, of none")
	}
}

func TestParseMem(t *testing.T) {
	rss, hwm, err := parseMem("Name:\tcouponlink\nVmHWM:\t  20480 kB\nVmRSS:\t   10240 kB\nThreads:\t9\n")
	if err != nil || rss != 10<<20 || hwm != 20<<20 {
		t.Errorf("rss %d, hwm %d, %v", rss, hwm, err)
	}
	if _, _, err := parseMem("Name:\tzombie\nVmHWM:\t1 kB\n"); err == nil {
		t.Error("no VmRSS: no error")
	}
	if rss, _, err := procMem(os.Getpid()); err != nil || rss <= 0 {
		t.Errorf("procMem of this process: %d, %v", rss, err)
	}
}

func TestParseStartup(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name, line string
		took       time.Duration
		mode       string
	}{
		{"gtid", `time=2026-01-02T03:04:06.5Z level=INFO msg="tailing the binlog" from="gtid 0-1-5"`, 1500 * time.Millisecond, "gtid"},
		{"file", `time=2026-01-02T03:04:05.25Z level=INFO msg="tailing the binlog" mode=file/offset`, 250 * time.Millisecond, "file"},
		{"before t0", `time=2026-01-02T03:04:04Z level=INFO msg="tailing the binlog"`, 0, "gtid"},
		{"no line", "", 0, "gtid"},
		{"no time", `level=INFO msg="tailing the binlog" mode=file/offset`, 0, "file"},
	} {
		took, mode := parseStartup(tc.line, t0)
		if took != tc.took || mode != tc.mode {
			t.Errorf("%s: %v %s, want %v %s", tc.name, took, mode, tc.took, tc.mode)
		}
	}
}

func TestParseGroupStats(t *testing.T) {
	metrics := `# HELP couponlink_api_claim_group_size requests per group
couponlink_api_claim_group_size_bucket{le="1"} 3
couponlink_api_claim_group_size_sum 120
couponlink_api_claim_group_size_count 40
couponlink_api_redemption_group_size_sum 9
couponlink_api_redemption_group_size_count 3
`
	if g, r := parseGroupStats(metrics, "claim"); g != 40 || r != 120 {
		t.Errorf("claim: %v groups, %v requests", g, r)
	}
	if g, r := parseGroupStats(metrics, "redemption"); g != 3 || r != 9 {
		t.Errorf("redemption: %v groups, %v requests", g, r)
	}
	if g, r := parseGroupStats("", "claim"); g != 0 || r != 0 {
		t.Errorf("no metrics: %v, %v", g, r)
	}
}

func TestStmtKind(t *testing.T) {
	for q, want := range map[string]string{
		"INSERT INTO inventory_counter (a) VALUES (1)":           "INSERT inventory_counter",
		"update cdc_checkpoint set x = 1":                        "UPDATE cdc_checkpoint",
		"SELECT a FROM `user_coupon` WHERE id = ?":               "SELECT user_coupon",
		"DELETE FROM cdc_anomaly":                                "DELETE cdc_anomaly",
		"SET SESSION sql_log_bin = 0":                            "SET",
		"   ":                                                    "?",
		"SELECT 1":                                               "SELECT",
		"INSERT IGNORE INTO t SELECT * FROM u":                   "INSERT t",
		"UPDATE channel_quota q SET claimed = (SELECT 1 FROM f)": "UPDATE channel_quota",
		"INSERT INTO inventory_counter (a) VALUES (1);\nUPDATE coupon_template t JOIN (SELECT 1) v;\nUPDATE cdc_checkpoint SET a = 1": "INSERT inventory_counter + UPDATE coupon_template + UPDATE cdc_checkpoint",
	} {
		if got := stmtKind(q); got != want {
			t.Errorf("stmtKind(%q) = %q, want %q", q, got, want)
		}
	}
}

func TestSQLTimerTake(t *testing.T) {
	var st sqlTimer
	if st.take() != "" {
		t.Error("an empty timer says something")
	}
	now := time.Now()
	st.note("COMMIT", now.Add(-time.Millisecond))
	st.note("UPDATE cdc_checkpoint", now.Add(-10*time.Millisecond))
	st.note("COMMIT", now.Add(-time.Millisecond))
	got := st.take()
	re := regexp.MustCompile(`^UPDATE cdc_checkpoint 1× p50 [0-9.]+ ms p99 [0-9.]+ ms \(total [0-9.]+ s\); COMMIT 2× p50 [0-9.]+ ms p99 [0-9.]+ ms \(total [0-9.]+ s\)$`)
	if !re.MatchString(got) {
		t.Errorf("take: %q (want the slowest kind first)", got)
	}
	if st.take() != "" {
		t.Error("take did not reset the timer")
	}
}

func TestPerOp(t *testing.T) {
	before := map[string]int64{"Com_stmt_prepare": 10, "Com_stmt_execute": 10, "Com_commit": 5, "Com_select": 7}
	after := map[string]int64{"Com_stmt_prepare": 20, "Com_stmt_execute": 30, "Com_commit": 10, "Com_select": 7, "Com_insert": 4}
	if got := perOp(before, after, 4); got != "prepare 2.5, execute 5.0, insert 1.0, commit 1.2" {
		t.Errorf("perOp: %q", got)
	}
	if perOp(before, after, 0) != "n/a" || perOp(nil, after, 3) != "n/a" {
		t.Error("perOp without operations or counters")
	}
}

func TestBacklogShapes(t *testing.T) {
	// 3 in 5 insert; each expire takes the oldest insert not yet expired.
	var log []string
	i := 0
	next := func() (int, bool) { i++; return i - 1, i <= 10 }
	err := mixWrites(next, func(n int) (int64, error) {
		log = append(log, "i"+string(rune('0'+n)))
		return int64(100 + n), nil
	}, func(id int64) error {
		log = append(log, "e"+string(rune('0'+id-100)))
		return nil
	})
	if got := strings.Join(log, " "); err != nil || got != "i0 i1 i2 e0 e1 i5 i6 i7 e2 e5" {
		t.Errorf("mixWrites: %q, %v", got, err)
	}
	q := insertCoupons(7, "bb", 3)
	want := "INSERT INTO user_coupon (template_id, user_id, channel, status, claimed_at, expires_at) VALUES " +
		"(7, 'bb0', 'c00', 1, NOW(6), NOW(6) + INTERVAL 90 DAY), (7, 'bb1', 'c01', 1, NOW(6), NOW(6) + INTERVAL 90 DAY), " +
		"(7, 'bb2', 'c02', 1, NOW(6), NOW(6) + INTERVAL 90 DAY)"
	if q != want {
		t.Errorf("insertCoupons:\n%s\nwant\n%s", q, want)
	}
	if channel(41) != "c01" || channel(0) != "c00" {
		t.Error("channel")
	}
	p := canal.Position{File: "mysql-bin.000002", Pos: 400, GTID: "0-1-9"}
	if modeStart(p, "gtid") != (canal.Position{GTID: "0-1-9"}) || modeStart(p, "file") != (canal.Position{File: "mysql-bin.000002", Pos: 400}) {
		t.Error("modeStart")
	}
	if asInt64(int64(5)) != 5 || asInt64(uint64(6)) != 6 || asInt64(int32(7)) != 7 || asInt64(uint32(8)) != 8 || asInt64("9") != 0 {
		t.Error("asInt64")
	}
}

func TestShopMapping(t *testing.T) {
	dir := t.TempDir()
	path, err := writeShopMapping(dir, "m.yaml", "shop_a", 4, []shopSource{{name: "a", dsn: "root@tcp(127.0.0.1:1)/cl"},
		{name: "b", dsn: "root@tcp(127.0.0.1:2)/cl", schema: "shop_b"}})
	if err != nil || path != filepath.Join(dir, "m.yaml") {
		t.Fatal(path, err)
	}
	b, _ := os.ReadFile(path)
	want := `user_coupon: {table: "shop_a.user_coupon_{0..3}", id: id, template: tpl_id, status: state, user: uid}
status: {AVAILABLE: [0], USED: [1], EXPIRED: [2]}
redemption_evidence: none
template: {table: shop_a.coupon_tpl, id: id, total_quota: total_quota}
default_channel: legacy
sources:
  - {name: a, dsn: "root@tcp(127.0.0.1:1)/cl"}
  - {name: b, dsn: "root@tcp(127.0.0.1:2)/cl", user_coupon: "shop_b.user_coupon_{0..3}", template: shop_b.coupon_tpl}
`
	if string(b) != want {
		t.Errorf("mapping:\n%s\nwant\n%s", b, want)
	}
	inc := shopInclude("shop.x")
	if len(inc) != 2 || !regexp.MustCompile(inc[0]).MatchString("shop.x.user_coupon_12") || regexp.MustCompile(inc[0]).MatchString("shopXx.user_coupon_1") ||
		!regexp.MustCompile(inc[1]).MatchString("shop.x.coupon_tpl") {
		t.Errorf("shopInclude %q", inc)
	}
	if !regexp.MustCompile(sourceRegex()).MatchString("couponlink.user_coupon") {
		t.Errorf("sourceRegex %q does not match couponlink.user_coupon", sourceRegex())
	}
}

func TestQuietLogger(t *testing.T) {
	var buf bytes.Buffer
	log := quietLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))).With("component", "canal")
	log.Info("dropped: below warn")
	log.Error("canal start sync binlog err", "err", "Sync was closed")
	log.Error("canal start sync binlog err", "err", "sync is being closed")
	log.Warn("kept warning")
	log.Error("canal start sync binlog err", "err", "connection refused")
	got := buf.String()
	if strings.Contains(got, "dropped") || strings.Contains(got, "closed") || !strings.Contains(got, "kept warning") ||
		!strings.Contains(got, "connection refused") || !strings.Contains(got, "component=canal") {
		t.Errorf("quiet logger wrote:\n%s", got)
	}
}

func TestParseTags(t *testing.T) {
	out := " part: Total 2.09s of 5.48s (38.14%)\n       1.45s (26.46%): cdc\n       640ms (11.68%): noop\n\n other: Total 1s\n       1s (100%): x\n"
	got := parseTags(out, "part")
	if len(got) != 2 || got["cdc"] != 1450*time.Millisecond || got["noop"] != 640*time.Millisecond {
		t.Errorf("parseTags = %v", got)
	}
}
