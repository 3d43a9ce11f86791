package sink_test

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/couponlink/couponlink/internal/cdcenv"
	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/inventory"
)

// env is one test's database, Redis prefix, write path and in-process cdc
// (internal/cdcenv, shared with reconcile's tests).
type env struct{ *cdcenv.Env }

func newEnv(t *testing.T) *env { return &env{cdcenv.New(t)} }

// assertTruth checks invariants 3 and 4: counters == GROUP BY at the
// checkpoint (writes quiesced), and Redis == claimable.
//
// The cdc may commit work of its own after the wait (a release round of
// due slots, counted only when it reads the round back from the binlog),
// so a difference is looked at again after the next catch-up, a few times;
// a counter that is wrong stays wrong and fails.
func (e *env) assertTruth(withRedis bool) {
	e.T.Helper()
	var truth, counters map[inventory.Pair]inventory.Counts
	for try := 0; try < 5; try++ {
		e.WaitCheckpoint()
		if truth, counters = e.Truth(), e.Counters(); reflect.DeepEqual(truth, counters) {
			break
		}
	}
	require.Equal(e.T, truth, counters, "derived counters differ from GROUP BY over user_coupon")
	if withRedis {
		e.AssertRedis()
	}
}

func (e *env) anomalies() map[string]int {
	e.T.Helper()
	return testenv.CountsBy[string](e.T, e.DB, `SELECT kind, COUNT(*) FROM cdc_anomaly GROUP BY kind`)
}
