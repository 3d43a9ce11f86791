package sink_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/internal/cdcenv"
	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/inventory"
	"github.com/couponlink/couponlink/sink"
)

// mappingFile writes the legacy mapping for `couponlink cdc -mapping`.
func (l *legacyEnv) mappingFile() string {
	path := filepath.Join(l.T.TempDir(), "legacy.yaml")
	require.NoError(l.T, os.WriteFile(path, []byte(strings.ReplaceAll(l.yaml, "LEGACY", l.schema)), 0o600))
	return path
}

func (l *legacyEnv) exec(q string, args ...any) {
	l.T.Helper()
	_, err := l.DB.Exec(q, args...)
	require.NoError(l.T, err, q)
}

// redeem moves a legacy coupon to USED with its t_writeoff row and dups
// more rows of the same order, all in one transaction (sameTx) or the
// extra rows each in a transaction of its own after it.
func (l *legacyEnv) redeem(id int64, order string, dups int, sameTx bool) error {
	tx, err := l.DB.Begin()
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.Exec(`UPDATE `+l.tq("t_user_coupon")+` SET state = 1, order_no = ? WHERE id = ?`, order, id); err != nil {
		return err
	}
	rows := 1
	if sameTx {
		rows += dups
	}
	for range rows {
		if _, err := tx.Exec(`INSERT INTO `+l.tq("t_writeoff")+` (coupon_id, order_no) VALUES (?, ?)`, id, order); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil || sameTx {
		return err
	}
	for range dups {
		if _, err := l.DB.Exec(`INSERT INTO `+l.tq("t_writeoff")+` (coupon_id, order_no) VALUES (?, ?)`, id, order); err != nil {
			return err
		}
	}
	return nil
}

// The duplicate_redemption check of a legacy write-off table without a
// unique key counts exactly the rows that repeat an (order, coupon), from
// the binlog, whatever their visibility when the cdc reads them: extra
// rows in the transaction of the first, in the same batch (a backlog
// applied after a stop), in later batches, around kill -9 of `couponlink
// cdc`, rows deleted and inserted again, duplicates already in the table
// at the first start and those a --rebuild skips over. Each anomaly names
// its coupon's template and channel, which the write-off table lacks.
func TestLegacyDuplicateRedemptionsExact(t *testing.T) {
	l := newLegacyEnv(t)
	l.exec(`INSERT INTO ` + l.tq("t_coupon_tpl") + ` (id, budget) VALUES (1, 100000), (2, 100000)`)
	var vals []string
	for i := range 800 {
		vals = append(vals, fmt.Sprintf("(%d, %s, 0, 'u%d')", 1+i%2, []string{"'app'", "'h5'", "NULL"}[i%3], i))
	}
	l.exec(`INSERT INTO ` + l.tq("t_user_coupon") + ` (tpl_id, source, state, uid) VALUES ` + strings.Join(vals, ", "))
	next := int64(1) // coupon ids are 1..800
	coupon := func() int64 { next++; return next - 1 }
	want := 0
	redeem := func(dups int, sameTx bool) {
		id := coupon()
		require.NoError(t, l.redeem(id, fmt.Sprint("o", id), dups, sameTx))
		want += dups
	}
	// before the first start: the bootstrap counts these
	redeem(2, true)
	redeem(0, true)

	runner := newCDCRunner(t, l.env, testenv.RedisAddr(t))
	runner.args = append(runner.args, "-mapping", l.mappingFile())
	p := runner.start()
	l.WaitCheckpoint()
	require.Equal(t, map[string]int{inventory.AnomalyDuplicateRedemption: 2}, l.anomalies(), "duplicates at the first start")

	for i := range 20 { // in the transaction of the first row, or just after it
		redeem(1+i%2, i%3 != 0)
	}
	for range 10 { // in a later batch
		id := coupon()
		require.NoError(t, l.redeem(id, fmt.Sprint("o", id), 0, true))
		l.WaitCheckpoint()
		l.exec(`INSERT INTO `+l.tq("t_writeoff")+` (coupon_id, order_no) VALUES (?, ?)`, id, fmt.Sprint("o", id))
		want++
	}

	// a backlog while no cdc runs: many transactions per batch
	_ = p.signal(syscall.SIGKILL)
	for i := range 40 {
		redeem(i%3, i%2 == 0)
	}
	again, gone := coupon(), coupon()
	require.NoError(t, l.redeem(again, "oa", 1, false)) // a duplicate (+1), deleted, inserted again (+1)
	l.exec(`DELETE FROM `+l.tq("t_writeoff")+` WHERE coupon_id = ? ORDER BY id DESC LIMIT 1`, again)
	l.exec(`INSERT INTO `+l.tq("t_writeoff")+` (coupon_id, order_no) VALUES (?, 'oa')`, again)
	require.NoError(t, l.redeem(gone, "og", 0, true)) // its only row deleted, then inserted again: no duplicate
	l.exec(`DELETE FROM `+l.tq("t_writeoff")+` WHERE coupon_id = ?`, gone)
	l.exec(`INSERT INTO `+l.tq("t_writeoff")+` (coupon_id, order_no) VALUES (?, 'og')`, gone)
	want += 2
	p = runner.start()

	// writers go on while the cdc is killed at random moments
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	ids := make([]int64, 600)
	for i := range ids {
		ids[i] = coupon()
	}
	rng := rand.New(rand.NewPCG(rand.Uint64(), 4))
	dups := make([]int, len(ids))
	for i := range dups {
		dups[i] = rng.IntN(3)
		want += dups[i]
	}
	var left atomic.Int64
	left.Store(int64(len(ids)))
	for w := range 3 {
		wg.Go(func() {
			for i := w; i < len(ids); i += 3 {
				if err := l.redeem(ids[i], fmt.Sprint("o", ids[i]), dups[i], i%2 == 0); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
				left.Add(-1)
			}
		})
	}
	p, kills := runner.killWhileWriting(l.env, p, &left, rng)
	t.Logf("%d kills while the writers ran", kills)
	require.Positive(t, kills, "no kill while the writers ran: the test proves little")
	wg.Wait()
	require.Empty(t, errs)
	l.WaitCheckpoint()
	cdctest.WaitFor(t, 30*time.Second, "no pending redemption checks", func() bool { return l.pendingChecks() == 0 })
	require.Equal(t, map[string]int{inventory.AnomalyDuplicateRedemption: want}, l.anomalies(), "duplicates counted exactly, across kills")

	// a rebuild counts the duplicates of the binlog it skips, and no other
	require.NoError(t, p.signal(syscall.SIGTERM))
	l.exec(`INSERT INTO `+l.tq("t_writeoff")+` (coupon_id, order_no) VALUES (?, ?)`, ids[0], fmt.Sprint("o", ids[0]))
	want++
	args := runner.args
	runner.args = append(append([]string{}, args...), "-rebuild")
	p = runner.start()
	runner.args = args
	l.WaitCheckpoint()
	require.Equal(t, map[string]int{inventory.AnomalyDuplicateRedemption: want}, l.anomalies(), "after a --rebuild")

	var unplaced int
	require.NoError(t, l.DB.QueryRow(`SELECT COUNT(*) FROM cdc_anomaly a LEFT JOIN `+l.tq("t_user_coupon")+` c ON c.id = a.user_coupon_id
		WHERE a.kind = ? AND (c.id IS NULL OR a.template_id <> c.tpl_id OR a.channel <> COALESCE(c.source, 'legacy'))`,
		inventory.AnomalyDuplicateRedemption).Scan(&unplaced))
	require.Zero(t, unplaced, "duplicate_redemption anomalies without their coupon's template and channel")
	require.EqualValues(t, want, l.checkpoint().Anomalies)
	require.NoError(t, p.signal(syscall.SIGTERM))
}

// A legacy template already over its budget at the cdc's first start is
// flagged by the bootstrap, once; a restart does not flag it again, a
// --rebuild does (once per bootstrap).
func TestOverIssueFoundAtBootstrap(t *testing.T) {
	l := newLegacyEnv(t)
	l.exec(`INSERT INTO ` + l.tq("t_coupon_tpl") + ` (id, budget) VALUES (1, 10), (2, 100)`)
	var vals []string
	for i := range 30 {
		vals = append(vals, fmt.Sprintf("(%d, %s, %d, 'u%d')", 1+i%2, []string{"'app'", "NULL"}[i%2], []int{0, 1, 2, 3}[i%4], i))
	}
	l.exec(`INSERT INTO ` + l.tq("t_user_coupon") + ` (tpl_id, source, state, uid) VALUES ` + strings.Join(vals, ", "))
	start := func(rebuild bool) *cdcenv.CDC {
		c := l.StartCDC(l.mapping(), func(_ *sink.Config, d *sink.Daemon) { d.Rebuild = rebuild })
		l.WaitCheckpoint()
		return c
	}
	c := start(false)
	require.Equal(t, map[string]int{inventory.AnomalyOverIssue: 1}, l.anomalies(), "template 1: 15 coupons over a budget of 10")
	var tpl int64
	var detail string
	require.NoError(t, l.DB.QueryRow(`SELECT template_id, detail FROM cdc_anomaly`).Scan(&tpl, &detail))
	require.EqualValues(t, 1, tpl)
	require.Contains(t, detail, "snapshot")
	v, _ := cdctest.Metric(t, c.Reg, "couponlink_anomalies_total", map[string]string{"kind": inventory.AnomalyOverIssue})
	require.EqualValues(t, 1, v)
	// the state gauge the alert reads: an anomaly counted before the first
	// scrape is no increase() to Prometheus, a bucket over quota is
	over, _ := cdctest.Metric(t, c.Reg, "couponlink_over_issued", nil)
	require.EqualValues(t, 1, over, "template 1 is over its budget now")

	l.exec(`INSERT INTO ` + l.tq("t_user_coupon") + ` (tpl_id, source, state, uid) VALUES (1, 'app', 0, 'more')`)
	c.Stop(t)
	c = start(false)
	require.Equal(t, map[string]int{inventory.AnomalyOverIssue: 1}, l.anomalies(), "still over: nothing new")
	c.Stop(t)
	start(true)
	require.Equal(t, map[string]int{inventory.AnomalyOverIssue: 2}, l.anomalies(), "a --rebuild checks its snapshot")
	require.EqualValues(t, 2, l.checkpoint().Anomalies)
}
