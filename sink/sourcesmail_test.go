package sink_test

import (
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/inventory"
)

// mailRows is the rows of cdc_sources_mail on a source's server.
// writeOffAgainWithJudgeDown claims and redeems a coupon of template 2 on
// server on, kills east's cdc (the judge) once every checkpoint has the
// redemption, and writes the coupon off again on the other server: a
// duplicate redemption across servers that the judge can only decide once
// it is back.
func (s *twoServerShop) writeOffAgainWithJudgeDown(on int) {
	s.t.Helper()
	c, err := s.claimOf(2, s.userOn(on, 2), nil)
	require.NoError(s.t, err)
	require.NoError(s.t, s.redeem(c, s.userOn(on, 2)))
	s.waitCheckpoints()
	s.kill(0)
	require.NoError(s.t, s.writeOff(c, s.userOn(1-on, 2)))
}

func (s *twoServerShop) mailRows(i int) int {
	s.t.Helper()
	var n int
	require.NoError(s.t, s.envs[i].DB.QueryRow(`SELECT COUNT(*) FROM cdc_sources_mail`).Scan(&n))
	return n
}

// waitMailDrained waits until both servers' mail is pruned to no row.
func (s *twoServerShop) waitMailDrained(when string) {
	s.t.Helper()
	cdctest.WaitFor(s.t, 30*time.Second, "the mail pruned to 0 rows "+when, func() bool {
		return s.mailRows(0) == 0 && s.mailRows(1) == 0
	})
}

// waitJudged waits until east (the judge) has recorded want duplicate
// write-offs, whichever cdc is down, and asserts no more.
func (s *twoServerShop) waitJudged(want int, what string) {
	s.t.Helper()
	cdctest.WaitFor(s.t, 60*time.Second, what, func() bool { return s.count(0, inventory.AnomalyDuplicateRedemption) >= want })
	require.Equal(s.t, want, s.count(0, inventory.AnomalyDuplicateRedemption), "%s: recorded once", what)
}

// The mail to the judge is pruned once the judge has decided it, by the
// source that wrote it: both mail tables drain to 0 rows, and the
// duplicate write-offs stay exactly once, also when the judge is SIGKILLed
// after its decision and before the mail it decided is pruned.
func TestSourcesMailPruned(t *testing.T) {
	s := newOneSourceShop(t, 1000)
	s.start(0)
	s.start(1)
	dups := 0

	// written off on east, then again on west: west mails the judge
	eastUser := s.userOn(0, 0)
	c, err := s.claimOf(1, eastUser, nil)
	require.NoError(t, err)
	require.NoError(t, s.redeem(c, eastUser))
	s.waitCheckpoints()
	require.NoError(t, s.writeOff(c, s.userOn(1, 0)))
	dups++
	s.waitRecorded(inventory.AnomalyDuplicateRedemption, dups, time.Now(), "a write-off on two servers")
	s.waitMailDrained("after the judge decided")

	// west's cdc down: written off on west, then again on east (the judge
	// mails itself); west's own write-off is mailed once it is back
	westUser := s.userOn(1, 1)
	c2, err := s.claimOf(1, westUser, nil)
	require.NoError(t, err)
	s.waitCheckpoints()
	s.kill(1)
	require.NoError(t, s.redeem(c2, westUser))
	require.NoError(t, s.writeOff(c2, s.userOn(0, 1)))
	dups++
	s.waitJudged(dups, "east's write-off of a coupon west holds, west's cdc down")
	cdctest.WaitFor(t, 30*time.Second, "east's mail pruned while west's cdc is down", func() bool { return s.mailRows(0) == 0 })
	s.start(1)
	s.waitCheckpoints()
	s.judged()
	s.waitMailDrained("once west's cdc is back")
	require.Equal(t, dups, s.count(0, inventory.AnomalyDuplicateRedemption), "west's mail of the same (coupon, order) is no second report")

	// the judge decides west's mail while west's cdc is down, then is
	// SIGKILLed before west prunes it: nothing lost, nothing repeated
	s.writeOffAgainWithJudgeDown(0)
	dups++
	cdctest.WaitFor(t, 30*time.Second, "west mails the judge while it is down", func() bool { return s.mailRows(1) > 0 })
	s.kill(1)
	waiting := s.mailRows(1)
	s.start(0)
	s.waitJudged(dups, "west's mail, once the judge is back")
	require.Equal(t, waiting, s.mailRows(1), "west's mail waits for west's cdc to prune it")
	s.kill(0)
	s.start(0)
	s.judged()
	require.Equal(t, dups, s.count(0, inventory.AnomalyDuplicateRedemption), "the judge killed after its decision does not decide it again")
	s.start(1)
	s.waitMailDrained("once west's cdc is back after the judge's kill")

	// a restart of both: the mail stays empty and nothing is decided again
	s.kill(0)
	s.kill(1)
	s.start(0)
	s.start(1)
	s.waitCheckpoints()
	s.judged()
	require.Equal(t, 0, s.mailRows(0)+s.mailRows(1))
	require.Equal(t, map[string]int{inventory.AnomalyDuplicateRedemption: dups}, s.anomalies(), "each write-off on two servers exactly once")
	for _, p := range s.procs {
		require.NoError(t, p.signal(syscall.SIGTERM))
	}
}
