package sink_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/internal/mysqlconn"
	"github.com/couponlink/couponlink/inventory"
)

// The sharded shop over two servers with its campaign table on east only
// (a sharding middleware's "single table"): west's cdc reads it on east
// and follows it through east's cdc; east judges what only the sum shows.
const oneSourceMappingYAML = shardCouponsYAML + `
redemption_log: {table: "SHARD_{0..1}.redemption_log_{0..3}", id: id, coupon: coupon_id, order: order_no}
template: {table: SHARD_0.coupon_tpl, id: id, total_quota: budget, per_user_limit: lim, source: east}
default_channel: legacy
sources:
  - {name: east, dsn: "EAST_DSN"}
  - {name: west, dsn_env: WEST_ENV, user_coupon: "SHARD_{2..3}.user_coupon_{0..3}", redemption_log: "SHARD_*.redemption_log_*"}
`

// small is the template with a small budget the over-issue cases use.
const small = 4

// newOneSourceShop is the two-server shop whose template table is on east
// only, with template 4's budget at budget.
func newOneSourceShop(t *testing.T, budget int) *twoServerShop {
	s := newTwoServerShopOf(t, oneSourceMappingYAML)
	west := fmt.Sprintf("`%s%d`.coupon_tpl", s.prefix, s.firstSchema(1))
	s.execOn(s.envs[1].DB, "DROP TABLE "+west) // the single table: on east only
	s.execOn(s.envs[0].DB, "ALTER TABLE "+s.tplTable()+" ADD COLUMN lim INT NOT NULL DEFAULT 0")
	s.setBudget(small, budget)
	s.execOn(s.envs[0].DB, fmt.Sprintf("CREATE TABLE `%s0`.tick (id INT NOT NULL PRIMARY KEY, n INT NOT NULL)", s.prefix))
	s.procs = make([]*cdcProcess, 2)
	return s
}

// tplTable is the template table, on east.
func (s *twoServerShop) tplTable() string { return fmt.Sprintf("`%s0`.coupon_tpl", s.prefix) }

// setLimit sets (or creates) a template's per-user limit on east.
func (s *twoServerShop) setLimit(tpl int64, limit int) {
	s.execOn(s.envs[0].DB, "INSERT INTO "+s.tplTable()+" (id, budget, lim) VALUES (?, 1000, ?) ON DUPLICATE KEY UPDATE lim = VALUES(lim)", tpl, limit)
}

// setBudget sets (or creates) a template's budget on east.
func (s *twoServerShop) setBudget(tpl int64, budget int) {
	s.execOn(s.envs[0].DB, "INSERT INTO "+s.tplTable()+" (id, budget) VALUES (?, ?) ON DUPLICATE KEY UPDATE budget = VALUES(budget)", tpl, budget)
}

// userOn is a user whose shard is on server i.
func (s *twoServerShop) userOn(i int, n int64) int64 {
	u := int64(16*(20+n) + 1 + 8*int64(i)) // shards 1 (east) and 9 (west)
	require.Same(s.t, s.servers[i], s.serverOf(u))
	return u
}

// claimSmall claims n coupons of the small template for users on server i.
func (s *twoServerShop) claimSmall(i, n int) {
	s.t.Helper()
	for k := range n {
		_, err := s.claimOf(small, s.userOn(i, int64(k)), "app")
		require.NoError(s.t, err)
	}
}

// kill stops source i's cdc with SIGKILL (signal waits until it is gone).
func (s *twoServerShop) kill(i int) { _ = s.procs[i].signal(syscall.SIGKILL) }

// count is the anomalies of a kind recorded on server i.
func (s *twoServerShop) count(i int, kind string) int { return s.envs[i].anomalies()[kind] }

// waitRecorded waits until east (the judge) has want anomalies of kind,
// and returns how long after since that took.
func (s *twoServerShop) waitRecorded(kind string, want int, since time.Time, what string) time.Duration {
	s.t.Helper()
	cdctest.WaitFor(s.t, 60*time.Second, what, func() bool {
		for i := range s.procs {
			require.False(s.t, s.procs[i].exited(), "couponlink cdc -source %s exited by itself: %v", s.names[i], s.procs[i].err)
		}
		return s.count(0, kind) >= want
	})
	took := time.Since(since)
	require.Equal(s.t, want, s.count(0, kind), "%s: recorded once", what)
	require.Zero(s.t, s.count(1, kind), "%s: never on west", what)
	return took
}

// judged waits until east's cdc has judged the sum after now: it judges
// at a heartbeat at most every 500 ms, and two heartbeats saved (each
// after a commit of a table it does not follow, a second apart) hold one.
func (s *twoServerShop) judged() {
	s.t.Helper()
	for range 2 {
		start := s.batches(0)
		s.execOn(s.envs[0].DB, fmt.Sprintf("INSERT INTO `%s0`.tick (id, n) VALUES (1, 1) ON DUPLICATE KEY UPDATE n = n + 1", s.prefix))
		cdctest.WaitFor(s.t, 30*time.Second, "east's cdc saves a heartbeat", func() bool {
			require.False(s.t, s.procs[0].exited(), "couponlink cdc -source east exited by itself: %v", s.procs[0].err)
			return s.batches(0) > start
		})
	}
}

// templateState is a source's template rules saved with its checkpoint.
func (s *twoServerShop) templateState(i int) map[int64]string {
	s.t.Helper()
	return s.rules(s.envs[i].DB, `SELECT template_id, budget, per_user_limit FROM cdc_template_state WHERE name = ?`, s.names[i])
}

// rules reads (template, budget, limit) rows as "budget/limit" by template.
func (s *twoServerShop) rules(db *sql.DB, query string, args ...any) map[int64]string {
	s.t.Helper()
	rows, err := db.Query(query, args...)
	require.NoError(s.t, err)
	defer rows.Close()
	out := map[int64]string{}
	for rows.Next() {
		var id, b, limit int64
		require.NoError(s.t, rows.Scan(&id, &b, &limit))
		out[id] = fmt.Sprintf("%d/%d", b, limit)
	}
	require.NoError(s.t, rows.Err())
	return out
}

// tableRules is the template table as it is, on east.
func (s *twoServerShop) tableRules() map[int64]string {
	return s.rules(s.envs[0].DB, "SELECT id, budget, lim FROM "+s.tplTable())
}

// The template table on one of two servers: both cdcs start (west has no
// copy), the shop writes while each cdc is killed -9 at random and the
// budgets change on east mid-run; after each kill and at the end each
// server's counters equal its tables' truth, both cdcs hold the budgets
// the table holds, and the small template's over-issue on the sum (6 on
// east + 9 on west over a budget of 10, then a cut below the sum while
// east's cdc is down) is recorded exactly twice, by east, never by west.
// A per-user limit set, then raised, on east is judged on west by the
// limit in force: the 2nd coupon over 1, the 4th over 3.
func TestTemplateOnOneSource(t *testing.T) {
	s := newOneSourceShop(t, 10)
	rng := rand.New(rand.NewPCG(rand.Uint64(), 27))
	require.NoError(t, s.work(rng, 100), "before the first start")
	s.start(0)
	s.start(1)
	s.assertTruth("after the bootstraps")

	s.claimSmall(0, 6)
	s.claimSmall(1, 4)
	s.assertTruth("10 of the small template's budget of 10")
	s.judged()
	require.Zero(t, s.anomalies()[inventory.AnomalyOverIssue], "at the budget: not over")

	kills := 0
	for round := range 3 {
		s.busy(rng, 3, 100, func(left *atomic.Int64) {
			s.setBudget(1, 2_000_000+round) // budgets changed on east mid-run
			victims := [][]int{{0}, {1}, {0, 1}}[round]
			for _, i := range victims {
				s.killWhileApplying(rng, i, left)
				kills++
			}
			s.setBudget(2, 3_000_000+round) // while a cdc is down
			if round == 1 {
				s.claimSmall(1, 5) // 6 + 9 over 10, while west's cdc is down: decided once it is back
			}
			for _, i := range victims {
				s.start(i)
			}
		})
		s.assertTruth(fmt.Sprintf("after kill %d", kills))
	}
	s.waitRecorded(inventory.AnomalyOverIssue, 1, time.Now(), "the sum over the budget, once west's cdc is back")

	s.kill(0) // east, the judge, is down while the budget is raised, then cut below the sum
	s.setBudget(small, 100)
	s.claimSmall(1, 1)
	s.start(0)
	s.assertTruth("after the top-up")
	s.judged()
	s.kill(0)
	s.setBudget(small, 12)
	s.start(0)
	s.waitRecorded(inventory.AnomalyOverIssue, 2, time.Now(), "the cut below the sum, once east's cdc is back")

	// a per-user limit set and raised on east is west's from its cdc on
	const limited = 5
	s.setLimit(limited, 1)
	u := s.userOn(1, 30)
	for range 2 {
		_, err := s.claimOf(limited, u, nil)
		require.NoError(t, err)
	}
	s.assertTruth("a limit of 1")
	require.Equal(t, 1, s.count(1, inventory.AnomalyPerUserLimitExceeded), "west judges by the limit on east")
	s.setLimit(limited, 3)
	cdctest.WaitFor(t, 30*time.Second, "west holds the limit east's cdc holds", func() bool {
		return s.templateState(1)[limited] == "1000/3"
	})
	for range 2 {
		_, err := s.claimOf(limited, u, nil)
		require.NoError(t, err)
	}
	s.assertTruth("at the end")
	require.Equal(t, s.tableRules(), s.templateState(0), "east's cdc holds the table's rules")
	cdctest.WaitFor(t, 30*time.Second, "west holds the rules east's cdc holds", func() bool {
		return fmt.Sprint(s.templateState(0)) == fmt.Sprint(s.templateState(1))
	})
	require.Equal(t, map[string]int{inventory.AnomalyOverIssue: 2, inventory.AnomalyPerUserLimitExceeded: 2}, s.anomalies(),
		"the two crossings of the sum, the coupons over the limit in force on west, nothing else")
	for _, p := range s.procs {
		require.NoError(t, p.signal(syscall.SIGTERM))
	}
}

// A (coupon, order) written off on both servers, and an over-issue only
// the sum shows, are recorded by the cdcs (on east, the judge) within 5 s
// of the commit, once; also when the cdc of the other source is down at
// that moment: then once it is back. couponlink status -mapping counts
// each once.
func TestCrossSourceAnomaliesLive(t *testing.T) {
	s := newOneSourceShop(t, 10)
	s.start(0)
	s.start(1)
	s.assertTruth("at the start")
	dups := 0

	// written off on east, then again on west
	eastUser := s.userOn(0, 0)
	c, err := s.claimOf(1, eastUser, "app")
	require.NoError(t, err)
	require.NoError(t, s.redeem(c, eastUser))
	s.waitCheckpoints()
	require.NoError(t, s.writeOff(c, s.userOn(1, 0)))
	dups++
	took := s.waitRecorded(inventory.AnomalyDuplicateRedemption, dups, time.Now(), "a write-off on two servers")
	t.Logf("a (coupon, order) written off on two servers: recorded %s after the second commit", took.Round(time.Millisecond))
	require.LessOrEqual(t, took, 5*time.Second)

	// the sum over the budget: 6 on east, 4 on west, then one more on west
	s.claimSmall(0, 6)
	s.claimSmall(1, 4)
	s.assertTruth("at the budget")
	s.judged()
	require.Zero(t, s.count(0, inventory.AnomalyOverIssue))
	_, err = s.claimOf(small, s.userOn(1, 10), nil)
	require.NoError(t, err)
	took = s.waitRecorded(inventory.AnomalyOverIssue, 1, time.Now(), "the sum over the budget")
	t.Logf("an over-issue only the sum shows: recorded %s after the commit", took.Round(time.Millisecond))
	require.LessOrEqual(t, took, 5*time.Second)

	// west's cdc down: its second write-off, and its claim over the new
	// budget, wait for it
	s.setBudget(small, 20)
	c2, err := s.claimOf(1, eastUser, nil)
	require.NoError(t, err)
	require.NoError(t, s.redeem(c2, eastUser))
	s.assertTruth("before west's cdc goes down")
	s.judged()
	s.kill(1)
	require.NoError(t, s.writeOff(c2, s.userOn(1, 1)))
	dups++
	s.claimSmall(1, 10) // 6 + 15 over 20
	s.judged()
	require.Equal(t, dups-1, s.count(0, inventory.AnomalyDuplicateRedemption), "nothing is seen of west's rows while its cdc is down")
	require.Equal(t, 1, s.count(0, inventory.AnomalyOverIssue), "west's counters are as its cdc left them")
	back := time.Now()
	s.start(1)
	took = s.waitRecorded(inventory.AnomalyDuplicateRedemption, dups, back, "west's second write-off, once its cdc is back")
	t.Logf("west's cdc was down: the write-off on two servers recorded %s after it started again", took.Round(time.Millisecond))
	s.waitRecorded(inventory.AnomalyOverIssue, 2, back, "the sum over the new budget, once west's cdc is back")

	// east's cdc (the judge) down: west's write-off waits in its mail
	s.writeOffAgainWithJudgeDown(1)
	dups++
	start := s.batches(1)
	cdctest.WaitFor(t, 30*time.Second, "west mails east", func() bool { return s.batches(1) > start+1 })
	back = time.Now()
	s.start(0)
	took = s.waitRecorded(inventory.AnomalyDuplicateRedemption, dups, back, "a write-off on two servers while the judge was down, once it is back")
	t.Logf("east's cdc was down: the write-off on two servers recorded %s after it started again", took.Round(time.Millisecond))

	s.assertTruth("at the end")
	s.judged()
	want := map[string]int{inventory.AnomalyDuplicateRedemption: dups, inventory.AnomalyOverIssue: 2}
	require.Equal(t, want, s.anomalies(), "each once, over both servers")
	var open int
	require.NoError(t, s.envs[0].DB.QueryRow(`SELECT COUNT(*) FROM finding WHERE source = 'cdc'`).Scan(&open))
	require.Equal(t, dups+1, open, "a finding each (the two over-issues of one template are one finding)")

	m, err := canal.ReadMappingFile(s.mapping)
	require.NoError(t, err)
	across, err := inventory.ReadSources(context.Background(), m, func(dsn string) (*sql.DB, error) { return mysqlconn.Open(dsn, 2) }, 5*time.Second)
	require.NoError(t, err)
	got := map[string]int{}
	for _, src := range across.Sources {
		require.True(t, src.Counted(), "source %s: %v", src.Name, src.Err)
		for k, n := range src.Status.Anomalies {
			got[k] += int(n)
		}
	}
	require.Equal(t, want, got, "status -mapping counts each once")
	for _, p := range s.procs {
		require.NoError(t, p.signal(syscall.SIGTERM))
	}
}
