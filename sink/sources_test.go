package sink_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/inventory"
)

// The sharded shop over two servers: each holds two schemas of four
// user_coupon_N and four redemption_log_N tables (16 tables in all), the
// template table copied on both. East's DSN is in the file, west's in an
// environment variable; west names its own tables, its redemption log by
// a pattern matched on its server.
const sourcesMappingYAML = shardCouponsYAML + `
redemption_log: {table: "SHARD_{0..1}.redemption_log_{0..3}", id: id, coupon: coupon_id, order: order_no}
template: {table: SHARD_0.coupon_tpl, id: id, total_quota: budget}
default_channel: legacy
sources:
  - {name: east, dsn: "EAST_DSN"}
  - {name: west, dsn_env: WEST_ENV, user_coupon: "SHARD_{2..3}.user_coupon_{0..3}", redemption_log: "SHARD_*.redemption_log_*", template: SHARD_2.coupon_tpl}
`

// twoServerShop is the shop, the two servers' environments and a cdc
// runner per source.
type twoServerShop struct {
	*shardShop
	envs    []*env
	servers []*testenv.MariaDB
	names   []string
	runners []*cdcRunner
	procs   []*cdcProcess
	mapping string // the mapping file
}

func newTwoServerShop(t *testing.T) *twoServerShop { return newTwoServerShopOf(t, sourcesMappingYAML) }

// newTwoServerShopOf is the shop attached by mappingYAML (SHARD_,
// EAST_DSN and WEST_ENV stand for the test's names).
func newTwoServerShopOf(t *testing.T, mappingYAML string) *twoServerShop {
	east, eastServer := ownServerEnv(t)
	west, westServer := ownServerEnv(t)
	s := &twoServerShop{shardShop: newShardShop(t, []*sql.DB{east.DB, west.DB}, 16), envs: []*env{east, west},
		servers: []*testenv.MariaDB{eastServer, westServer}, names: []string{"east", "west"}}
	envVar := "COUPONLINK_TEST_WEST_DSN_" + strings.ToUpper(strings.TrimSuffix(s.prefix, "_"))
	t.Setenv(envVar, west.DSN) // inherited by the cdc processes
	doc := strings.NewReplacer("SHARD_", s.prefix, "EAST_DSN", east.DSN, "WEST_ENV", envVar).Replace(mappingYAML)
	path := filepath.Join(t.TempDir(), "sources.yaml")
	require.NoError(t, os.WriteFile(path, []byte(doc), 0o600))
	s.mapping = path
	for i, e := range s.envs {
		r := newCDCRunner(t, e, testenv.RedisAddr(t))
		r.args = append(r.args, "-mapping", path, "-source", s.names[i])
		s.runners = append(s.runners, r)
	}
	return s
}

// serverOf is the test server that holds a user's shard.
func (s *twoServerShop) serverOf(user int64) *testenv.MariaDB {
	for i, db := range s.shardShop.servers {
		if db == s.server(user) {
			return s.servers[i]
		}
	}
	return nil
}

func (s *twoServerShop) start(i int) {
	s.procs = append(s.procs[:i], append([]*cdcProcess{s.runners[i].start()}, s.procs[i+1:]...)...)
}

// waitCheckpoints waits until each source's checkpoint (named by the
// source) reaches its server's binlog end as of the call.
func (s *twoServerShop) waitCheckpoints() {
	s.t.Helper()
	for i, e := range s.envs {
		target, err := canal.CurrentPosition(e.Ctx, e.DB)
		require.NoError(s.t, err)
		cdctest.WaitFor(s.t, 60*time.Second, "the checkpoint of "+s.names[i]+" reaches "+target.String(), func() bool {
			require.False(s.t, s.procs[i].exited(), "couponlink cdc -source %s exited by itself: %v", s.names[i], s.procs[i].err)
			cp, found, err := inventory.LoadCheckpoint(e.Ctx, e.DB, s.names[i])
			require.NoError(s.t, err)
			return found && cp.Pos.File != "" && cp.Pos.Compare(target) >= 0
		})
	}
}

// assertTruth: each server's counters equal the truth over its eight
// tables, and so their sum the truth over all sixteen.
func (s *twoServerShop) assertTruth(when string) {
	s.t.Helper()
	s.waitCheckpoints()
	for i, e := range s.envs {
		require.Equal(s.t, s.sqlTruth(i), e.Counters(), "counters of %s against its eight tables counted by hand, %s", s.names[i], when)
	}
}

// anomalies are the anomalies of both sources, summed by kind.
func (s *twoServerShop) anomalies() map[string]int {
	out := map[string]int{}
	for _, e := range s.envs {
		for k, n := range e.anomalies() {
			out[k] += n
		}
	}
	return out
}

func (s *twoServerShop) batches(i int) int64 {
	cp, _, err := inventory.LoadCheckpoint(context.Background(), s.envs[i].DB, s.names[i])
	require.NoError(s.t, err)
	return cp.Batches
}

// killWhileApplying SIGKILLs source i's cdc at a random moment (up to 30
// ms) after it applied another batch, so that the kill lands while it
// works; it fails if the cdc exited by itself. The wait ends early once
// the writers are done (left at 0).
func (s *twoServerShop) killWhileApplying(rng *rand.Rand, i int, left *atomic.Int64) {
	s.t.Helper()
	start := s.batches(i)
	cdctest.WaitFor(s.t, 60*time.Second, "the cdc applies batches", func() bool {
		require.False(s.t, s.procs[i].exited(), "couponlink cdc -source %s exited by itself: %v", s.names[i], s.procs[i].err)
		return s.batches(i) > start || left.Load() == 0
	})
	time.Sleep(time.Duration(rng.IntN(30)) * time.Millisecond) // the random moment of the kill
	s.kill(i)
}

// The sharded shop over two servers with one `couponlink cdc -source` per
// server, each killed -9 at random while the shop writes: after each kill
// and at the end each server's counters equal its tables' truth (their
// sum the whole shop's), every injected anomaly is reported once, and a
// redemption row a middleware wrote on the other server than its coupon
// (before or after the coupon became USED) is found there: no
// used_without_redemption.
func TestShopOverTwoServers(t *testing.T) {
	s := newTwoServerShop(t)
	rng := rand.New(rand.NewPCG(rand.Uint64(), 14))
	require.NoError(t, s.work(rng, 200), "before the first start")
	s.procs = make([]*cdcProcess, 2)
	s.start(0)
	s.start(1)
	s.assertTruth("after the bootstraps")

	kills := 0
	for round := range 3 {
		s.busy(rng, 3, 150, func(left *atomic.Int64) {
			s.faults(rng, 8) // rows on the other server
			s.faults(rng, 1)
			victims := [][]int{{0}, {1}, {0, 1}}[rng.IntN(3)]
			for _, i := range victims {
				s.killWhileApplying(rng, i, left)
				kills++
			}
			if round == 1 {
				s.faults(rng, 8) // a backlog with faults while a cdc is down
			}
			for _, i := range victims {
				s.start(i)
			}
		})
		s.assertTruth(fmt.Sprintf("after kill %d", kills))
	}

	for i, e := range s.envs {
		cdctest.WaitFor(t, 60*time.Second, "every redemption check of "+s.names[i]+" decided", func() bool { return e.pendingChecks() == 0 })
	}
	s.waitCheckpoints()
	require.Equal(t, s.expected(), s.anomalies(), "each injected anomaly once, over both servers and the kills")
	s.assertTruth("at the end")
	for _, p := range s.procs {
		require.NoError(t, p.signal(syscall.SIGTERM))
	}
}

// A peer that is down makes the checks that need it wait, never decide
// without it: east's coupon becomes USED with its write-off to come on
// west; west is down past the grace, and east (which logs that it cannot
// ask west) reports nothing; west comes back, the row is written there,
// and the check settles with no anomaly. A use with no row anywhere is
// still reported once west answers.
func TestPeerSourceDown(t *testing.T) {
	s := newTwoServerShop(t)
	rng := rand.New(rand.NewPCG(rand.Uint64(), 15))
	s.procs = make([]*cdcProcess, 2)
	s.start(0)
	s.start(1)
	s.assertTruth("at the start")

	east := int64(16*10 + 1) // shard 1: east; user+8 is on west
	require.Same(t, s.servers[0], s.serverOf(east))
	rowLater, err := s.claim(rng, east)
	require.NoError(t, err)
	noRow, err := s.claim(rng, east)
	require.NoError(t, err)
	s.servers[1].Stop(syscall.SIGKILL)
	require.NoError(t, s.setState(rowLater, 0, 1))
	require.NoError(t, s.setState(noRow, 0, 1))
	s.expect(inventory.AnomalyUsedWithoutRedemption)

	logged := func() bool {
		data, err := os.ReadFile(s.runners[0].stderr.Name())
		require.NoError(t, err)
		return strings.Count(string(data), `lookup="redemption rows"`) >= 3
	}
	cdctest.WaitFor(t, 60*time.Second, "east finds west down at the due checks", logged)
	require.Equal(t, 2, s.envs[0].pendingChecks(), "both uses wait for west")
	require.Empty(t, s.envs[0].anomalies(), "nothing decided without west")

	s.servers[1].Start()
	require.NoError(t, s.writeOff(rowLater, east+8))
	cdctest.WaitFor(t, 60*time.Second, "east decides once west answers", func() bool { return s.envs[0].pendingChecks() == 0 })
	require.Equal(t, s.expected(), s.anomalies(), "the use without a row once; the one written off on west, none")
}
