package mysql_test

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/inventory"
	"github.com/couponlink/couponlink/quota"
	"github.com/couponlink/couponlink/reconcile"
	"github.com/couponlink/couponlink/sink"
)

// users are the grant file's user names, and the test's unique ones.
type users struct{ cdc, api, reconcile string }

// statements reads grants.sql, substitutes the database, user names and
// passwords, and splits it into statements.
func statements(t *testing.T, dbName string, u users, password string) []string {
	t.Helper()
	raw, err := os.ReadFile("grants.sql")
	require.NoError(t, err)
	var lines []string
	for _, l := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "--") {
			continue
		}
		lines = append(lines, l)
	}
	r := strings.NewReplacer(
		"couponlink_db", dbName,
		"'couponlink_cdc'", "'"+u.cdc+"'",
		"'couponlink_api'", "'"+u.api+"'",
		"'couponlink_reconcile'", "'"+u.reconcile+"'",
		"__CDC_PASSWORD__", password,
		"__API_PASSWORD__", password,
		"__RECONCILE_PASSWORD__", password,
	)
	var out []string
	for _, s := range strings.Split(r.Replace(strings.Join(lines, "\n")), ";") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// as returns dsn with another user, and a pool on it.
func as(t *testing.T, dsn, user, password string) (*sql.DB, string) {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	require.NoError(t, err)
	cfg.User, cfg.Passwd = user, password
	d := cfg.FormatDSN()
	db, err := sql.Open("mysql", d)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	require.NoError(t, db.Ping(), "connect as %s", user)
	return db, d
}

func requireDenied(t *testing.T, err error, what string) {
	t.Helper()
	require.Error(t, err, "%s must be refused", what)
	var me *mysql.MySQLError
	require.True(t, errors.As(err, &me), "%s: %v is not a server error", what, err)
	// 1142 table, 1143 column, 1044 database, 1227 privilege access denied
	require.Contains(t, []uint16{1142, 1143, 1044, 1227}, me.Number, "%s: want access denied, got %v", what, err)
}

// The grants are enough for the cdc, the API's write path and the
// reconciler, and no more: counters equal GROUP BY after the cdc ran as
// couponlink_cdc on coupons written as couponlink_api; a drift is fixed by
// couponlink_reconcile; the cdc cannot write the source tables nor drop
// anything, the API cannot touch the counters.
func TestGrantsAreEnoughAndNoMore(t *testing.T) {
	ctx := context.Background()
	root, dsn := testenv.MySQL(t)
	cfg, err := mysql.ParseDSN(dsn)
	require.NoError(t, err)
	suffix := strings.TrimSuffix(testenv.KeyPrefix(t), ":")
	u := users{cdc: "cl_cdc_" + suffix, api: "cl_api_" + suffix, reconcile: "cl_rec_" + suffix}
	const password = "grants-test-pw"
	t.Cleanup(func() { // registered after the database's: runs before it is dropped
		for _, name := range []string{u.cdc, u.api, u.reconcile} {
			if _, err := root.Exec("DROP USER IF EXISTS '" + name + "'@'%'"); err != nil {
				t.Errorf("drop user %s: %v", name, err)
			}
		}
	})
	for _, s := range statements(t, cfg.DBName, u, password) {
		_, err := root.ExecContext(ctx, s)
		require.NoError(t, err, "apply grant: %s", s)
	}

	apiDB, _ := as(t, dsn, u.api, password)
	cdcDB, cdcDSN := as(t, dsn, u.cdc, password)
	recDB, recDSN := as(t, dsn, u.reconcile, password)

	// the API: templates (one with releases) and coupons, as couponlink_api
	store, err := coupon.New(coupon.Config{DB: apiDB, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	tpl, err := store.CreateTemplate(ctx, coupon.NewTemplate{Name: "grants", TotalQuota: 30,
		Channels: map[string]int64{"app": 20, "web": 10}, ValidSeconds: 3600, PerUserLimit: 1000})
	require.NoError(t, err)

	// an operator's rebalancing policy, set as couponlink_api: web (all
	// redeemed) takes unclaimed quota from app (a third redeemed)
	auto, zero, one, low, high := quota.ModeAuto, int64(0), int64(1), 0.5, 0.9
	_, err = quota.SetPolicy(ctx, apiDB, tpl.ID, quota.Override{Mode: &auto, MinAgeSeconds: &zero, MinClaims: &one, Low: &low, High: &high},
		"ops", "grants test", quota.SourceAPI, "")
	require.NoError(t, err)

	log := &logs{}
	// the cdc as couponlink_cdc, in-process as `couponlink cdc` runs it
	rdb := testenv.Redis(t)
	s, err := sink.New(sink.Config{DB: cdcDB, Redis: rdb, Keys: inventory.Keys{Prefix: testenv.KeyPrefix(t)},
		Logger: log.logger(), Registerer: prometheus.NewRegistry(), RedemptionGrace: 2 * time.Second,
		Webhooks: true, RebalanceEvery: 50 * time.Millisecond})
	require.NoError(t, err)
	tc, err := canal.ConfigFromDSN(cdcDSN)
	require.NoError(t, err)
	tc.BatchWait = 5 * time.Millisecond
	tc.HeartbeatPeriod = 200 * time.Millisecond
	d := &sink.Daemon{Tailer: tc, Sink: s, RetryWait: 100 * time.Millisecond}
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(cctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err, "cdc as %s", u.cdc)
		case <-time.After(30 * time.Second):
			t.Error("cdc did not stop within 30 s")
		}
	})

	var ids []int64
	for i, ch := range []string{"app", "app", "app", "web", "web", "app"} {
		c, err := store.Claim(ctx, coupon.ClaimRequest{TemplateID: tpl.ID, UserID: "u" + string(rune('a'+i)), Channel: ch,
			RequestID: "r" + string(rune('a'+i))})
		require.NoError(t, err)
		ids = append(ids, c.UserCouponID)
	}
	for _, id := range []int64{ids[1], ids[2], ids[4]} {
		_, err = store.Redeem(ctx, coupon.RedeemRequest{UserCouponID: id, OrderID: "o" + string(rune('0'+id%10))})
		require.NoError(t, err)
	}
	// a refund that recycles the slot and a void: both releases the cdc writes
	_, err = store.Refund(ctx, coupon.RefundRequest{UserCouponID: ids[2], OrderID: "o" + string(rune('0'+ids[2]%10)), Mode: "recycle"})
	require.NoError(t, err)
	_, err = store.Void(ctx, coupon.VoidRequest{UserCouponIDs: []int64{ids[3]}, Reason: "grants test", Operator: "ops", RequestID: "v1"})
	require.NoError(t, err)

	waitCheckpoint(t, root, log)
	require.Equal(t, cdctest.Truth(t, root), cdctest.Counters(t, root), "counters written as %s differ from GROUP BY over user_coupon", u.cdc)
	var releases int
	require.NoError(t, root.QueryRow(`SELECT COUNT(*) FROM inventory_flow WHERE kind = 'release'`).Scan(&releases))
	require.Equal(t, 2, releases, "the cdc's release rows")
	// app: 4 claims, 1 released, 1 used (rate 0.33), 17 claimable, gives 8; web: rate 1.0
	deadline := time.Now().Add(30 * time.Second)
	for quotas(t, root, tpl.ID) != [2]int64{12, 18} {
		require.True(t, time.Now().Before(deadline), "no quota transfer by %s; quotas %v; the last errors logged:\n%s", u.cdc, quotas(t, root, tpl.ID), log.errors())
		time.Sleep(20 * time.Millisecond)
	}
	var events int
	require.NoError(t, root.QueryRow(`SELECT COUNT(*) FROM webhook_outbox WHERE event IN ('quota.released', 'quota.transferred')`).Scan(&events))
	require.Equal(t, 3, events, "webhook events written as %s: two releases (app, web) and one transfer", u.cdc)
	select {
	case err := <-done:
		t.Fatalf("the cdc stopped: %v", err)
	default:
	}

	// the reconciler, as couponlink_reconcile, fixes a drift of one in the
	// counters and one in the template's cached counts
	_, err = root.Exec(`UPDATE inventory_counter SET used = used + 1 WHERE template_id = ? AND channel = 'app'`, tpl.ID)
	require.NoError(t, err)
	_, err = root.Exec(`UPDATE coupon_template SET expired_count = expired_count + 1 WHERE id = ?`, tpl.ID)
	require.NoError(t, err)
	binlog, err := canal.ConfigFromDSN(recDSN)
	require.NoError(t, err)
	r, err := reconcile.New(reconcile.Config{DB: recDB, QuietWindow: 100 * time.Millisecond, CatchUpWait: 30 * time.Second,
		AbsThreshold: 100, RelThreshold: 0.05, Logger: log.logger(), Registerer: prometheus.NewRegistry(), Binlog: binlog})
	require.NoError(t, err)
	rep, err := r.Pass(ctx)
	require.NoError(t, err, "reconcile pass as %s; the last errors logged:\n%s", u.reconcile, log.errors())
	require.Equal(t, "auto_fixed", rep.Status, rep.Summary())
	waitCheckpoint(t, root, log)
	require.Equal(t, cdctest.Truth(t, root), cdctest.Counters(t, root), "counters after the reconciler's fix")
	var expired int64
	require.NoError(t, root.QueryRow(`SELECT expired_count FROM coupon_template WHERE id = ?`, tpl.ID).Scan(&expired))
	require.Zero(t, expired, "the template's cached expired_count after the reconciler's fix")
	var corrections int
	require.NoError(t, root.QueryRow(`SELECT COUNT(*) FROM correction_log WHERE task_id = ?`, rep.TaskID).Scan(&corrections))
	require.GreaterOrEqual(t, corrections, 2, "the reconciler's corrections are recorded")
	var corrected int
	require.NoError(t, root.QueryRow(`SELECT COUNT(*) FROM finding WHERE source = 'reconcile' AND kind LIKE 'corrected/%'`).Scan(&corrected))
	require.GreaterOrEqual(t, corrected, 2, "the reconciler's corrections are findings, written as %s", u.reconcile)

	// an illegal transition by hand (EXPIRED -> AVAILABLE): the cdc records
	// the anomaly and its finding as couponlink_cdc; a person acknowledges
	// it as couponlink_api
	for _, status := range []int{3, 1} {
		_, err = root.Exec(`UPDATE user_coupon SET status = ? WHERE id = ?`, status, ids[0])
		require.NoError(t, err)
	}
	waitCheckpoint(t, root, log)
	var fp string
	require.NoError(t, root.QueryRow(`SELECT fingerprint FROM finding WHERE source = 'cdc' AND kind = 'illegal_transition'`).Scan(&fp),
		"the cdc's finding, written as %s; the last errors logged:\n%s", u.cdc, log.errors())
	f, err := inventory.AckFinding(ctx, apiDB, fp, "ops", "grants test", "")
	require.NoError(t, err, "acknowledge as %s", u.api)
	require.Equal(t, "acknowledged", f.State)
	require.NoError(t, inventory.RecordCDCProcess(ctx, cdcDB, "grants-cdc", "default", "http://127.0.0.1:9464/metrics"),
		"the cdc's metrics address, as %s", u.cdc)

	// and no more
	_, err = cdcDB.Exec(`UPDATE user_coupon SET status = 2 WHERE id = ?`, ids[0])
	requireDenied(t, err, "cdc UPDATE user_coupon")
	_, err = cdcDB.Exec(`INSERT INTO user_coupon (template_id, user_id, channel, status) VALUES (?, 'x', 'app', 1)`, tpl.ID)
	requireDenied(t, err, "cdc INSERT user_coupon")
	_, err = cdcDB.Exec(`DELETE FROM redemption_log`)
	requireDenied(t, err, "cdc DELETE redemption_log")
	_, err = cdcDB.Exec(`UPDATE coupon_template SET total_quota = 1 WHERE id = ?`, tpl.ID)
	requireDenied(t, err, "cdc UPDATE coupon_template.total_quota")
	_, err = cdcDB.Exec(`UPDATE channel_quota SET channel = 'x' WHERE template_id = ?`, tpl.ID)
	requireDenied(t, err, "cdc UPDATE channel_quota.channel")
	_, err = cdcDB.Exec(`DELETE FROM cdc_checkpoint`)
	requireDenied(t, err, "cdc DELETE cdc_checkpoint")
	_, err = cdcDB.Exec(`DROP TABLE cdc_anomaly`)
	requireDenied(t, err, "cdc DROP TABLE")
	_, err = cdcDB.Exec(`DROP DATABASE ` + "`" + cfg.DBName + "`")
	requireDenied(t, err, "cdc DROP DATABASE")
	_, err = cdcDB.Exec(`CREATE TABLE x (id INT)`)
	requireDenied(t, err, "cdc CREATE TABLE")
	_, err = apiDB.Exec(`UPDATE inventory_counter SET used = 0`)
	requireDenied(t, err, "api UPDATE inventory_counter")
	_, err = apiDB.Exec(`DELETE FROM user_coupon`)
	requireDenied(t, err, "api DELETE user_coupon")
	_, err = apiDB.Exec(`ALTER TABLE user_coupon ADD COLUMN x INT`)
	requireDenied(t, err, "api ALTER TABLE")
	_, err = recDB.Exec(`UPDATE user_coupon SET status = 2 WHERE id = ?`, ids[0])
	requireDenied(t, err, "reconcile UPDATE user_coupon")
	_, err = recDB.Exec(`DROP TABLE reconcile_task`)
	requireDenied(t, err, "reconcile DROP TABLE")
}

// logs keeps what the cdc and the reconciler log, so that a missing grant
// (the cdc retries forever) shows up in the failure message.
type logs struct{ testenv.Output }

func (l *logs) Write(p []byte) (int, error) {
	if os.Getenv("COUPONLINK_TEST_VERBOSE") != "" {
		_, _ = os.Stderr.Write(p)
	}
	return l.Output.Write(p)
}

// errors returns the last few ERROR lines.
func (l *logs) errors() string {
	var out []string
	for _, line := range strings.Split(l.String(), "\n") {
		if strings.Contains(line, "level=ERROR") {
			out = append(out, line)
		}
	}
	if len(out) > 3 {
		out = out[len(out)-3:]
	}
	return strings.Join(out, "\n")
}

func (l *logs) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// waitCheckpoint waits (twice: releases are applied in a batch of their
// own) until the cdc's checkpoint reaches the server's binlog end.
func waitCheckpoint(t *testing.T, db *sql.DB, log *logs) {
	t.Helper()
	ctx := context.Background()
	for range 2 {
		target, err := canal.CurrentPosition(ctx, db)
		require.NoError(t, err)
		deadline := time.Now().Add(60 * time.Second)
		for {
			cp, found, err := inventory.LoadCheckpoint(ctx, db, "default")
			require.NoError(t, err)
			if found && cp.Pos.File != "" && cp.Pos.Compare(target) >= 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("checkpoint %s did not reach %s within 60 s; the last errors logged:\n%s", cp.Pos, target, log.errors())
			}
			time.Sleep(10 * time.Millisecond) // polling a condition
		}
	}
}

// quotas reads the quota of the template's app and web buckets.
func quotas(t *testing.T, db *sql.DB, tpl int64) [2]int64 {
	t.Helper()
	var q [2]int64
	require.NoError(t, db.QueryRow(`SELECT SUM(IF(channel = 'app', quota, 0)), SUM(IF(channel = 'web', quota, 0)) FROM channel_quota WHERE template_id = ?`, tpl).Scan(&q[0], &q[1]))
	return q
}
